#!/usr/bin/env python3
"""Time hlomem's whole analysis against XLA's own HLO text parser on the same file.

XLA side: the HLO parser that ships in jaxlib, called in-process on text that
was already read into memory, so only the parse is timed.
hlomem side: `hlomem analyze FILE --format json > /dev/null` in a subprocess,
end to end (process start-up, reading, parsing, the memory accounting, the
findings and the JSON), once with each RAYON_NUM_THREADS of --threads, with its
peak RSS.

The sides run alternately, so a slow patch on the machine (another job,
thermal throttling) hits both about equally. For each the script prints the
median and minimum time and MB/s (1 MB = 10^6 bytes of HLO text); for hlomem
also how many times faster than XLA's parse it is and its peak RSS against the
file size, with the targets of issue #19 (with two threads, the whole analysis
in at most half the time of XLA's parse alone, i.e. a ratio of at least 2; peak
RSS at most 4x the file). `--folder DIR` also times a folder of many modules with 1
and 2 threads (target: 1.8x from the second thread).

Usage:
    python measure/compare_xla.py [FILE ...] [--runs N] [--threads 1,2] [--folder DIR]
                                [--hlomem PATH] [--xla-only]
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
DEFAULT_FILE = (
    REPO_ROOT.parent
    / "shared"
    / "corpus"
    / "cases"
    / "big_transformer_48L_unrolled"
    / "dump"
    / "module_0000.jit_train_step.cpu_after_optimizations.txt"
)
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
    sys.exit(
        "no HLO text parser found in the installed jax/jaxlib; tried:\n  " + "\n  ".join(tried)
    )


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


GNU_TIME = "/usr/bin/time"


def run_hlomem(hlomem, path, threads):
    """(wall seconds, peak RSS bytes) of one `hlomem analyze PATH --format json > /dev/null`
    with RAYON_NUM_THREADS=threads (None: all cores)."""
    cmd = [str(hlomem), "analyze", str(path), "--format", "json"]
    env = dict(os.environ)
    if threads:
        env["RAYON_NUM_THREADS"] = str(threads)
    # The peak RSS comes from GNU time: a child forked from this (large) Python
    # process inherits its high-water mark, so Python's own rusage would report
    # Python's size, not hlomem's. time's overhead is a fork and an exec.
    timed = [GNU_TIME, "-f", "%M"] + cmd
    t0 = time.perf_counter()
    proc = subprocess.run(
        timed, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False
    )
    elapsed = time.perf_counter() - t0
    stderr = proc.stderr.decode(errors="replace")
    # Exit 1 means "over a budget or findings over a threshold": still a full run.
    if proc.returncode not in (0, 1):
        sys.exit(f"hlomem failed (exit {proc.returncode}): {' '.join(cmd)}\n" + stderr[-2000:])
    rss_kb = int(stderr.strip().splitlines()[-1])
    return elapsed, rss_kb * 1024


def summary(label, times, size):
    med, best = statistics.median(times), min(times)
    print(
        f"  {label:18s} median {med * 1e3:9.1f} ms  min {best * 1e3:9.1f} ms  "
        f"-> {size / med / 1e6:7.1f} MB/s median, {size / best / 1e6:7.1f} MB/s best"
        f"  ({len(times)} runs)"
    )
    return med


def verdict(ok):
    return "meets" if ok else "MISSES"


def bench_file(path, opts, parse):
    text = path.read_text()
    size = path.stat().st_size
    print(f"{path}  ({size / 1e6:.2f} MB)")
    threads = [] if opts.xla_only else opts.threads

    # One untimed warm-up of each side: the first parse pays for one-time
    # set-up (opcode tables, allocator growth) and the first hlomem run for
    # loading the binary from disk into the page cache.
    for _ in range(opts.warmup):
        time_xla(parse, text)
        for n in threads:
            run_hlomem(opts.hlomem, path, n)

    # Alternate XLA and hlomem, so that a slow patch on the machine hits both.
    xla_times = []
    hlomem_runs = {n: [] for n in threads}
    for _ in range(opts.runs):
        xla_times.append(time_xla(parse, text))
        for n in threads:
            hlomem_runs[n].append(run_hlomem(opts.hlomem, path, n))

    xla = summary("XLA parse", xla_times, size)
    for n in threads:
        runs = hlomem_runs[n]
        med = summary(f"hlomem {n} thread{'s' if n > 1 else ''}", [t for t, _ in runs], size)
        rss = max(r for _, r in runs)
        target = "" if n == 1 else f" ({verdict(xla / med >= 2)} the target of at least 2)"
        print(
            f"    XLA's parse time / hlomem's end-to-end time = {xla / med:.2f}{target}; "
            f"peak RSS {rss / 1e6:.0f} MB = {rss / size:.1f}x the file "
            f"({verdict(rss <= 4 * size)} the 4x target)"
        )


def bench_folder(folder, opts):
    """`hlomem analyze FOLDER` with 1 and 2 threads, alternating."""
    files = [f for f in folder.iterdir() if f.is_file()]
    size = sum(f.stat().st_size for f in files)
    print(f"{folder}  ({len(files)} files, {size / 1e6:.2f} MB)")
    for _ in range(opts.warmup):
        run_hlomem(opts.hlomem, folder, 1)
    times = {1: [], 2: []}
    for _ in range(opts.runs):
        for n, runs in times.items():
            runs.append(run_hlomem(opts.hlomem, folder, n)[0])
    one = summary("hlomem 1 thread", times[1], size)
    two = summary("hlomem 2 threads", times[2], size)
    print(
        f"    1-thread time / 2-thread time = {one / two:.2f} "
        f"({verdict(one / two >= 1.8)} the target of at least 1.8)"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "files",
        nargs="*",
        type=Path,
        default=[DEFAULT_FILE],
        help="HLO text files (default: the 6.6 MB big_transformer_48L_unrolled "
        "after-optimizations module in ../shared/corpus)",
    )
    ap.add_argument("--runs", type=int, default=5, help="timed runs of each side (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    ap.add_argument(
        "--hlomem",
        type=Path,
        default=DEFAULT_HLOMEM,
        help="hlomem binary (default: target/release/hlomem)",
    )
    ap.add_argument("--xla-only", action="store_true", help="time only XLA's parser")
    ap.add_argument(
        "--threads",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[1, 2],
        help="RAYON_NUM_THREADS values for hlomem, comma-separated (default 1,2)",
    )
    ap.add_argument(
        "--folder",
        type=Path,
        action="append",
        default=[],
        help="also time `hlomem analyze FOLDER` with 1 and 2 threads "
        "(measure/make_data.sh makes target/bench-data/folder)",
    )
    opts = ap.parse_args()
    if opts.runs < 1:
        ap.error("--runs must be at least 1")

    if not opts.xla_only and not Path(GNU_TIME).is_file():
        sys.exit(f"{GNU_TIME} (GNU time) is needed to measure hlomem's peak RSS: apt install time")
    if not opts.xla_only and not opts.hlomem.is_file():
        sys.exit(
            f"{opts.hlomem} not found: run `cargo build --release` first, "
            "pass --hlomem PATH, or use --xla-only"
        )
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
    for folder in opts.folder:
        bench_folder(folder, opts)


if __name__ == "__main__":
    main()
