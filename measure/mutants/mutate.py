"""Mutants of real HLO modules, of the kinds XLA's parser refuses.

Each mutation is a function (text, rng) -> mutated text or None (when the
module offers no place for it). `measure/mutants/campaign.py` runs a campaign
against XLA's parser and hlomem; `tests/python/test_refuses_what_xla_refuses.py`
runs a small fixed one in CI.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable

INSTR = re.compile(r"^(\s+)(ROOT )?(%?[\w.\-]+) = (.*)$")
HEAD = re.compile(r"^(ENTRY )?(%?[\w.\-]+) (\(.*\) -> .*)?\{$")
OPERANDS = re.compile(r"(\w[\w\-]*)\((.*?)\)(, |$)")


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _instructions(lines: list[str]) -> list[int]:
    return [i for i, l in enumerate(lines) if INSTR.match(l)]


def _name(line: str) -> str:
    m = INSTR.match(line)
    assert m
    return m.group(3)


def _computation_of(lines: list[str], i: int) -> tuple[int, int]:
    """The first and last line index of the computation holding line i."""
    start = i
    while start > 0 and not lines[start].endswith("{") or INSTR.match(lines[start]):
        start -= 1
    end = i
    while end < len(lines) and lines[end] != "}":
        end += 1
    return start, end


def _uses(line: str, name: str) -> bool:
    bare = name.lstrip("%")
    return re.search(r"[(, ]%?" + re.escape(bare) + r"[,)]", line.split(" = ", 1)[1]) is not None


def _pick(rng: random.Random, items: list[int]) -> int | None:
    return rng.choice(items) if items else None


def _edit_line(
    text: str,
    rng: random.Random,
    matches: Callable[[str], bool],
    edit: Callable[[str], str],
) -> str | None:
    """One instruction line that `matches`, chosen at random, replaced by
    `edit` of it; None where no line matches."""
    lines = _lines(text)
    i = _pick(rng, [i for i in _instructions(lines) if matches(lines[i])])
    if i is None:
        return None
    lines[i] = edit(lines[i])
    return "\n".join(lines)


def undefined_operand(text: str, rng: random.Random) -> str | None:
    lines = _lines(text)
    cands = [
        i
        for i in _instructions(lines)
        if re.search(r"\(%?[\w.\-]+[,)]", lines[i].split(" = ", 1)[1])
        and "parameter(" not in lines[i]
        and "constant(" not in lines[i]
    ]
    i = _pick(rng, cands)
    if i is None:
        return None
    head, rest = lines[i].split(" = ", 1)
    rest = re.sub(
        r"\((%?)([\w.\-]+)([,)])",
        lambda m: f"({m.group(1)}undefined.{rng.randrange(10**6)}{m.group(3)}",
        rest,
        count=1,
    )
    lines[i] = head + " = " + rest
    return "\n".join(lines)


def garbage_line(text: str, rng: random.Random) -> str | None:
    lines = _lines(text)
    i = _pick(rng, _instructions(lines))
    if i is None:
        return None
    junk = rng.choice(
        [
            "  garbage here",
            "  %x.1 = = f32[] add()",
            "  ;;;",
            "  = f32[2] negate(%a)",
            "  %y = f32[2]{0} (",
            "  ROOT",
        ]
    )
    lines.insert(i, junk)
    return "\n".join(lines)


BINARY = (
    "add(",
    "multiply(",
    "subtract(",
    "maximum(",
    "minimum(",
    "divide(",
    "compare(",
    "and(",
    "or(",
)


def wrong_operand_count(text: str, rng: random.Random) -> str | None:
    return _edit_line(
        text,
        rng,
        lambda l: any(" " + b in l for b in BINARY),
        lambda l: re.sub(
            r"(\b(?:add|multiply|subtract|maximum|minimum|divide|compare|and|or)\()([^,()]+), ([^,()]+)\)",
            r"\1\2)",
            l,
            count=1,
        ),
    )


def parameter_out_of_range(text: str, rng: random.Random) -> str | None:
    more = rng.choice([7, 100])
    return _edit_line(
        text,
        rng,
        lambda l: re.search(r"parameter\(\d+\)", l) is not None,
        lambda l: re.sub(
            r"parameter\((\d+)\)", lambda m: f"parameter({int(m.group(1)) + more})", l
        ),
    )


def duplicate_parameter_number(text: str, rng: random.Random) -> str | None:
    return _edit_line(
        text,
        rng,
        lambda l: re.search(r"parameter\([1-9]\d*\)", l) is not None,
        lambda l: re.sub(r"parameter\(\d+\)", "parameter(0)", l),
    )


def call_cycle(text: str, rng: random.Random) -> str | None:
    """A fused body (or any callee) calls back into its caller's computation."""
    lines = _lines(text)
    cands = [i for i in _instructions(lines) if re.search(r"calls=%?[\w.\-]+", lines[i])]
    i = _pick(rng, cands)
    if i is None:
        return None
    start, _ = _computation_of(lines, i)
    m = HEAD.match(lines[start].strip()) or re.match(r"^(ENTRY )?(%?[\w.\-]+)", lines[start])
    if not m:
        return None
    caller = m.group(2)
    lines[i] = re.sub(r"calls=%?[\w.\-]+", "calls=" + caller, lines[i], count=1)
    return "\n".join(lines)


def use_before_definition(text: str, rng: random.Random) -> str | None:
    lines = _lines(text)
    instr = _instructions(lines)
    pairs = []
    for a, b in itertools.pairwise(instr):
        if (
            b == a + 1
            and not lines[b].lstrip().startswith("ROOT")
            and _uses(lines[b], _name(lines[a]))
        ):
            pairs.append(a)
    a = _pick(rng, pairs)
    if a is None:
        return None
    lines[a], lines[a + 1] = lines[a + 1], lines[a]
    return "\n".join(lines)


def deleted_definition(text: str, rng: random.Random) -> str | None:
    lines = _lines(text)
    instr = _instructions(lines)
    cands = [
        i
        for i in instr
        if not lines[i].lstrip().startswith("ROOT") and "parameter(" not in lines[i]
    ]
    i = _pick(rng, cands)
    if i is None:
        return None
    del lines[i]
    return "\n".join(lines)


def negative_dimension(text: str, rng: random.Random) -> str | None:
    return _edit_line(
        text,
        rng,
        lambda l: re.search(r"\[\d+", l) is not None,
        lambda l: re.sub(r"\[(\d+)", r"[-\1", l, count=1),
    )


def unbalanced_attribute(text: str, rng: random.Random) -> str | None:
    lines = _lines(text)
    cands = [i for i in _instructions(lines) if re.search(r", \w+=\{[^{}]*\}", lines[i])]
    i = _pick(rng, cands)
    if i is None:
        return None
    if rng.random() < 0.5:
        lines[i] = re.sub(r"(, \w+=\{[^{}]*)\}", r"\1", lines[i], count=1)
    else:
        lines[i] = re.sub(r"(, \w+=)\{", r"\1{{", lines[i], count=1)
    return "\n".join(lines)


def bad_layout(text: str, rng: random.Random) -> str | None:
    lines = _lines(text)
    cands = [
        i for i in _instructions(lines) if re.search(r"\]\{[\d,]+\}", lines[i].split(" = ", 1)[1])
    ]
    i = _pick(rng, cands)
    if i is None:
        return None
    head, rest = lines[i].split(" = ", 1)

    def repl(m: re.Match[str]) -> str:
        dims = m.group(1).split(",")
        choice = rng.choice(["seven", "extra", "dup"])
        if choice == "seven":
            return "]{7}"
        if choice == "extra":
            return "]{" + ",".join(dims + [str(len(dims))]) + "}"
        return "]{" + ",".join([dims[0]] * max(2, len(dims))) + "}"

    rest = re.sub(r"\]\{([\d,]+)\}", repl, rest, count=1)
    lines[i] = head + " = " + rest
    return "\n".join(lines)


def signature_contradiction(text: str, rng: random.Random) -> str | None:
    lines = _lines(text)
    if not lines or "entry_computation_layout={(" not in lines[0]:
        return None
    m = re.search(r"entry_computation_layout=\{\((.*?)\)->", lines[0])
    if not m or not re.search(r"\b(f32|f64|s32|bf16|f16|u32|s8|pred)\[", m.group(1)):
        return None
    new = re.sub(
        r"\b(f32|f64|s32|bf16|f16|u32|s8|pred)\[",
        lambda mm: "f64[" if mm.group(1) != "f64" else "f32[",
        m.group(1),
        count=1,
    )
    lines[0] = lines[0][: m.start(1)] + new + lines[0][m.end(1) :]
    return "\n".join(lines)


def elementwise_shape(text: str, rng: random.Random) -> str | None:
    lines = _lines(text)
    ops = r"(negate|add|multiply|subtract|exponential|tanh|maximum|convert|copy)"
    cands = [
        i
        for i in _instructions(lines)
        if re.search(r"= \w+\[[\d,]+\]\{[\d,]*\} " + ops + r"\(", lines[i])
    ]
    i = _pick(rng, cands)
    if i is None:
        return None
    lines[i] = re.sub(
        r"= (\w+)\[([\d,]+)\]", lambda m: f"= {m.group(1)}[{m.group(2)},3]", lines[i], count=1
    )
    lines[i] = re.sub(
        r"\]\{([\d,]*)\} ",
        lambda m: (
            "]{"
            + ",".join(
                [str(len(m.group(1).split(",")) if m.group(1) else 0)]
                + ([m.group(1)] if m.group(1) else [])
            )
            + "} "
        ),
        lines[i],
        count=1,
    )
    return "\n".join(lines)


def dtype_change(text: str, rng: random.Random) -> str | None:
    ops = r"(negate|add|multiply|subtract|exponential|tanh|maximum)"
    return _edit_line(
        text,
        rng,
        lambda l: re.search(r"= f32\[[^\]]*\]\{[\d,]*\} " + ops + r"\(", l) is not None,
        lambda l: re.sub(r"= f32\[", "= s8[", l, count=1),
    )


MUTATIONS: dict[str, Callable[[str, random.Random], str | None]] = {
    f.__name__: f
    for f in (
        undefined_operand,
        garbage_line,
        wrong_operand_count,
        parameter_out_of_range,
        duplicate_parameter_number,
        call_cycle,
        use_before_definition,
        deleted_definition,
        negative_dimension,
        unbalanced_attribute,
        bad_layout,
        signature_contradiction,
        elementwise_shape,
        dtype_change,
    )
}
