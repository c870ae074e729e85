#!/usr/bin/env python3
"""Regenerate the TensorFlow and PyTorch/XLA samples, samples/tf_*/ and samples/pt_*/.

Each case is a small program of one front-end, run on XLA's CPU backend with
XLA's text dumps turned on. Its setup runs first (variables, a first training
step whose graph differs from the steady one), the dump folder is emptied, and
then the step of interest runs once, so the dump holds that one module. For
every case this writes
    samples/<case>/dump/        the module's HLO before and after optimizations, XLA's
                                buffer assignment (one file in these versions:
                                allocations, used values, live ranges) and its
                                memory-usage report
    samples/<case>/truth.json   XLA's own figures for the module: "Total bytes
                                used:", allocation bytes per color, the live-range
                                peak, the memory-usage report's totals
Usage (from anywhere; README.md says which packages):
    python samples/gen_frontend_samples.py            # every case
    python samples/gen_frontend_samples.py CASE ...   # only these
    python samples/gen_frontend_samples.py --list
    python samples/gen_frontend_samples.py --out DIR  # write the cases under DIR instead
XLA reads XLA_FLAGS once per process, so each case runs in a process of its
own (the script runs itself with --child CASE). The child runs the programs
compiled under this file's path relative to the repository, so the source
lines torch_xla writes (XLA_HLO_DEBUG=1) name samples/gen_frontend_samples.py
wherever the repository is cloned (Python names a script by its absolute path).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SAMPLES_DIR = Path(__file__).resolve().parent
REPO_ROOT = SAMPLES_DIR.parent
SCRIPT = Path(__file__).resolve().relative_to(REPO_ROOT)

# What is kept of a module's dump, by what follows "module_NNNN.<name>", as
# gen_samples.py keeps it. The rest (LLVM IR, object files, TensorFlow's and
# torch_xla's own graph dumps) is deleted: hlomem does not read it.
KEPT_SUFFIXES = (
    ".before_optimizations.txt",
    ".cpu_after_optimizations.txt",
    ".cpu_after_optimizations-buffer-assignment.txt",
    ".cpu_after_optimizations-buffer-assignment-values.txt",
    ".cpu_after_optimizations-live-range.txt",
    ".cpu_after_optimizations-memory-usage-report.txt",
)

# name -> (front-end, description, extra environment)
CASES = {
    "tf_add": ("tensorflow",
               ("@tf.function(jit_compile=True) add(a, b) = a + b on f32[1024,1024]"), {}),
    "tf_while": ("tensorflow",
                 ("tf.while_loop of ten x = tanh(x @ w), x and w f32[256,256], in a "
                 "tf.function(jit_compile=True)"), {}),
    "tf_mlp_train": ("tensorflow",
                     ("Keras MLP 256-256-10 training step, batch 64: GradientTape, sparse "
                     "categorical cross-entropy, Adam's apply_gradients (resource variables)"), {}),
    "tf_conv_train": ("tensorflow",
                      ("Keras conv net (Conv2D 8 3x3, max pool, Conv2D 16 3x3, Dense 10) on "
                      "f32[32,28,28,1] training step: GradientTape, SGD with momentum"), {}),
    "pt_add": ("pytorch-xla",
               ("c = a + b on two f32[1024,1024] XLA tensors, then torch_xla.sync()"),
               {}),
    "pt_add_hlodebug": ("pytorch-xla",
                        ("pt_add run with XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1 (source lines and aten "
                        "op names in the metadata)"),
                        {"XLA_IR_DEBUG": "1", "XLA_HLO_DEBUG": "1"}),
    "pt_mlp_train": ("pytorch-xla",
                     ("nn.Linear MLP 256-256-10 training step, batch 64: cross-entropy, SGD with "
                     "momentum, torch_xla.sync(); the second step (momentum buffers exist)"), {}),
    "pt_conv_train": ("pytorch-xla",
                      ("conv net (Conv2d 8 3x3, max pool, Conv2d 16 3x3, Linear 10) on "
                      "f32[32,1,28,28] training step: cross-entropy, SGD with momentum, "
                      "torch_xla.sync(); the second step"), {}),
    "pt_compile": ("pytorch-xla",
                   ("torch.compile(backend=\"openxla\") of an MLP 256-512-256 forward pass "
                   "(torch.no_grad), batch 64"), {}),
}


# ---------------------------------------------------------------------------
# The programs. Each returns a function that runs the step of interest once;
# everything before the return is setup, whose modules are not kept.
# ---------------------------------------------------------------------------

def tf_programs(case):
    import keras
    import tensorflow as tf

    if case == "tf_add":
        @tf.function(jit_compile=True)
        def add(a, b):
            return a + b

        a = tf.random.normal([1024, 1024])
        b = tf.random.normal([1024, 1024])
        return lambda: add(a, b).numpy()

    if case == "tf_while":
        @tf.function(jit_compile=True)
        def loop(x, w):
            def cond(i, x):
                return i < 10

            def body(i, x):
                return i + 1, tf.tanh(tf.matmul(x, w))
            _, out = tf.while_loop(cond, body, (tf.constant(0), x))
            return out

        x = tf.random.normal([256, 256])
        w = tf.random.normal([256, 256]) * 0.05
        return lambda: loop(x, w).numpy()

    if case in ("tf_mlp_train", "tf_conv_train"):
        keras.utils.set_random_seed(0)
        if case == "tf_mlp_train":
            model = keras.Sequential([keras.Input((256,)),
                                      keras.layers.Dense(256, activation="relu"),
                                      keras.layers.Dense(10)])
            opt = keras.optimizers.Adam(1e-3)
            x = tf.random.normal([64, 256])
            y = tf.random.uniform([64], 0, 10, dtype=tf.int32)
        else:
            model = keras.Sequential([keras.Input((28, 28, 1)),
                                      keras.layers.Conv2D(8, 3, activation="relu"),
                                      keras.layers.MaxPooling2D(),
                                      keras.layers.Conv2D(16, 3, activation="relu"),
                                      keras.layers.Flatten(),
                                      keras.layers.Dense(10)])
            opt = keras.optimizers.SGD(0.01, momentum=0.9)
            x = tf.random.normal([32, 28, 28, 1])
            y = tf.random.uniform([32], 0, 10, dtype=tf.int32)
        opt.build(model.trainable_variables)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function(jit_compile=True)
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return lambda: train_step(x, y).numpy()
    raise KeyError(case)


def pt_programs(case):
    import torch
    import torch_xla
    from torch import nn

    torch.manual_seed(0)
    dev = torch_xla.device()
    if case in ("pt_add", "pt_add_hlodebug"):
        # Made on the host and moved: a transfer, not a graph of its own.
        a = torch.randn(1024, 1024).to(dev)
        b = torch.randn(1024, 1024).to(dev)

        def step():
            c = a + b
            torch_xla.sync()
            return c.cpu()
        return step

    if case in ("pt_mlp_train", "pt_conv_train"):
        if case == "pt_mlp_train":
            model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
            x = torch.randn(64, 256)
            y = torch.randint(0, 10, (64,))
        else:
            model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(8, 16, 3), nn.ReLU(), nn.Flatten(),
                                  nn.Linear(16 * 11 * 11, 10))
            x = torch.randn(32, 1, 28, 28)
            y = torch.randint(0, 10, (32,))
        model = model.to(dev)
        x, y = x.to(dev), y.to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()

        def train_step():
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            torch_xla.sync()
            return loss.item()
        # The first step makes the momentum buffers: its graph is not the
        # steady one.
        train_step()
        return train_step

    if case == "pt_compile":
        model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)).to(dev)
        model.eval()
        x = torch.randn(64, 256).to(dev)
        torch_xla.sync()
        compiled = torch.compile(model, backend="openxla")

        def forward():
            with torch.no_grad():
                return compiled(x).cpu()
        return forward
    raise KeyError(case)


# ---------------------------------------------------------------------------
# Parent: one fresh process per case
# ---------------------------------------------------------------------------

def run_case(case, out_dir):
    case_dir = out_dir / case
    if case_dir.exists():
        shutil.rmtree(case_dir)
    dump_dir = case_dir / "dump"
    dump_dir.mkdir(parents=True)
    frontend, _, extra = CASES[case]
    env = dict(os.environ)
    # Replace, not extend, any XLA_FLAGS the caller set: other flags change the dumps.
    env["XLA_FLAGS"] = f"--xla_dump_to={dump_dir} --xla_dump_hlo_as_text"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["CUDA_VISIBLE_DEVICES"] = ""
    if frontend == "pytorch-xla":
        env["PJRT_DEVICE"] = "CPU"
    for k in ("XLA_IR_DEBUG", "XLA_HLO_DEBUG"):
        env.pop(k, None)
    env.update(extra)
    subprocess.run([sys.executable, str(SCRIPT), "--child", case, "--out", str(out_dir)],
                   env=env, check=True, cwd=REPO_ROOT)


# ---------------------------------------------------------------------------
# Child: run the program, keep the one module, write truth.json
# ---------------------------------------------------------------------------

def module_prefixes(dump_dir):
    suffix = ".cpu_after_optimizations.txt"
    return sorted(p.name[:-len(suffix)] for p in dump_dir.iterdir() if p.name.endswith(suffix))


def empty(dump_dir):
    for p in dump_dir.iterdir():
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()


def read_xla_reports(dump_dir, prefix):
    """XLA's figures from the module's reports, in the one-file layout of these
    versions (allocations, "Total bytes used:", "Used values:" and the
    HloLiveRange in -buffer-assignment.txt) or the three-file one."""
    def text(suffix):
        path = dump_dir / (prefix + ".cpu_after_optimizations" + suffix)
        return path.read_text() if path.exists() else ""

    reports = text("-buffer-assignment.txt") + text("-buffer-assignment-values.txt") \
        + text("-live-range.txt")
    out = {}
    out["total_bytes_used"] = int(re.search(r"^Total bytes used: (\d+)", reports, re.MULTILINE).group(1))
    m = re.search(r"^\s*Live ranges at (\d+) \(peak\):\n((?:\s+.*\(cumulative: \d+ bytes\)\n?)*)",
                  reports, re.MULTILINE)
    if m:
        cumulative = re.findall(r"\(cumulative: (\d+) bytes\)", m.group(2))
        out["live_range_peak_time"] = int(m.group(1))
        out["live_range_peak_bytes"] = int(cumulative[-1]) if cumulative else 0
    usage = text("-memory-usage-report.txt")
    # These versions' report starts with the total; newer ones give one per memory space.
    out["memory_usage_report_total_bytes"] = [
        int(t) for t in re.findall(r"^Total bytes(?: used)?: (\d+)", usage, re.MULTILINE)]
    out["memory_usage_report"] = {
        f"{name} (color={color})": int(total) for name, color, total in re.findall(
            r"^Memory Space: (\S+) \(color=(\d+)\)\nTotal bytes: (\d+)", usage, re.MULTILINE)}
    by_color = {}
    for size, rest in re.findall(r"^allocation \d+: size (\d+),(.*)$", reports, re.MULTILINE):
        color = re.search(r"\bcolor (\d+)", rest)
        color = color.group(1) if color else "0"
        by_color[color] = by_color.get(color, 0) + int(size)
    out["allocation_bytes_by_color"] = dict(sorted(by_color.items(), key=lambda kv: int(kv[0])))
    return out


def versions(frontend):
    from importlib.metadata import version
    names = ["tensorflow-cpu", "keras"] if frontend == "tensorflow" else ["torch", "torch_xla"]
    return {n: version(n) for n in names}


def child(case, out_dir):
    frontend, description, extra = CASES[case]
    dump_dir = out_dir / case / "dump"
    assert f"--xla_dump_to={dump_dir}" in os.environ.get("XLA_FLAGS", ""), \
        "run without --child; the parent sets XLA_FLAGS"
    # This file's code again, under its repository-relative name: the frames
    # torch_xla records then say samples/gen_frontend_samples.py.
    programs = {"__name__": "gen_frontend_samples_programs", "__file__": __file__}
    exec(compile(Path(__file__).read_text(), str(SCRIPT), "exec"), programs)  # noqa: S102
    build = programs["tf_programs" if frontend == "tensorflow" else "pt_programs"]
    step = build(case)
    empty(dump_dir)
    step()
    prefixes = module_prefixes(dump_dir)
    assert len(prefixes) == 1, f"{case}: expected one module in the dump, got {prefixes}"
    prefix = prefixes[0]
    for p in sorted(dump_dir.iterdir()):
        if p.is_dir():
            shutil.rmtree(p)
        elif not (p.name.startswith(prefix + ".") and p.name.endswith(KEPT_SUFFIXES)):
            p.unlink()
    after = (dump_dir / (prefix + ".cpu_after_optimizations.txt")).read_text()
    truth = {
        "frontend": frontend,
        "versions": versions(frontend),
        "backend": "cpu",
        "xla_flags": "--xla_dump_to=<case>/dump --xla_dump_hlo_as_text",
        "env": {k: v for k, v in sorted(extra.items())}
        | ({"PJRT_DEVICE": "CPU"} if frontend == "pytorch-xla" else {}),
        "cpu_count": os.cpu_count(),
        "modules_of_interest": [{
            "dump_prefix": prefix,
            "description": description,
            "after_optimizations_header": after.split("\n", 1)[0],
            "xla_reported": read_xla_reports(dump_dir, prefix),
            "files": {p.name[len(prefix) + 1:]: p.stat().st_size
                      for p in sorted(dump_dir.iterdir())},
        }],
    }
    (out_dir / case / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*", help="cases to make (default: all)")
    parser.add_argument("--list", action="store_true", help="list the cases")
    parser.add_argument("--out", type=Path, default=SAMPLES_DIR,
                        help="where the case folders go (default: samples/)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out_dir = args.out.resolve()
    if args.child:
        child(args.child, out_dir)
        return
    if args.list:
        for name, (frontend, description, _) in CASES.items():
            print(f"{name:16} {frontend:12} {description}")
        return
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)} (see --list)")
    for case in args.cases or CASES:
        print(f"== {case}", flush=True)
        run_case(case, out_dir)


if __name__ == "__main__":
    main()
