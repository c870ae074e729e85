#!/usr/bin/env python3
"""Time XLA's own HLO text parser against hlomem on the same file.

XLA side: the HLO parser that ships in jaxlib, called in-process on text that
was already read into memory, so only the parse is timed.
hlomem side: `hlomem analyze FILE --format json > /dev/null` in a subprocess,
timed wall-clock. This includes process start-up, reading the file, the memory
analysis and writing the JSON, so it is an upper bound on hlomem's parse time.

The two are run alternately, so a slow patch on the machine (another job,
thermal throttling) hits both about equally. The script prints the median and
minimum time of each, throughput in MB/s (1 MB = 10^6 bytes of HLO text), and
the ratio of hlomem's throughput to XLA's.

Usage:
    python bench/compare_xla.py [FILE ...] [--runs N] [--hlomem PATH] [--xla-only]
"""

import argparse
import gc
import importlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILE = (REPO_ROOT.parent / "shared" / "corpus" / "cases" / "big_transformer_48L_unrolled"
                / "dump" / "module_0000.jit_train_step.cpu_after_optimizations.txt")
DEFAULT_HLOMEM = REPO_ROOT / "target" / "release" / "hlomem"

# Where different jaxlib versions expose XLA's HLO text parser, newest first.
# In jaxlib 0.10.x, jax._src.lib.xla_client.hlo (also jax._src.lib.hlo) is the
# jaxlib._hlo extension module. Older jaxlibs had the function on the
# xla_extension module, which xla_client calls _xla.
PARSER_SPELLINGS = (
    "jax._src.lib.xla_client.hlo.hlo_module_from_text",
    "jax._src.lib.hlo.hlo_module_from_text",
    "jaxlib._hlo.hlo_module_from_text",
    "jax._src.lib.xla_client._xla.hlo_module_from_text",
    "jaxlib.xla_extension.hlo_module_from_text",
)


def resolve(dotted):
    """Import the longest importable prefix of `dotted` and getattr the rest.

    Needed because some steps are attributes rather than submodules
    (jax._src.lib.xla_client is a module object re-exported by jax._src.lib).
    """
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"nothing importable in {dotted}")


def find_xla_parser():
    """Return (callable, dotted name) for the first spelling that exists."""
    tried = []
    for name in PARSER_SPELLINGS:
        try:
            return resolve(name), name
        except (ImportError, AttributeError) as e:
            tried.append(f"{name}: {e.__class__.__name__}: {e}")
    sys.exit("no HLO text parser found in the installed jax/jaxlib; tried:\n  "
             + "\n  ".join(tried))


def time_xla(parse, text):
    """Seconds for one in-process parse of `text`."""
    gc.disable()  # keep a collection of unrelated Python objects out of the timing
    try:
        t0 = time.perf_counter()
        module = parse(text)
        elapsed = time.perf_counter() - t0
    finally:
        gc.enable()
    del module  # freeing the C++ module happens outside the timed region
    return elapsed


def time_hlomem(hlomem, path):
    """Wall-clock seconds for one `hlomem analyze PATH --format json > /dev/null`."""
    cmd = [str(hlomem), "analyze", str(path), "--format", "json"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"hlomem failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                 + proc.stderr.decode(errors="replace")[-2000:])
    return elapsed


def summary(label, times, size):
    med, best = statistics.median(times), min(times)
    print(f"  {label:7s} median {med * 1e3:9.1f} ms  min {best * 1e3:9.1f} ms  "
          f"-> {size / med / 1e6:7.1f} MB/s median, {size / best / 1e6:7.1f} MB/s best"
          f"  ({len(times)} runs)")
    return size / med


def bench_file(path, opts, parse):
    text = path.read_text()
    size = path.stat().st_size
    print(f"{path}  ({size / 1e6:.2f} MB)")

    # One untimed warm-up of each side: the first parse pays for one-time
    # set-up (opcode tables, allocator growth) and the first hlomem run for
    # loading the binary from disk into the page cache.
    for _ in range(opts.warmup):
        time_xla(parse, text)
        if not opts.xla_only:
            time_hlomem(opts.hlomem, path)

    xla_times, hlomem_times = [], []
    for _ in range(opts.runs):
        xla_times.append(time_xla(parse, text))
        if not opts.xla_only:
            hlomem_times.append(time_hlomem(opts.hlomem, path))

    xla_tp = summary("XLA", xla_times, size)
    if not opts.xla_only:
        hlomem_tp = summary("hlomem", hlomem_times, size)
        print(f"  hlomem/XLA throughput (medians): {hlomem_tp / xla_tp:.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, default=[DEFAULT_FILE],
                    help="HLO text files (default: the 6.6 MB big_transformer_48L_unrolled "
                         "after-optimizations module in ../shared/corpus)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs of each side (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    ap.add_argument("--hlomem", type=Path, default=DEFAULT_HLOMEM,
                    help="hlomem binary (default: target/release/hlomem)")
    ap.add_argument("--xla-only", action="store_true", help="time only XLA's parser")
    opts = ap.parse_args()
    if opts.runs < 1:
        ap.error("--runs must be at least 1")

    if not opts.xla_only and not opts.hlomem.is_file():
        sys.exit(f"{opts.hlomem} not found: run `cargo build --release` first, "
                 "pass --hlomem PATH, or use --xla-only")
    for f in opts.files:
        if not f.is_file():
            sys.exit(f"no such file: {f}")

    # Parsing needs no device; keep jax from probing for GPU/TPU plugins.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jaxlib
    parse, where = find_xla_parser()
    print(f"XLA parser: {where} (jaxlib {jaxlib.__version__})")
    if not opts.xla_only:
        print(f"hlomem: {opts.hlomem}")

    for f in opts.files:
        bench_file(f, opts, parse)


if __name__ == "__main__":
    main()
