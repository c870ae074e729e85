"""assert_fits as a pytest gate: a failing test run by pytest itself shows the
verdict (in its short summary too), names the module, and shows none of
hlomem's source; without a budget it checks the device's limit or asks for one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import hlomem

HERE = Path(__file__).resolve().parent
PACKAGE = Path(hlomem.__file__).resolve().parent

GATE_TESTS = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {here!r})

    import hlomem
    import mlp


    def test_over_budget():
        compiled = mlp.compile_step(donate=False)
        hlomem.assert_fits(compiled, budget=1000, fail_on=())


    def test_a_finding():
        compiled = mlp.compile_step(donate=False)
        hlomem.assert_fits(compiled, budget="1GiB", fail_on=["HM001"])


    def test_fits():
        compiled = mlp.compile_step(donate=False)
        hlomem.assert_fits(compiled, budget="1GiB", fail_on=())
    """
)


@pytest.fixture(scope="module")
def gate_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    """pytest's output for a small test file whose gates fail, run as a user
    runs it (`python -m pytest -rA`) in a child process."""
    folder = tmp_path_factory.mktemp("gate")
    (folder / "test_gate.py").write_text(GATE_TESTS.format(here=str(HERE)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE.parent), *filter(None, [env.get("PYTHONPATH")])]
    )
    env["COLUMNS"] = "160"  # pytest cuts summary lines to the terminal's width
    env.pop("CI", None)  # on CI pytest would not cut them: test what a user sees
    process = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_gate.py"],
        cwd=folder,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = process.stdout + process.stderr
    assert process.returncode == 1, output  # tests failed, pytest itself did not
    assert "2 failed, 1 passed" in output, output
    return output


def test_the_failure_shows_no_hlomem_source(gate_run: str) -> None:
    source_lines = set()
    for path in PACKAGE.glob("*.py"):
        for line in path.read_text().splitlines():
            # Lines that say something (not `)` or `return result`, which a
            # test could hold too).
            if len(line.strip()) > 30:
                source_lines.add(line.strip())
    shown = [
        line
        for line in gate_run.splitlines()
        if str(PACKAGE) in line
        or "hlomem/__init__.py" in line
        or "__tracebackhide__" in line
        or line.lstrip("> ").strip() in source_lines
    ]
    assert not shown, "\n".join(shown) + "\n\n" + gate_run
    # What pytest does show of the failure: the test's own line, then the verdict.
    assert "hlomem.assert_fits(compiled, budget=1000, fail_on=())" in gate_run


def test_the_failure_names_the_module_and_what_holds_the_peak(gate_run: str) -> None:
    verdict = re.search(r"^E\s+hlomem.OutOfBudget: (jit_step needs .*)$", gate_run, re.MULTILINE)
    assert verdict, gate_run
    assert re.fullmatch(r"jit_step needs [\d.]+MiB of 1000B, over by [\d.]+MiB", verdict.group(1))
    assert "<stdin>" not in gate_run
    assert re.search(r"^E\s+jit_step: needs [\d.]+MiB of device memory", gate_run, re.MULTILINE)
    # The groups of the live peak under the verdict: source lines of mlp.py, and arguments.
    after = gate_run[verdict.end() :].splitlines()
    assert re.match(r"E\s+what holds the live peak, [\d.]+MiB", after[1]), gate_run
    groups = after[2:5]
    assert all(re.match(r"E\s+[\d.]+(B|KiB|MiB)\s+\S", g) for g in groups), groups
    assert any("mlp.py:" in g for g in groups), groups


def test_the_short_summary_says_the_verdict(gate_run: str) -> None:
    summary = gate_run.split("short test summary info", 1)[1]
    over = re.search(r"^FAILED test_gate.py::test_over_budget - (.*)$", summary, re.MULTILINE)
    assert over, summary
    assert re.fullmatch(
        r"hlomem.OutOfBudget: jit_step needs [\d.]+MiB of 1000B, over by [\d.]+MiB", over.group(1)
    ), over.group(1)
    finding = re.search(r"^FAILED test_gate.py::test_a_finding - (.*)$", summary, re.MULTILINE)
    assert finding, summary
    assert finding.group(1).startswith("hlomem.OutOfBudget: jit_step: HM001 argument `params`")


def test_no_budget_on_a_cpu_is_a_clear_error(step_nodonate: Any) -> None:
    """A CPU has no memory limit JAX knows: a ValueError asking for a budget,
    never a pass that checked no memory."""
    with pytest.raises(ValueError, match="assert_fits needs a budget: its devices \\(cpu\\)"):
        hlomem.assert_fits(step_nodonate)
    with pytest.raises(ValueError, match='budget="16GiB"'):
        hlomem.assert_fits(step_nodonate.as_text())
    # fail_on given, no budget: the findings alone, as asked.
    assert hlomem.assert_fits(step_nodonate, fail_on=["HM002"]).budget_bytes is None


class _Gpu:
    """A device as JAX describes a GPU: its allocator's limit in memory_stats()."""

    platform = "gpu"

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def memory_stats(self) -> dict[str, int]:
        return {"bytes_in_use": 0, "bytes_limit": self.limit}

    def __str__(self) -> str:
        return "cuda:0"


class _Sharding:
    def __init__(self, device: _Gpu) -> None:
        self.device_set = {device}


class _CompiledOnGpu:
    """A real CPU compile whose shardings say it runs on a GPU (this machine
    has none): what assert_fits reads of a ``jax.stages.Compiled`` for its budget."""

    def __init__(self, compiled: Any, limit: int) -> None:
        self._compiled = compiled
        self.input_shardings = (([_Sharding(_Gpu(limit))],), {})
        self.output_shardings = [_Sharding(_Gpu(limit))]

    def as_text(self) -> str:
        return str(self._compiled.as_text())


def test_no_budget_on_an_accelerator_is_its_bytes_limit(step_nodonate: Any) -> None:
    total = hlomem.analyze(step_nodonate).memory.total_bytes
    result = hlomem.assert_fits(_CompiledOnGpu(step_nodonate, total), fail_on=())
    assert result.passed and result.budget_bytes == total
    with pytest.raises(hlomem.OutOfBudget) as failed:
        hlomem.assert_fits(_CompiledOnGpu(step_nodonate, total - 1), fail_on=())
    message = str(failed.value)
    assert message.splitlines()[0].endswith(", over by 1B"), message
    assert "the bytes_limit of cuda:0's memory_stats()" in message
