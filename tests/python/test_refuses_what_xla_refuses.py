"""hlomem refuses every module XLA's own parser refuses.

Mutants of the bundled samples' dumps (`measure/mutants/mutate.py`: undefined
operands, garbage lines, wrong operand counts, parameter numbers out of range
or twice, calls to computations defined below, use before definition, deleted
definitions, negative dimensions, unbalanced attributes, invalid layouts,
shapes that contradict the header) are given to jaxlib's
`hlo_module_from_text` and to `hlomem analyze` (the default, lazy mode). Any
mutant XLA refuses and hlomem analyzes fails the test, named with its diff.
The full campaign (4,000 mutants) is `measure/mutants/campaign.py`.
"""

from __future__ import annotations

import difflib
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "measure" / "mutants"))

from mutate import MUTATIONS

pytest.importorskip("jax")

from xla_parser import XlaParser

from hlomem._binary import run


@pytest.fixture(scope="module")
def xla() -> Iterator[XlaParser]:
    parser = XlaParser()
    yield parser
    parser.close()


def sample_modules() -> list[Path]:
    return sorted(
        p
        for p in ROOT.glob("samples/*/dump/*after_optimizations.txt")
        if "-" not in p.name.split("after_optimizations")[1]
    )


def test_the_samples_themselves_are_accepted_by_both(xla: XlaParser) -> None:
    for path in sample_modules():
        text = path.read_text()
        assert not xla.refuses(text), path
        assert run(["analyze", "-", "--format", "json"], text.encode()).returncode == 0, path


def test_every_mutant_xla_refuses_is_refused(xla: XlaParser) -> None:
    rng = random.Random(36)
    texts = [p.read_text() for p in sample_modules()]
    assert texts, "no sample dumps found"
    accepted: list[str] = []
    refused_by_xla = 0
    made = 0
    while made < 150:
        kind = rng.choice(sorted(MUTATIONS))
        original = rng.choice(texts)
        mutant = MUTATIONS[kind](original, rng)
        if mutant is None or mutant == original:
            continue
        made += 1
        if not xla.refuses(mutant):
            continue
        refused_by_xla += 1
        process = run(["analyze", "-", "--format", "json"], mutant.encode())
        assert process.returncode in (0, 2), (kind, process.returncode, process.stderr[-500:])
        if process.returncode == 0:
            diff = [
                line
                for line in difflib.unified_diff(
                    original.split("\n"), mutant.split("\n"), lineterm="", n=0
                )
                if line[:1] in "+-" and line[:3] not in ("+++", "---")
            ]
            accepted.append(f"{kind}: {diff[:4]}")
    # The campaign must have tested something: most mutants break XLA's rules.
    assert refused_by_xla > 100, refused_by_xla
    assert not accepted, "hlomem accepted modules XLA refuses:\n" + "\n".join(accepted)
