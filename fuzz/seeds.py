#!/usr/bin/env python3
"""Writes large generated seeds for the fuzz targets: deep nesting and wide fan-out.

    fuzz/seeds.py hlo DIR         HLO modules, for hlo_parse and analyze
    fuzz/seeds.py xla_report DIR  buffer-assignment, values and live-range texts joined by NUL
    fuzz/seeds.py oom_message DIR OOM messages with thousands of buffers

Every file is valid input of its kind, so the fuzzer starts past the grammar, on
the paths that recurse or loop over everything: nested calls and while bodies,
long chains, one value read by thousands, a concatenate of 100,000 operands.
The HLO ones reach 1.3 MB, the others stay under 1 MB (run.sh raises -max_len to fit).
"""

import os
import sys

DEPTH = 3000
WIDTH = 20000
CONCAT = 100000
REPORT_WIDTH = 2000  # report and message seeds: wide, but under 1 MB each


def hlo(out):
    # 3,000 computations, each calling the one before.
    lines = ["HloModule nested_calls, entry_computation_layout={(f32[4]{0})->f32[4]{0}}", ""]
    lines += ["c0 {", "  p = f32[4]{0} parameter(0)", "  ROOT n = f32[4]{0} negate(p)", "}", ""]
    for i in range(1, DEPTH):
        lines += [
            f"c{i} {{",
            "  p = f32[4]{0} parameter(0)",
            f"  ROOT r = f32[4]{{0}} call(p), to_apply=c{i - 1}",
            "}",
            "",
        ]
    lines += [
        "ENTRY main {",
        "  p = f32[4]{0} parameter(0)",
        f"  ROOT r = f32[4]{{0}} call(p), to_apply=c{DEPTH - 1}",
        "}",
    ]
    write(out, "gen_nested_calls.txt", lines)

    # 3,000 while bodies, each running a while over the one before.
    t = "(f32[4]{0})"
    lines = [f"HloModule nested_whiles, entry_computation_layout={{({t})->{t}}}", ""]
    lines += ["cond {", f"  p = {t} parameter(0)", "  ROOT f = pred[] constant(false)", "}", ""]
    lines += [
        "b0 {",
        f"  p = {t} parameter(0)",
        "  g = f32[4]{0} get-tuple-element(p), index=0",
        "  n = f32[4]{0} negate(g)",
        f"  ROOT t = {t} tuple(n)",
        "}",
        "",
    ]
    for i in range(1, DEPTH):
        lines += [
            f"b{i} {{",
            f"  p = {t} parameter(0)",
            f"  ROOT w = {t} while(p), condition=cond, body=b{i - 1}",
            "}",
            "",
        ]
    lines += [
        "ENTRY main {",
        f"  p = {t} parameter(0)",
        f"  ROOT w = {t} while(p), condition=cond, body=b{DEPTH - 1}",
        "}",
    ]
    write(out, "gen_nested_whiles.txt", lines)

    # A scheduled chain of 20,000 instructions, each reading the one before.
    lines = [
        "HloModule chain, is_scheduled=true, entry_computation_layout={(f32[16]{0})->f32[16]{0}}",
        "",
        "ENTRY main {",
        "  v0 = f32[16]{0} parameter(0)",
    ]
    lines += [f"  v{i} = f32[16]{{0}} negate(v{i - 1})" for i in range(1, WIDTH)]
    lines += [f"  ROOT r = f32[16]{{0}} negate(v{WIDTH - 1})", "}"]
    write(out, "gen_chain.txt", lines)

    # 20,000 instructions reading one value, all live until a 20,000-element tuple.
    shape = "(" + ", ".join(["f32[16]{0}"] * WIDTH) + ")"
    lines = [
        f"HloModule fanout, is_scheduled=true, entry_computation_layout={{(f32[16]{{0}})->{shape}}}",
        "",
        "ENTRY main {",
        "  v = f32[16]{0} parameter(0)",
    ]
    lines += [f"  r{i} = f32[16]{{0}} negate(v)" for i in range(WIDTH)]
    lines += [f"  ROOT t = {shape} tuple(" + ", ".join(f"r{i}" for i in range(WIDTH)) + ")", "}"]
    write(out, "gen_fanout.txt", lines)

    # One concatenate of 100,000 operands.
    lines = [
        f"HloModule concat, is_scheduled=true, entry_computation_layout={{(f32[1]{{0}})->f32[{CONCAT}]{{0}}}}",
        "",
        "ENTRY main {",
        "  p = f32[1]{0} parameter(0)",
        f"  ROOT c = f32[{CONCAT}]{{0}} concatenate("
        + ", ".join(["p"] * CONCAT)
        + "), dimensions={0}",
        "}",
    ]
    write(out, "gen_concat.txt", lines)

    # A parameter whose shape is a tuple nested 3,000 deep.
    shape = "(" * DEPTH + "f32[4]{0}" + ")" * DEPTH
    lines = [
        f"HloModule nested_tuple, entry_computation_layout={{({shape})->{shape}}}",
        "",
        "ENTRY main {",
        f"  ROOT p = {shape} parameter(0)",
        "}",
    ]
    write(out, "gen_nested_tuple.txt", lines)


def xla_report(out):
    # 2,000 allocations, values and live ranges of one module, as the target takes them:
    # buffer-assignment NUL values NUL live-range.
    n = REPORT_WIDTH
    ba = ["BufferAssignment:"]
    for i in range(n):
        ba += [
            f"allocation {i}: size 64, maybe-live-out:",
            f" value: <{i} v{i} @0> (size=64,offset=0): f32[16]{{0}}",
        ]
    values = ["", f"Total bytes used: {64 * n} (0.01MiB)", "", "Used values:"]
    for i in range(n):
        values += [
            f"<{i} v{i} @0>",
            " positions:",
            f"  v{i}",
            " uses:",
            f"  v{i + 1}, operand 0" if i + 1 < n else "  (none)",
            f" from instruction: %v{i} = f32[16]{{0}} negate(%v{max(i - 1, 0)})",
        ]
    lr = [f"HloLiveRange (max {n}):", "  InstructionSequence:"]
    lr += [f"    {i}:v{i}" for i in range(n)]
    lr += ["  BufferLiveRange:"]
    lr += [f"    v{i}{{}}:{i}-{min(i + 1, n)}" for i in range(n)]
    lr += [f"  Live ranges at {n - 1} (peak):"]
    lr += [f"    v{i}{{}}: 64 bytes (cumulative: {64 * (i + 1)} bytes)" for i in range(n)]
    text = "\n".join(ba) + "\n\0" + "\n".join(values) + "\n\0" + "\n".join(lr) + "\n"
    with open(os.path.join(out, "gen_wide_reports.txt"), "w") as f:
        f.write(text)


def oom_message(out):
    # The GPU block with 2,000 peak buffers.
    lines = [
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8000000 bytes.",
        "BufferAssignment OOM Debugging.",
        "BufferAssignment stats:",
        "             parameter allocation:   15.26MiB",
        "                 total allocation:   22.89MiB",
        "Peak buffers:",
    ]
    for i in range(1, REPORT_WIDTH + 1):
        lines += [
            f"\tBuffer {i}:",
            "\t\tSize: 7.63MiB",
            f'\t\tOperator: op_name="jit(fn)/op{i}" source_file="m.py" source_line={i}',
            "\t\tXLA Label: fusion",
            "\t\tShape: f64[1000,1000]",
            "\t\t==========================",
            "",
        ]
    write(out, "gen_gpu_many_buffers.txt", lines)

    # The TPU compile-time report with 2,000 allocations, one of them a tuple nested 3,000 deep.
    lines = [
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
            "Ran out of memory in memory space hbm. Used 40.12G of 30.75G hbm. Exceeded hbm capacity by 9.37G."
        ),
        "",
        "Total hbm usage >= 41.37G:",
        "    reserved          1.25G",
        "    program          40.12G",
        "    arguments            0B",
        "",
        "  Largest program allocations in hbm:",
        "",
    ]
    for i in range(1, REPORT_WIDTH + 1):
        shape = "(" * DEPTH + "f32[8]{0}" + ")" * DEPTH if i == 1 else "f32[32,16]{1,0:T(8,128)}"
        lines += [
            f"  {i}. Size: 2.00M",
            f'     Operator: op_name="jit(f)/op{i}"',
            f"     Shape: {shape}",
            "     Unpadded size: 2.00M",
            f"     XLA label: fusion.{i} = fusion(param.1), kind=kLoop",
            "     Allocation type: HLO temp",
            "     ==========================",
            "",
        ]
    write(out, "gen_tpu_many_allocations.txt", lines)


def write(out, name, lines):
    with open(os.path.join(out, name), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    kind, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    {"hlo": hlo, "xla_report": xla_report, "oom_message": oom_message}[kind](out)
