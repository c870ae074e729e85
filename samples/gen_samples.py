#!/usr/bin/env python3
"""Regenerate the sample XLA dumps in samples/<case>/ from scratch.

Each case is a small JAX program that is lowered and compiled (never run) with
XLA's text dumps turned on: CPU cases on this host's CPU backend, GPU (H100) and
TPU (v4, v5e, v5p, v6e) cases deviceless, ahead of time. For every case this writes
    samples/<case>/dump/        the .txt files XLA dumped (HLO before and after
                                optimizations, buffer assignment, live ranges,
                                memory-usage report; TPU: target_arguments)
    samples/<case>/truth.json   XLA's own memory figures for the module:
                                compiled.memory_analysis(), "Total bytes used:",
                                allocation bytes per color, live-range peak
Usage (from anywhere; GPU and TPU cases need their venv's python: README.md):
    python samples/gen_samples.py            # all CPU cases
    python samples/gen_samples.py CASE ...   # only these cases (any backend)
    python samples/gen_samples.py --backend tpu [--topology v5e:2x2]   # or gpu
    python samples/gen_samples.py --list     # --reparse: truth.json from dumps
XLA reads XLA_FLAGS once, when the backend starts, so each case needs its own
process to get its own --xla_dump_to directory: the script re-invokes itself
with --child CASE for every case (the accelerator cases are at the end of this
file, after the CPU programs, so that the CPU samples' source lines, which the
dumps and snapshots record, stay where they are).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

SAMPLES_DIR = Path(__file__).resolve().parent
REPO_ROOT = SAMPLES_DIR.parent

# The dump files kept, by the suffix that follows the "module_NNNN.<name>"
# prefix. Anything else XLA writes (.debug_options, LLVM IR .ll, object files,
# the per-module folder with module.mlir / compile_options.textproto) is
# deleted: it is bulky, machine-specific, or not something hlomem reads.
KEPT_SUFFIXES = (
    ".before_optimizations.txt",
    ".cpu_after_optimizations.txt",
    ".cpu_after_optimizations-buffer-assignment.txt",
    ".cpu_after_optimizations-buffer-assignment-values.txt",
    ".cpu_after_optimizations-live-range.txt",
    ".cpu_after_optimizations-memory-usage-report.txt",
)

# name -> (description, jax_enable_x64, number of virtual CPU devices)
CASES = {
    "add_nodonate": (
        "fn(a,b)=a+b on f64[1000,1000], no donation: a, b and the output are all live "
        "at once (the motivating OOM example, small)", True, 1),
    "add_donate0": (
        "fn(a,b)=a+b on f64[1000,1000] with donate_argnums=0: the output reuses a's buffer",
        True, 1),
    "mlp_train_donate": (
        "MLP 256-512-512-256 (f32) SGD training step, batch 64: value_and_grad + SGD "
        "update, params a list of {w, b} dicts, params donated", False, 1),
    "mlp_train_nodonate": (
        "mlp_train_donate without donation: its twin, for the saving HM001 predicts "
        "(the donated build copies the weights that the backward pass still reads)", False, 1),
    "scan_layers": (
        "lax.scan over 4 stacked layers f32[4,256,256] computing h = tanh(h@w)+h, "
        "h f32[64,256]", False, 1),
    "cond_branches": (
        "lax.cond on a bool predicate: heavy branch tanh(x@w)@w.T (two matmuls) vs "
        "light branch x*2, x and w f32[256,256]", False, 1),
    "sharded_step": (
        "data-parallel MLP 256-512-256 SGD step on 8 virtual CPU devices: batch f32[256,256] "
        "sharded over the 'data' axis, params replicated and donated; figures are per device",
        False, 8),
    "while_loop": (
        "lax.while_loop with a 4-tuple carry (s32 counter, f32[256,256] iterate, f32 error, "
        "f32[32] history): Newton iteration for sqrt with data-dependent termination",
        False, 1),
}


# ---------------------------------------------------------------------------
# Parent: one fresh subprocess per case
# ---------------------------------------------------------------------------

def run_case_in_subprocess(case):
    """Wipe samples/<case>/ and regenerate it in a fresh interpreter."""
    case_dir = SAMPLES_DIR / case
    if case_dir.exists():
        shutil.rmtree(case_dir)
    dump_dir = case_dir / "dump"
    dump_dir.mkdir(parents=True)

    _, _, devices = CASES[case]
    flags = [f"--xla_dump_to={dump_dir}", "--xla_dump_hlo_as_text"]
    if devices > 1:
        flags.append(f"--xla_force_host_platform_device_count={devices}")

    env = dict(os.environ)
    # Replace, not extend, any XLA_FLAGS the caller has set: extra flags would
    # change the dumps and make the samples differ from machine to machine.
    env["XLA_FLAGS"] = " ".join(flags)
    env["JAX_PLATFORMS"] = "cpu"
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", case],
                   env=env, check=True, cwd=REPO_ROOT)


# ---------------------------------------------------------------------------
# Child: build, compile, collect the dump, write truth.json
# ---------------------------------------------------------------------------

def build_case(case, jax, jnp, lax):
    """Return (label, fn, args, donate_argnums) for a case; args are abstract."""
    S = jax.ShapeDtypeStruct
    f32, f64 = jnp.float32, jnp.float64

    def mlp_loss(params, x, y):
        h = x
        for i, p in enumerate(params):
            h = h @ p["w"] + p["b"]
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        return jnp.mean((h - y) ** 2)

    def sgd_step(params, x, y):
        loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
        new = jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads)
        return new, loss

    def mlp_params(widths, sds):
        return [{"w": sds((a, b)), "b": sds((b,))} for a, b in zip(widths[:-1], widths[1:])]

    if case in ("add_nodonate", "add_donate0"):
        def fn(a, b):
            return a + b
        n = 1000
        donate = (0,) if case == "add_donate0" else ()
        return "fn", fn, (S((n, n), f64), S((n, n), f64)), donate

    if case in ("mlp_train_donate", "mlp_train_nodonate"):
        params = mlp_params([256, 512, 512, 256], lambda s: S(s, f32))
        donate = (0,) if case == "mlp_train_donate" else ()
        return "sgd_step", sgd_step, (params, S((64, 256), f32), S((64, 256), f32)), donate

    if case == "scan_layers":
        def scan_layers(ws, x):
            def body(h, w):
                return jnp.tanh(h @ w) + h, None
            h, _ = lax.scan(body, x, ws)
            return h
        return "scan_layers", scan_layers, (S((4, 256, 256), f32), S((64, 256), f32)), ()

    if case == "cond_branches":
        def cond_branches(pred, x, w):
            def heavy(x):
                return jnp.tanh(x @ w) @ w.T
            def light(x):
                return x * 2.0
            return lax.cond(pred, heavy, light, x)
        return ("cond_branches", cond_branches,
                (S((), jnp.bool_), S((256, 256), f32), S((256, 256), f32)), ())

    if case == "sharded_step":
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        devs = jax.devices()
        assert len(devs) == 8, f"expected 8 virtual CPU devices, got {devs}"
        mesh = Mesh(devs, ("data",))

        def sds(shape, spec):
            return S(shape, f32, sharding=NamedSharding(mesh, spec))
        params = mlp_params([256, 512, 256], lambda s: sds(s, P()))
        x = sds((256, 256), P("data"))
        y = sds((256, 256), P("data"))
        return "sgd_step", sgd_step, (params, x, y), (0,)

    if case == "while_loop":
        def newton_sqrt(a, tol):
            def cond(c):
                i, x, err, hist = c
                return jnp.logical_and(i < 32, err > tol)

            def body(c):
                i, x, err, hist = c
                xn = 0.5 * (x + a / x)
                err = jnp.max(jnp.abs(xn - x))
                return i + 1, xn, err, hist.at[i].set(err)
            init = (jnp.int32(0), jnp.ones_like(a), jnp.float32(jnp.inf), jnp.zeros((32,), f32))
            i, x, err, hist = lax.while_loop(cond, body, init)
            return x, {"iters": i, "err": err, "history": hist}
        return "newton_sqrt", newton_sqrt, (S((256, 256), f32), S((), f32)), ()

    raise SystemExit(f"unknown case {case}")


def dump_prefixes(dump_dir):
    """The set of 'module_NNNN.<name>' prefixes present in a dump directory."""
    suffix = ".before_optimizations.txt"
    return {p.name[:-len(suffix)] for p in dump_dir.iterdir() if p.name.endswith(suffix)}


def clean_dump(dump_dir):
    """Delete everything in the dump except the kept .txt files."""
    for p in sorted(dump_dir.iterdir()):
        if p.is_dir():
            shutil.rmtree(p)
        elif not p.name.endswith(KEPT_SUFFIXES):
            p.unlink()


def read_xla_reports(dump_dir, prefix, after=".cpu_after_optimizations"):
    """XLA's own memory figures, parsed from the text reports of one module.

    `after` is what follows the prefix in the after-optimizations file names:
    ".cpu_after_optimizations" (CPU), ".sm_9.0a_gpu_after_optimizations" (H100),
    ".after_optimizations" (TPU, whose prefix ends in ".cl_<id>")."""
    def text(suffix):
        return (dump_dir / (prefix + suffix.replace(".cpu_after_optimizations", after))).read_text()

    out = {}
    # In this XLA version "Total bytes used:" is printed at the top of the
    # -buffer-assignment-values.txt file; older/newer versions print it in
    # -buffer-assignment.txt, so look in both and record where it was found.
    for suffix, where in ((".cpu_after_optimizations-buffer-assignment-values.txt", "values"),
                          (".cpu_after_optimizations-buffer-assignment.txt", "buffer-assignment")):
        m = re.search(r"^Total bytes used: (\d+)", text(suffix), re.M)
        if m:
            out["total_bytes_used"] = int(m.group(1))
            out["total_bytes_used_found_in"] = where
            break

    # The peak is the last "(cumulative: N bytes)" line of the
    # "Live ranges at T (peak):" section.
    live = text(".cpu_after_optimizations-live-range.txt")
    m = re.search(r"^\s*Live ranges at (\d+) \(peak\):\n((?:\s+.*\(cumulative: \d+ bytes\)\n?)*)",
                  live, re.M)
    if m:
        cumulative = re.findall(r"\(cumulative: (\d+) bytes\)", m.group(2))
        out["live_range_peak_time"] = int(m.group(1))
        out["live_range_peak_bytes"] = int(cumulative[-1]) if cumulative else 0
    m = re.search(r"^HloLiveRange \(max (\d+)\):", live, re.M)
    if m:
        out["live_range_max_time"] = int(m.group(1))

    usage = text(".cpu_after_optimizations-memory-usage-report.txt")
    totals = re.findall(r"^Total bytes: (\d+)", usage, re.M)
    out["memory_usage_report_total_bytes"] = [int(t) for t in totals]
    # Per memory space, by XLA's name for it: "default (color=0)", "vmem (color=1)", ...
    out["memory_usage_report"] = {
        f"{name} (color={color})": int(total) for name, color, total in re.findall(
            r"^Memory Space: (\S+) \(color=(\d+)\)\nTotal bytes: (\d+)", usage, re.M)}

    # The sum of the allocation sizes in -buffer-assignment.txt, per color
    # ("allocation 16: size 14680064, color 1, ..."; no "color" means 0).
    by_color = {}
    for size, rest in re.findall(r"^allocation \d+: size (\d+),(.*)$",
                                 text(".cpu_after_optimizations-buffer-assignment.txt"), re.M):
        color = re.search(r"\bcolor (\d+)", rest)
        color = color.group(1) if color else "0"
        by_color[color] = by_color.get(color, 0) + int(size)
    out["allocation_bytes_by_color"] = dict(sorted(by_color.items(), key=lambda kv: int(kv[0])))
    return out


def aval_info(leaf):
    """shape/dtype (and the PartitionSpec, when named-sharded) of an abstract value."""
    info = {"shape": list(leaf.shape), "dtype": str(leaf.dtype)}
    spec = getattr(getattr(leaf, "sharding", None), "spec", None)
    if spec is not None:
        info["sharding"] = str(spec)
    return info


def write_truth(case, truth):
    text = json.dumps(truth, indent=1)
    # Put lists of plain numbers (shapes, argnums) on one line to keep the file
    # short. Only multi-line lists are touched: a "[" inside a JSON string (an
    # HLO shape in the header) is never followed by a raw newline.
    text = re.sub(r"\[\s*\n[\d,\s]*\]", lambda m: json.dumps(json.loads(m.group(0))), text)
    (SAMPLES_DIR / case / "truth.json").write_text(text + "\n")


def child(case):
    description, x64, devices = CASES[case]
    flags = os.environ.get("XLA_FLAGS", "")
    dump_dir = SAMPLES_DIR / case / "dump"
    assert f"--xla_dump_to={dump_dir}" in flags, "run without --child; XLA_FLAGS is set by the parent"

    import jaxlib
    import jax  # only now: XLA_FLAGS must be in the environment before jax starts XLA
    import jax.numpy as jnp
    from jax import lax

    jax.config.update("jax_enable_x64", x64)
    # Strip the checkout's location from the source-file names that JAX puts in
    # the HLO metadata (the FileNames table), so the dumps are the same
    # wherever the repo is cloned: "samples/gen_samples.py", not "/home/.../".
    jax.config.update("jax_hlo_source_file_canonicalization_regex",
                      "^" + re.escape(str(REPO_ROOT) + os.sep))

    label, fn, args, donate = builder_of(case)(case, jax, jnp, lax)

    before = dump_prefixes(dump_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Compile from ShapeDtypeStructs only: nothing is executed and no
        # helper modules (jnp.ones, device_put, ...) end up in the dump.
        lowered = jax.jit(fn, donate_argnums=donate).lower(*args)
        compiled = lowered.compile()
    new = sorted(dump_prefixes(dump_dir) - before)
    assert len(new) == 1, f"expected one new module in the dump, got {new}"
    prefix = new[0]

    ma = compiled.memory_analysis()
    fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
              "temp_size_in_bytes", "generated_code_size_in_bytes", "peak_memory_in_bytes",
              "host_argument_size_in_bytes", "host_output_size_in_bytes",
              "host_alias_size_in_bytes", "host_temp_size_in_bytes",
              "host_generated_code_size_in_bytes")
    memory_analysis = {f: int(getattr(ma, f)) for f in fields}

    clean_dump(dump_dir)
    extra = sorted(dump_prefixes(dump_dir) - {prefix})
    assert not extra, f"dump holds modules besides the one of interest: {extra}"
    files = {s.lstrip("."): (dump_dir / (prefix + s)).stat().st_size for s in KEPT_SUFFIXES}

    after_opt = (dump_dir / (prefix + ".cpu_after_optimizations.txt")).read_text()
    header = after_opt.split("\n", 1)[0]
    module_name = header.split()[1].rstrip(",")

    in_leaves = jax.tree_util.tree_leaves(args)
    arg_infos = jax.tree_util.tree_leaves(lowered.args_info)
    inputs = [dict(aval_info(a), donated=bool(i.donated)) for a, i in zip(in_leaves, arg_infos)]
    outputs = [aval_info(o) for o in jax.tree_util.tree_leaves(compiled.out_info)]
    if devices == 1:
        # single-device shardings carry no spec; keep the record uniform
        for o in outputs:
            o.pop("sharding", None)

    truth = {
        "case": case,
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "platform": jax.default_backend(),
        "device_count": jax.device_count(),
        "x64": x64,
        "xla_flags": [f if not f.startswith("--xla_dump_to=")
                      else f"--xla_dump_to=samples/{case}/dump" for f in flags.split()],
        "command": f"python samples/gen_samples.py {case}",
        "modules_of_interest": [{
            "label": label,
            "module_name": module_name,
            "dump_prefix": prefix,
            "description": description,
            "donate_argnums": list(donate),
            # flat parameter numbers of the donated leaves (the HLO parameter
            # numbers, since every leaf becomes one entry parameter here)
            "donated_parameters": [n for n, i in enumerate(inputs) if i["donated"]],
            "inputs": inputs,
            "outputs": outputs,
            "python_warnings": sorted({str(w.message) for w in caught}),
            "memory_analysis": memory_analysis,
            "memory_analysis_arg_plus_out_minus_alias_plus_temp": (
                memory_analysis["argument_size_in_bytes"] + memory_analysis["output_size_in_bytes"]
                - memory_analysis["alias_size_in_bytes"] + memory_analysis["temp_size_in_bytes"]),
            "xla_reported": read_xla_reports(dump_dir, prefix),
            "after_optimizations_header": header,
            "files": files,
        }],
        "all_dump_prefixes": sorted(dump_prefixes(dump_dir)),
    }
    write_truth(case, truth)

    r = truth["modules_of_interest"][0]["xla_reported"]
    print(f"{case:18s} {prefix:28s} arg={memory_analysis['argument_size_in_bytes']} "
          f"out={memory_analysis['output_size_in_bytes']} alias={memory_analysis['alias_size_in_bytes']} "
          f"temp={memory_analysis['temp_size_in_bytes']} peak={memory_analysis['peak_memory_in_bytes']} "
          f"total_bytes_used={r.get('total_bytes_used')} live_peak={r.get('live_range_peak_bytes')}")


# ---------------------------------------------------------------------------
# GPU and TPU cases: deviceless (ahead-of-time) compiles
# ---------------------------------------------------------------------------
#
# No GPU or TPU is needed. The compiler comes with the backend's JAX package
# (jax[cuda12]: jax-cuda12-plugin; jax[tpu]: libtpu) and is given a description
# of the target instead of a device:
#   gpu  get_topology_desc(platform="cuda", target_config=<h100.txtpb>,
#        topology="1x1x4")        (partitions x hosts x GPUs per host)
#   tpu  get_topology_desc(topology_name="v5e:2x2", platform="tpu")
# Every argument is a ShapeDtypeStruct placed on the topology's first device,
# so each case compiles one single-device module, like the CPU cases.

# The GpuTargetConfigProto of the NVIDIA H100 SXM, trimmed from XLA's
# xla/backends/gpu/target_config/specs/h100_sxm.txtpb (Apache-2.0).
H100_CONFIG = SAMPLES_DIR / "h100.txtpb"

# The environment of a deviceless compile: JAX_PLATFORMS=cpu keeps JAX from
# looking for real devices (the cuda/tpu compilers still load), the TPU ones
# keep libtpu from asking a metadata server for the host's TPU and from
# refusing to load in a second process (it takes /tmp/libtpu_lockfile).
ACCEL_ENV = {"JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}

# name -> (description, backend, topology, the CPU case whose program it compiles)
ACCEL_CASES = {
    "gpu_mlp_train_donate": (
        "mlp_train_donate compiled for an H100 (deviceless): MLP 256-512-512-256 f32 SGD "
        "step, batch 64, params donated", "gpu", "1x1x4", "mlp_train_donate"),
    "gpu_while_loop": (
        "while_loop compiled for an H100 (deviceless): lax.while_loop with a 4-tuple carry, "
        "data-dependent termination", "gpu", "1x1x4", "while_loop"),
    "tpu_mlp_train_donate": (
        "mlp_train_donate compiled for TPU v5e (v5e:2x2, one device): MLP 256-512-512-256 "
        "f32 SGD step, params donated", "tpu", "v5e:2x2", "mlp_train_donate"),
    "tpu_cond_branches": (
        "cond_branches compiled for TPU v5e (v5e:2x2, one device): lax.cond with a heavy "
        "(two matmuls) and a light branch", "tpu", "v5e:2x2", "cond_branches"),
    "tpu_while_loop": (
        "while_loop compiled for TPU v5e (v5e:2x2, one device): lax.while_loop with a "
        "4-tuple carry; async copies and VMEM (S(1)) values", "tpu", "v5e:2x2", "while_loop"),
    "tpu_v6e_mlp_train_donate": (
        "mlp_train_donate compiled for TPU v6e (v6e:2x2, one device): the v5e case on "
        "another chip", "tpu", "v6e:2x2", "mlp_train_donate"),
}

# What is kept of an accelerator dump: the same six files as on CPU (the
# after-optimizations ones are named module_NNNN.<name>.sm_9.0a_gpu_after_... on
# GPU and module_NNNN.<name>.cl_<id>.after_... on TPU) and, on TPU, the
# target_arguments.txt that names the chip (hlomem reads it for TPU sizes).
# Dropped: GPU LLVM IR/PTX, thunk sequences, autotune results, configs; TPU
# after_codegen, *_before/after_buffer_assignment copies, flag files, ...
ACCEL_KEPT = re.compile(r"(\.before_optimizations|after_optimizations"
                        r"(-buffer-assignment(-values)?|-live-range|-memory-usage-report)?"
                        r"|\.target_arguments)\.txt$")

MEMORY_ANALYSIS_FIELDS = (
    "argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
    "temp_size_in_bytes", "generated_code_size_in_bytes", "peak_memory_in_bytes",
    "host_argument_size_in_bytes", "host_output_size_in_bytes",
    "host_alias_size_in_bytes", "host_temp_size_in_bytes",
    "host_generated_code_size_in_bytes")


def accel_package_missing(backend):
    """Why this interpreter cannot compile for `backend`, or None."""
    import importlib.metadata as md
    package = {"gpu": "jax-cuda12-plugin", "tpu": "libtpu"}[backend]
    try:
        md.version(package)
        return None
    except md.PackageNotFoundError:
        return (f"{sys.executable} has no {package}: run the {backend} cases with the python of "
                f"a venv made as samples/README.md says")


def run_accel_case_in_subprocess(case):
    """Wipe samples/<case>/ and regenerate it in a fresh interpreter."""
    case_dir = SAMPLES_DIR / case
    if case_dir.exists():
        shutil.rmtree(case_dir)
    dump_dir = case_dir / "dump"
    dump_dir.mkdir(parents=True)
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_dump_to={dump_dir} --xla_dump_hlo_as_text"
    env.update(ACCEL_ENV)
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", case],
                   env=env, check=True, cwd=REPO_ROOT)


def after_optimizations_infix(dump_dir, prefix):
    """'.cpu_after_optimizations', '.sm_9.0a_gpu_after_optimizations' or
    '.after_optimizations': what follows `prefix` in its after-optimizations
    file names, or None if the module has none."""
    for p in sorted(dump_dir.iterdir()):
        if p.name.startswith(prefix + ".") and p.name.endswith("after_optimizations.txt"):
            return p.name[len(prefix):-len(".txt")]
    return None


def accel_child(case):
    description, backend, topology, program = ACCEL_CASES[case]
    x64 = program_x64(program)
    flags = os.environ.get("XLA_FLAGS", "")
    dump_dir = SAMPLES_DIR / case / "dump"
    assert f"--xla_dump_to={dump_dir}" in flags, "run without --child; XLA_FLAGS is set by the parent"

    import importlib.metadata as md
    import jaxlib
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    jax.config.update("jax_enable_x64", x64)
    jax.config.update("jax_hlo_source_file_canonicalization_regex",
                      "^" + re.escape(str(REPO_ROOT) + os.sep))
    if backend == "tpu":
        devices = topologies.get_topology_desc(topology_name=topology, platform="tpu").devices
    else:
        devices = topologies.get_topology_desc(
            platform="cuda", topology_name="", target_config=H100_CONFIG.read_text(),
            topology=topology).devices

    label, fn, args, donate = accel_builder(program)(program, jax, jnp, lax)
    on_device = SingleDeviceSharding(devices[0])
    args = jax.tree_util.tree_map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=on_device), args)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered = jax.jit(fn, donate_argnums=donate).lower(*args)
        compiled = lowered.compile()
    ma = compiled.memory_analysis()
    memory_analysis = {f: (int(getattr(ma, f)) if getattr(ma, f, None) is not None else None)
                       for f in MEMORY_ANALYSIS_FIELDS}

    # The module of interest is the one with after-optimizations reports; any
    # other module the backend dumped on the way is dropped with its files.
    with_after = [p for p in sorted(dump_prefixes(dump_dir))
                  if after_optimizations_infix(dump_dir, p)]
    assert len(with_after) == 1, f"expected one optimized module in the dump, got {with_after}"
    prefix = with_after[0]
    after = after_optimizations_infix(dump_dir, prefix)
    dropped = sorted(dump_prefixes(dump_dir) - {prefix})
    for p in sorted(dump_dir.iterdir()):
        if p.is_dir():
            shutil.rmtree(p)
        elif not p.name.startswith(prefix + ".") or not ACCEL_KEPT.search(p.name):
            p.unlink()
    files = {p.name[len(prefix) + 1:]: p.stat().st_size for p in sorted(dump_dir.iterdir())}

    after_opt = (dump_dir / (prefix + after + ".txt")).read_text()
    header = after_opt.split("\n", 1)[0]
    module_name = header.split()[1].rstrip(",")

    in_leaves = jax.tree_util.tree_leaves(args)
    arg_infos = jax.tree_util.tree_leaves(lowered.args_info)
    inputs = [dict(aval_info(a), donated=bool(i.donated)) for a, i in zip(in_leaves, arg_infos)]
    outputs = [aval_info(o) for o in jax.tree_util.tree_leaves(compiled.out_info)]
    for io in inputs + outputs:
        io.pop("sharding", None)  # all on one device

    versions = {}
    for package in ("jax", "jaxlib", "libtpu", "jax-cuda12-plugin", "jax-cuda12-pjrt"):
        try:
            versions[package] = md.version(package)
        except md.PackageNotFoundError:
            pass

    truth = {
        "case": case,
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "versions": versions,
        "backend": backend,
        "platform": devices[0].platform,
        "device_kind": devices[0].device_kind,
        "topology": topology,
        "target_config": "samples/h100.txtpb" if backend == "gpu" else None,
        "device_count": len(devices),
        "devices_used": 1,
        "x64": x64,
        "xla_flags": [f if not f.startswith("--xla_dump_to=")
                      else f"--xla_dump_to=samples/{case}/dump" for f in flags.split()],
        "env": ACCEL_ENV,
        "command": f"python samples/gen_samples.py {case}",
        "modules_of_interest": [{
            "label": label,
            "module_name": module_name,
            "dump_prefix": prefix,
            "after_optimizations_file": prefix + after + ".txt",
            "program": program,
            "description": description,
            "donate_argnums": list(donate),
            "donated_parameters": [n for n, i in enumerate(inputs) if i["donated"]],
            "inputs": inputs,
            "outputs": outputs,
            "python_warnings": sorted({str(w.message) for w in caught}),
            "memory_analysis": memory_analysis,
            "memory_analysis_arg_plus_out_minus_alias_plus_temp": (
                memory_analysis["argument_size_in_bytes"] + memory_analysis["output_size_in_bytes"]
                - memory_analysis["alias_size_in_bytes"] + memory_analysis["temp_size_in_bytes"]),
            "xla_reported": read_xla_reports(dump_dir, prefix, after),
            "after_optimizations_header": header,
            "files": files,
        }],
        "all_dump_prefixes": sorted(dump_prefixes(dump_dir)),
        "dropped_modules": dropped,
    }
    if backend == "tpu":
        truth["notes"] = [
            "TPU: argument, output and alias of memory_analysis and color 0 (default, HBM) of the "
            "buffer assignment are the figures to match; memory_analysis temp is not the buffer "
            "assignment's HBM temp (later compiler stages change it), and 'Total bytes used' adds "
            "the on-chip spaces (vmem, smem, ...) that memory-space assignment places"]
    write_truth(case, truth)

    r = truth["modules_of_interest"][0]["xla_reported"]
    print(f"{case:24s} {prefix:36s} arg={memory_analysis['argument_size_in_bytes']} "
          f"out={memory_analysis['output_size_in_bytes']} alias={memory_analysis['alias_size_in_bytes']} "
          f"temp={memory_analysis['temp_size_in_bytes']} by_color={r['allocation_bytes_by_color']} "
          f"total_bytes_used={r.get('total_bytes_used')}")


def reparse(case):
    """Re-read XLA's reports in samples/<case>/dump into truth.json's
    xla_reported (no compile): for a new truth.json field on old dumps."""
    path = SAMPLES_DIR / case / "truth.json"
    truth = json.loads(path.read_text())
    dump_dir = SAMPLES_DIR / case / "dump"
    for module in truth["modules_of_interest"]:
        prefix = module["dump_prefix"]
        module["xla_reported"] = read_xla_reports(
            dump_dir, prefix, after_optimizations_infix(dump_dir, prefix))
    write_truth(case, truth)
    print(f"{case}: xla_reported re-read from the dump")


def backend_of(case):
    return ACCEL_CASES[case][1] if case in ACCEL_CASES else "cpu"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*",
                    help=f"cases to regenerate (default: all CPU cases, or all of --backend): "
                         f"{', '.join([*CASES, *ACCEL_CASES])}")
    ap.add_argument("--backend", choices=["cpu", "gpu", "tpu"],
                    help="regenerate every case of this backend (gpu, tpu: run with the python "
                         "of a venv that has jax[cuda12] / jax[tpu])")
    ap.add_argument("--topology", help="with --backend: only the cases of this topology "
                                       "(tpu: v5e:2x2, v6e:2x2, v5p:2x2x1, v4:2x2x1; gpu: 1x1x4)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--reparse", action="store_true",
                    help="re-read XLA's reports of the existing dumps into truth.json (no compile)")
    ap.add_argument("--child", metavar="CASE", help=argparse.SUPPRESS)
    opts = ap.parse_args()

    if opts.child:
        if opts.child in ACCEL_CASES:
            accel_child(opts.child)
        else:
            child(opts.child)
        return
    if opts.list:
        for name, (desc, _, _) in CASES.items():
            print(f"{name:24s} cpu             {desc}")
        for name, (desc, backend, topology, _) in ACCEL_CASES.items():
            print(f"{name:24s} {backend} {topology:10s} {desc}")
        return
    unknown = [c for c in opts.cases if c not in CASES and c not in ACCEL_CASES]
    if unknown:
        ap.error(f"unknown case(s): {', '.join(unknown)}")
    if opts.topology and not opts.backend:
        ap.error("--topology goes with --backend")
    cases = opts.cases
    if not cases:
        backend = opts.backend or "cpu"
        cases = [c for c in [*CASES, *ACCEL_CASES] if backend_of(c) == backend
                 and (not opts.topology or ACCEL_CASES.get(c, (0, 0, None))[2] == opts.topology)]
        if not cases:
            ap.error(f"no {backend} case has topology {opts.topology}")
    if opts.reparse:
        for case in cases if opts.cases or opts.backend else [*CASES, *ACCEL_CASES]:
            if (SAMPLES_DIR / case / "truth.json").exists():
                reparse(case)
        return
    for backend in sorted({backend_of(c) for c in cases} - {"cpu"}):
        missing = accel_package_missing(backend)
        if missing:
            ap.error(missing)
    for case in cases:
        if case in ACCEL_CASES:
            run_accel_case_in_subprocess(case)
        else:
            run_case_in_subprocess(case)


# ---------------------------------------------------------------------------
# CPU heap-rule cases: regression samples for XLA buffer-assignment rules
# ---------------------------------------------------------------------------
#
# Each module here is one where hlomem without the rule named disagreed with
# XLA's buffer assignment (analyze --verify): a scan over layers with a
# fori_loop in its body (the scalar tie-break), and seeded random matmul
# networks under value_and_grad + SGD (heap packing), the seeds picked from a
# search for modules that only that rule fixes (rule_operand_freed_first also
# needs the spatial key). Change a program, a parameter or a seed and the
# module may no longer exercise its rule: check that an hlomem without the rule
# fails --verify on the new dump. These cases come after main(), before the
# __main__ guard, so that the other cases' programs and child() and main()
# keep their lines (the main() call at the end of the file moves; it is the
# "<module>" frame of every dump). child() picks the builder with builder_of().

# name -> (description, program, parameters)
RULE_CASES = {
    "rule_postorder_tie": (
        "equal-size tie-break by XLA's post-order (BufferAssigner::AssignBuffersForComputations): "
        "lax.scan over 2 stacked layers f32[2,128,128] whose body runs fori_loop(0, 2) of "
        "tanh(h@w)*0.5+h*scale, h f32[64,128], value_and_grad wrt ws and the scalar scale; returns "
        "(ws - lr*gw, count+1, lr*0.99, loss, dscale), ws/count/lr donated: same-size scalars of "
        "the entry and of the while bodies share small live-out allocations",
        "scanfori", {"L": 2, "D": 128, "B": 64, "K": 2, "step_factor": False, "layer_sums": False}),
    "rule_spatial_leader": (
        "heap spatial sort key from the first value's own live interval "
        "(GlobalDecreasingSizeBestFitHeap::GetSpatialBufferIntervalCompare): random matmul net "
        "seed 40 (B=200, sizes [64,768,320,2048,64,64,384,640,64]) under value_and_grad + SGD, "
        "weights donated",
        "randnet", {"seed": 40, "donate": True}),
    "rule_top_of_heap": (
        "best fit treats the space above the highest chunk as unbounded, used only when no "
        "interior hole fits (GlobalDecreasingSizeBestFitHeap::FindChunkCandidates / "
        "BufferIntervalTree::MakeFreeChunks): random matmul net seed 42 (B=200, sizes "
        "[640,320,320,1536,96,768]) under value_and_grad + SGD, weights donated",
        "randnet", {"seed": 42, "donate": True}),
    "rule_free_order": (
        "frees at one time step in (start, end, id) order (HeapSimulator::RunComputation): "
        "random matmul net seed 87 (B=128, sizes [64,1024,512,128,768,384,320,320,64,128]) under "
        "value_and_grad + SGD, weights donated",
        "randnet", {"seed": 87, "donate": True}),
    "rule_operand_freed_first": (
        "a value that takes over a dying operand's chunk frees the operand first, then shares "
        "(HeapSimulator::RunComputation, with the spatial key of GetSpatialBufferIntervalCompare): "
        "random matmul net seed 10 (B=256, sizes [192,128,1024,1024,384,96,1024,384,96,96,320]) "
        "under value_and_grad + SGD, no donation",
        "randnet", {"seed": 10, "donate": False}),
}
CASES.update({name: (desc, False, 1) for name, (desc, _, _) in RULE_CASES.items()})


def builder_of(case):
    """The function that builds `case`'s program: build_case or build_rule_case."""
    return build_rule_case if case in RULE_CASES else build_case


def randnet(seed, jax, jnp):
    """A seeded random network: n matmul layers (weights f32), layer i reading an
    earlier activation, tanh / gelu / relu*0.5+a*0.1, a residual add where the
    shapes allow, a loss summing mean squares of some layers; one SGD step."""
    import numpy as np
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 12))
    B = int(rng.choice([32, 64, 96, 128, 200, 256]))
    sizes = [int(x) for x in rng.choice([64, 96, 128, 192, 256, 320, 384, 512, 640, 768, 1024,
                                         1536, 2048], n + 1)]
    # which earlier h feeds layer i; weight i maps sizes[src[i]] -> sizes[i]
    src = [0] + [int(max(0, i - 1 - rng.geometric(0.5) + 1)) for i in range(1, n + 1)]
    wshapes = [(sizes[src[i]], sizes[i]) for i in range(1, n + 1)]
    acts = [int(rng.integers(0, 3)) for _ in range(n)]
    loss_terms = sorted(set(int(x) for x in rng.choice(np.arange(1, n + 1),
                                                       int(rng.integers(1, 4)))) | {n})

    def loss(ws, x):
        hs = [x]
        for i in range(1, n + 1):
            a = hs[src[i]] @ ws[i - 1]
            if acts[i - 1] == 0:
                a = jnp.tanh(a)
            elif acts[i - 1] == 1:
                a = jax.nn.gelu(a)
            else:
                a = jax.nn.relu(a) * 0.5 + a * 0.1
            if a.shape == hs[i - 1].shape:
                a = a + hs[i - 1]
            hs.append(a)
        return sum(jnp.mean(hs[t] ** 2) for t in loss_terms)

    def step(ws, x):
        l, g = jax.value_and_grad(loss)(ws, x)
        return [w - 1e-3 * gw for w, gw in zip(ws, g)], l
    S = jax.ShapeDtypeStruct
    return step, ([S(s, jnp.float32) for s in wshapes], S((B, sizes[0]), jnp.float32))


def build_rule_case(case, jax, jnp, lax):
    """Return (label, fn, args, donate_argnums) for a heap-rule case."""
    S = jax.ShapeDtypeStruct
    f32, i32 = jnp.float32, jnp.int32
    _, program, p = RULE_CASES[case]

    if program == "scanfori":
        L, D, B, K = p["L"], p["D"], p["B"], p["K"]
        # step_factor: scale tanh by (0.5 + 0.1*i) at fori step i, not by 0.5;
        # layer_sums: the scan also outputs sum(h) per layer, added to the loss.
        # Both on is the program the tie-break was found with: the same rule decides
        # it, but its dump is 238 KB; both off keeps this sample under 200 KB.
        step_factor, layer_sums = p["step_factor"], p["layer_sums"]

        def loss(ws, x, scale):
            def layer(h, w):
                def inner(i, h):
                    if step_factor:
                        return jnp.tanh(h @ w) * (0.5 + 0.1 * i.astype(f32)) + h * scale
                    return jnp.tanh(h @ w) * 0.5 + h * scale
                h = lax.fori_loop(0, K, inner, h)
                return h, (jnp.sum(h) if layer_sums else None)
            h, s = lax.scan(layer, x, ws)
            if layer_sums:
                return jnp.mean(h ** 2) + 1e-3 * jnp.sum(s)
            return jnp.mean(h ** 2)

        def train_step(ws, count, lr, x, scale):
            l, (gw, gs) = jax.value_and_grad(loss, argnums=(0, 2))(ws, x, scale)
            return ws - lr * gw, count + 1, lr * 0.99, l, gs
        args = (S((L, D, D), f32), S((), i32), S((), f32), S((B, D), f32), S((), f32))
        return "train_step", train_step, args, (0, 1, 2)

    if program == "randnet":
        step, args = randnet(p["seed"], jax, jnp)
        return "step", step, args, (0,) if p["donate"] else ()

    raise SystemExit(f"unknown rule case {case}")


# A framework training step, for the grouping of the peak by source line: the
# flax / optax frames are a library's lines, the model below is the user's.
# Needs flax and optax besides jax (pip install flax optax).
FLAX_CASES = {
    "flax_gpt_train": (
        "flax.linen GPT (2 blocks, d=64, 4 heads, seq 64, batch 8, vocab 512, dropout 0.1 on "
        "attention weights and residuals) with optax.adamw, jit(train_step), nothing donated: "
        "the peak is in the backward pass, held by dropout masks, MLP activations and the logits"),
}
# Cases added after the flax one, kept below it so that earlier lines stay put.
FLAX_CASES["cond_donate"] = (
    "x f32[512,512] donated, updated by lax.cond(pred, tanh(x @ w), x * 2): the new value comes out "
    "of the conditional and XLA copies it into x's buffer (HM003 names the cond and its branches)")
CASES.update({name: (desc, False, 1) for name, desc in FLAX_CASES.items()})


def build_flax_case(case, jax, jnp, lax):
    """Return (label, fn, args, donate_argnums): shapes from jax.eval_shape, so
    nothing runs and no helper module is compiled into the dump."""
    if case == "cond_donate":
        def cond_update(x, w, pred):
            return lax.cond(pred, lambda x: jnp.tanh(x @ w), lambda x: x * 2.0, x)
        S = jax.ShapeDtypeStruct
        args = (S((512, 512), jnp.float32), S((512, 512), jnp.float32), S((), jnp.bool_))
        return "cond_update", cond_update, args, (0,)
    import flax.linen as nn
    import optax

    class Block(nn.Module):
        heads: int

        @nn.compact
        def __call__(self, x):
            d = x.shape[-1]
            h = nn.LayerNorm()(x)
            mask = nn.make_causal_mask(x[..., 0])
            h = nn.MultiHeadDotProductAttention(num_heads=self.heads, dropout_rate=0.1,
                                                deterministic=False)(h, h, mask=mask)
            x = x + nn.Dropout(0.1, deterministic=False)(h)
            h = nn.Dense(4 * d)(nn.LayerNorm()(x))
            h = nn.Dense(d)(nn.gelu(h))
            return x + nn.Dropout(0.1, deterministic=False)(h)

    class GPT(nn.Module):
        vocab: int = 512
        d: int = 64
        layers: int = 2
        heads: int = 4

        @nn.compact
        def __call__(self, tokens):
            x = nn.Embed(self.vocab, self.d)(tokens)
            for i in range(self.layers):
                x = Block(self.heads, name=f"h_{i}")(x)
            return nn.Dense(self.vocab)(nn.LayerNorm()(x))

    model = GPT()
    tx = optax.adamw(1e-3)
    S = jax.ShapeDtypeStruct
    tokens = S((8, 64), jnp.int32)
    key = jax.eval_shape(lambda: jax.random.key(0))
    params = jax.eval_shape(lambda t: model.init({"params": jax.random.key(0),
                                                  "dropout": jax.random.key(1)}, t)["params"],
                            tokens)
    opt_state = jax.eval_shape(tx.init, params)

    def train_step(params, opt_state, tokens, rng):
        def loss_fn(p):
            logits = model.apply({"params": p}, tokens, rngs={"dropout": rng})
            return optax.softmax_cross_entropy_with_integer_labels(
                logits[:, :-1], tokens[:, 1:]).mean()
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return "train_step", train_step, (params, opt_state, tokens, key), ()


_builder_of_cpu_cases = builder_of


def builder_of(case):  # noqa: F811 (extends the one above without moving its lines)
    """The function that builds `case`'s program."""
    return build_flax_case if case in FLAX_CASES else _builder_of_cpu_cases(case)



# Programs compiled only for an accelerator, after every CPU program so that
# no CPU sample's recorded source line moves.
def build_sort_step(case, jax, jnp, lax):
    """top_k, sort and argsort of a computed f32[4096,1000]: on GPU each sort
    is a kCustom fusion whose output {0} takes its key operand's buffer
    (XLA's GPU alias info: a sort root sorts in place)."""
    def sort_step(x, w):
        h = jnp.tanh(x @ w)
        v, i = lax.top_k(h, 8)
        s = jnp.sort(h * 2.0, -1)
        return v.sum() + s[:, :4].sum(), i, jnp.argsort(h[:, 0])

    S = jax.ShapeDtypeStruct
    return "sort_step", sort_step, (S((4096, 512), jnp.float32), S((512, 1000), jnp.float32)), ()


ACCEL_PROGRAMS = {"sort_step": build_sort_step}
ACCEL_CASES["gpu_sort_step"] = (
    "sort_step compiled for an H100 (deviceless): top_k, sort and argsort of a computed "
    "f32[4096,1000], each sort a fusion that sorts in its operand's buffer", "gpu", "1x1x4",
    "sort_step")


# Two more TPU generations, after the programs so that no sample's recorded
# source line moves: v5p (one chip per device, like v5e/v6e) and v4, whose
# deviceless topology lists one device per TensorCore (8 on v4:2x2x1), each
# with half the chip's HBM, and whose memory-space assignment fills color 3.
ACCEL_CASES["tpu_v5p_mlp_train_donate"] = (
    "mlp_train_donate compiled for TPU v5p (v5p:2x2x1, one device): the v5e case on "
    "another chip", "tpu", "v5p:2x2x1", "mlp_train_donate")
ACCEL_CASES["tpu_v4_mlp_train_donate"] = (
    "mlp_train_donate compiled for TPU v4 (v4:2x2x1, one TensorCore): the v5e case on "
    "another chip", "tpu", "v4:2x2x1", "mlp_train_donate")


# A step libtpu offloads to the SparseCore, after every other program so that
# no sample's recorded source line moves: the gradient of top_k's values is a
# scatter into the router's probabilities, which libtpu 0.0.42.1 runs as an
# async-start on the "sparsecore" thread (nested: the wrapped computation
# calls one that starts another async op). Its values live until the outer
# async-done, and the nested start's tuple tables are not in HBM.
def build_topk_grad_step(case, jax, jnp, lax):
    """Router of a mixture of experts: softmax(x @ w), top-2 of 8 experts,
    value_and_grad of the sum of the squared top values, SGD on w (donated)."""
    def topk_grad_step(w, x):
        def loss(w):
            top, _ = lax.top_k(jax.nn.softmax(x @ w, -1), 2)
            return jnp.sum(top * top)
        value, grad = jax.value_and_grad(loss)(w)
        return w - 1e-3 * grad, value

    S = jax.ShapeDtypeStruct
    return "topk_grad_step", topk_grad_step, (S((256, 8), jnp.float32),
                                              S((4096, 256), jnp.float32)), (0,)


ACCEL_PROGRAMS["topk_grad_step"] = build_topk_grad_step
ACCEL_CASES["tpu_v6e_topk_grad_sparsecore"] = (
    "topk_grad_step compiled for TPU v6e (v6e:2x2, one device): an MoE router's top-2 "
    "gradient, whose scatter libtpu offloads to the SparseCore (async-start on the "
    "sparsecore thread)", "tpu", "v6e:2x2", "topk_grad_step")


# Loops nested in loops, after every other program so that no sample's
# recorded source line moves: the weight rides unchanged in the carry of an
# inner scan inside an outer scan, so each loop's body passes it through only
# by way of the loop nested in it. XLA's dataflow removes those phis too
# (`OptimizePhiValues` repeats until none is left): the weight is one value
# from before the outer loop to its end.
def build_nested_loops_step(case, jax, jnp, lax):
    """An outer scan of 2 steps around an inner scan of 3 steps of
    tanh(x @ w), with w in both carries."""

    def nested_loops_step(w, x):
        def outer(carry, _):
            def inner(carry, _):
                x, w = carry
                return (jnp.tanh(x @ w), w), None

            (x, w), _ = lax.scan(inner, carry, None, length=3)
            return (x * 2.0, w), None

        (x, _), _ = lax.scan(outer, (x, w), None, length=2)
        return x.sum()

    S = jax.ShapeDtypeStruct
    return (
        "nested_loops_step",
        nested_loops_step,
        (S((256, 256), jnp.float32), S((64, 256), jnp.float32)),
        (),
    )


ACCEL_PROGRAMS["nested_loops_step"] = build_nested_loops_step
ACCEL_CASES["tpu_nested_loops"] = (
    (
        "nested_loops_step compiled for TPU v5e (v5e:2x2, one device): a scan inside a scan, "
        "the weight passed unchanged through both loops' carries"
    ),
    "tpu",
    "v5e:2x2",
    "nested_loops_step",
)


def program_x64(program):
    return False if program in ACCEL_PROGRAMS else CASES[program][1]


def accel_builder(program):
    return ACCEL_PROGRAMS.get(program, build_case)


if __name__ == "__main__":
    main()
