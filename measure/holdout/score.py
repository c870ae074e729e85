#!/usr/bin/env python3
"""Compares hlomem with XLA on dumps laid out like ../shared/accelerators:
<root>/<target>/cases/<case>/{dump/, truth.json}.

For every module with XLA's reports, the after-optimizations HLO is copied
alone to an empty folder as `module.txt` (no file name, no report, no
target_arguments.txt helps; the TPU chip is passed with --tpu, as a user
would) and `hlomem analyze --format json` is compared with truth.json:
argument, output, alias (memory_analysis), temp (CPU and GPU), "Total bytes
used" when hlomem says its total is exact, and every memory space hlomem marks
exact against XLA's allocation bytes of that color. Estimates that differ are
shown in brackets, not counted.

A case whose compile failed (no report in its truth.json) counts as a miss.
Exits 1 unless every module agrees (CI runs it on the programs of
gen_holdout.py's CI_PROGRAMS).

usage: python measure/holdout/score.py ROOT [--hlomem target/release/hlomem]
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("root")
ap.add_argument("--hlomem", default="target/release/hlomem")
args = ap.parse_args()

ok = total = 0
for truth_path in sorted(glob.glob(f"{args.root}/*/cases/*/truth.json")):
    truth = json.loads(Path(truth_path).read_text())
    case = os.path.dirname(truth_path)
    if not truth.get("reports"):
        total += 1
        print(
            "ERR ",
            os.path.relpath(case, args.root),
            "no XLA report: the compile failed",
            (truth.get("stderr_tail") or "")[-300:],
        )
        continue
    for prefix, report in truth.get("reports", {}).items():
        hlo = glob.glob(f"{case}/dump/{prefix}*after_optimizations.txt")
        if not hlo:
            continue
        scratch = tempfile.mkdtemp()
        shutil.copy(hlo[0], f"{scratch}/module.txt")
        chip = ["--tpu", truth["topology"].split(":")[0]] if truth["backend"] == "tpu" else []
        run = subprocess.run(
            [args.hlomem, "analyze", "--format", "json", f"{scratch}/module.txt"] + chip,
            capture_output=True,
            text=True,
            check=False,
        )
        shutil.rmtree(scratch)
        total += 1
        name = f"{os.path.relpath(case, args.root)}:{prefix.split('.')[1]}"
        if run.returncode not in (0, 1):
            print("ERR", name, run.stderr[:300])
            continue
        memory = json.loads(run.stdout)["modules"][0]["memory"]
        ma = truth["memory_analysis"]
        want = {
            "arg": ma["argument_size_in_bytes"],
            "out": ma["output_size_in_bytes"],
            "alias": ma["alias_size_in_bytes"],
        }
        got = {
            "arg": memory["argument_bytes"],
            "out": memory["output_bytes"],
            "alias": memory["alias_bytes"],
        }
        estimates = {}
        if truth["backend"] != "tpu":
            want["temp"], got["temp"] = ma["temp_size_in_bytes"], memory["temp_bytes"]
        (want if memory["total_exact"] else estimates)["total"] = report["total_bytes_used_line"]
        got["total"] = memory["total_bytes"]
        by_color = report["allocation_bytes_by_color"]
        for space in memory["by_space"]:
            key = f"space {space['name']}"
            got[key] = space["bytes"]
            (want if space["exact"] else estimates)[key] = by_color.get(str(space["color"]), 0)
        bad = [f"{k}: hlomem {got[k]}, XLA {w}" for k, w in want.items() if got[k] != w]
        notes = [f"[{k}: {got[k] - w:+}]" for k, w in estimates.items() if got[k] != w]
        if bad:
            print("DIFF", name, "; ".join(bad), " ".join(notes))
        else:
            ok += 1
            print("OK  ", name, " ".join(notes))
print(f"{ok}/{total} modules: every number hlomem calls exact equals XLA's")
sys.exit(0 if total and ok == total else 1)
