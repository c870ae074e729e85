"""hlomem's Python API on real JAX compiles: the numbers equal XLA's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import hlomem
import mlp


def test_analyze_equals_memory_analysis(step_nodonate: Any, step_donate: Any) -> None:
    for compiled in (step_nodonate, step_donate):
        report = hlomem.analyze(compiled)
        assert isinstance(report, hlomem.Report)
        ma = compiled.memory_analysis()
        memory = report.memory
        assert memory.argument_bytes == ma.argument_size_in_bytes
        assert memory.output_bytes == ma.output_size_in_bytes
        assert memory.alias_bytes == ma.alias_size_in_bytes
        assert memory.temp_bytes == ma.temp_size_in_bytes
    # Donation is real in this program: the donated step aliases its parameters.
    assert hlomem.analyze(step_donate).memory.alias_bytes > 0
    assert hlomem.analyze(step_nodonate).memory.alias_bytes == 0


def _total_bytes_used(module_file: str) -> int:
    """The "Total bytes used" XLA's buffer assignment wrote beside a module
    (in `-buffer-assignment-values.txt` since 2026-04, before in
    `-buffer-assignment.txt`)."""
    stem = module_file.removesuffix(".txt")
    for kind in ("buffer-assignment-values", "buffer-assignment"):
        report = Path(f"{stem}-{kind}.txt")
        if report.is_file():
            found = re.search(r"^Total bytes used: (\d+)", report.read_text(), re.MULTILINE)
            if found:
                return int(found.group(1))
    raise AssertionError(f"XLA wrote no total beside {module_file}")


def test_total_equals_xlas_buffer_assignment(
    dump_dir: Path, step_nodonate: Any, step_donate: Any
) -> None:
    """`memory.total_bytes` is the buffer assignment's "Total bytes used"
    (memory_analysis() has no total): compared with the report XLA wrote for
    the same program, compiled again with a dump folder."""
    reports = hlomem.analyze(dump_dir)
    assert isinstance(reports, list)
    totals = {}
    for report in reports:
        assert report.memory.total_bytes == _total_bytes_used(report.file), report.name
        totals[report.name] = report.memory.total_bytes
    # The compiles in this process are the same modules.
    assert hlomem.analyze(step_nodonate).memory.total_bytes == totals["jit_step"]
    assert hlomem.analyze(step_donate).memory.total_bytes == totals["jit_step_donated"]


def test_a_dump_folder_gives_one_report_per_module(dump_dir: Path) -> None:
    modules = sorted(p.name for p in dump_dir.glob("*after_optimizations.txt"))
    assert len(modules) == 2
    reports = hlomem.analyze(str(dump_dir))
    assert isinstance(reports, list)
    assert [r.key for r in reports] == [m.split(".")[0] + "." + m.split(".")[1] for m in modules]
    assert [r.name for r in reports] == ["jit_step", "jit_step_donated"]
    # Each renders on its own.
    assert "module jit_step_donated" in str(reports[1])


def test_text_path_and_compiled_give_the_same_report(step_donate: Any, tmp_path: Path) -> None:
    text = step_donate.as_text()
    saved = tmp_path / "step.txt"
    saved.write_text(text)
    from_compiled = hlomem.analyze(step_donate)
    for other in (hlomem.analyze(text), hlomem.analyze(saved), hlomem.analyze(str(saved))):
        assert isinstance(other, hlomem.Report)
        assert other.memory == from_compiled.memory
        assert [f.code for f in other.findings] == [f.code for f in from_compiled.findings]
    assert from_compiled.file == "<stdin>"


def test_hm001_on_the_non_donated_step_only(step_nodonate: Any, step_donate: Any) -> None:
    nodonate = hlomem.analyze(step_nodonate)
    donate = hlomem.analyze(step_donate)
    hm001 = [f for f in nodonate.findings if f.code == "HM001"]
    assert len(hm001) == 1
    finding = hm001[0]
    assert finding.bytes > 0
    assert "not donated" in finding.message
    assert "donate_argnums" in finding.fix
    assert finding.evidence.rule == "not-donated"
    assert "HM001" not in [f.code for f in donate.findings]


def test_assert_fits_at_the_total_and_one_byte_under(step_nodonate: Any, step_donate: Any) -> None:
    for compiled in (step_nodonate, step_donate):
        total = hlomem.analyze(compiled).memory.total_bytes
        result = hlomem.assert_fits(compiled, budget=total, fail_on=())
        assert result.passed
        with pytest.raises(hlomem.OutOfBudget) as failed:
            hlomem.assert_fits(compiled, budget=total - 1, fail_on=())
        assert isinstance(failed.value, AssertionError)
        message = str(failed.value)
        name = hlomem.analyze(compiled).name
        # The verdict first (pytest's short summary shows that line), then check's text.
        assert message.splitlines()[0].startswith(f"{name} needs "), message
        assert message.splitlines()[0].endswith(", over by 1B"), message
        assert "\nFAILED: 1 module over the budget" in message
        assert "1B over the budget" in message
        assert failed.value.result.modules[0].over_by == 1


def test_assert_fits_budget_strings(step_nodonate: Any) -> None:
    hlomem.assert_fits(step_nodonate, budget="1GiB", fail_on=())
    with pytest.raises(hlomem.OutOfBudget, match="over the budget of 1.00MiB"):
        hlomem.assert_fits(step_nodonate, budget="1MiB", fail_on=())
    with pytest.raises(hlomem.HlomemError, match="--budget"):
        hlomem.assert_fits(step_nodonate, budget="lots", fail_on=())


def test_assert_fits_fails_on_findings(step_nodonate: Any, step_donate: Any) -> None:
    """A donation that stopped working fails a test: HM001 on the non-donated
    step. On this donated step XLA copies one donated weight because the
    backward pass still reads it: HM003, reported as expected (`info`), which
    the default gate does not fail on (a false failure on every training
    step would get the gate switched off)."""
    with pytest.raises(hlomem.OutOfBudget, match="HM001"):
        hlomem.assert_fits(step_nodonate, fail_on=["HM001"])
    hlomem.assert_fits(step_donate, fail_on=["HM001"])
    assert hlomem.assert_fits(step_donate, budget="1GiB").passed
    copies = [f for f in hlomem.analyze(step_donate).findings if f.code == "HM003"]
    assert copies and all(f.severity == "info" for f in copies)
    assert "expected" in copies[0].message and "nothing to change" in copies[0].fix


def test_a_copy_your_code_causes_fails_the_default_gate() -> None:
    """HM003 where the donated value is read after an in-place update the
    user wrote (the finding's own example) fails `assert_fits` by default."""
    import functools

    import jax
    import jax.numpy as jnp

    @functools.partial(jax.jit, donate_argnums=0)
    def f(x: Any) -> Any:
        return x.at[0].set(1) + x.sum(), x * 2

    compiled = f.lower(jax.ShapeDtypeStruct((1024, 1024), jnp.float32)).compile()
    with pytest.raises(hlomem.OutOfBudget, match="HM003") as failed:
        hlomem.assert_fits(compiled, budget="1GiB")
    assert not failed.value.result.passed


def test_repr_html_is_the_html_report(step_nodonate: Any) -> None:
    report = hlomem.analyze(step_nodonate)
    page = report.html()
    assert page.lstrip().lower().startswith("<!doctype html")
    # A notebook gets the page's one element, its style and script inside.
    html = report._repr_html_()
    assert html.startswith('<div class="hlomem-report hlomem">') and html.endswith("</div>")
    assert "<style>" in html and "<script>" in html and "<body" not in html
    assert "<svg" in html
    assert "jit_step" in html
    assert "budget-label" not in html
    with_budget = report.html(budget="16GiB")
    assert 'class="budget-label" x=' in with_budget and ">budget 16.00GiB" in with_budget


def test_str_is_the_text_report(step_nodonate: Any) -> None:
    text = str(hlomem.analyze(step_nodonate))
    assert text.startswith("module jit_step\n")
    assert "HM001" in text


def test_peak_and_other_fields_mirror_the_json(step_nodonate: Any) -> None:
    report = hlomem.analyze(step_nodonate)
    data = report.to_json()
    # Declared and undeclared fields alike: attribute access is the JSON.
    assert report.peak.time == data["peak"]["time"]
    assert report.peak.buffers[0].bytes == data["peak"]["buffers"][0]["bytes"]
    assert report.timeline.to_json() == data["timeline"]
    assert report["memory"] == report.memory
    assert report.memory.by_space[0].name == "default"
    assert sum(s.bytes for s in report.memory.by_space) == report.memory.total_bytes
    with pytest.raises(AttributeError, match="no field 'nope'"):
        report.nope  # noqa: B018


def test_stablehlo_gets_advice(step_nodonate: Any) -> None:
    lowered = mlp.lower_step()
    with pytest.raises(hlomem.HlomemError, match="StableHLO") as failed:
        hlomem.analyze(lowered.as_text())
    assert "compile().as_text()" in str(failed.value)


def test_missing_path_and_wrong_type() -> None:
    with pytest.raises(FileNotFoundError):
        hlomem.analyze("no/such/dump")
    with pytest.raises(TypeError):
        hlomem.analyze(42)  # type: ignore[call-overload]


def test_explain_a_real_oom_message(repo_root: Path) -> None:
    message = (repo_root / "samples/oom/motivating.txt").read_text()
    explanation = hlomem.explain(message)
    assert explanation.requested_bytes == 14787872288
    assert explanation.verdict.startswith("needs 41.32GiB")
    assert explanation.explanation.what_failed[0].kind == "allocation"
    # Advice in words and as data, in the same order.
    assert explanation.advice[0].action
    assert explanation.advice[0].saves_bytes == explanation.explanation.advice[0].saves_bytes
    assert "What failed" in str(explanation)
    # As caught: the exception itself is accepted.
    assert hlomem.explain(RuntimeError(message)).requested_bytes == 14787872288
    with pytest.raises(hlomem.HlomemError, match="no out-of-memory message"):
        hlomem.explain("all is well")


def test_explain_takes_what_analyze_takes(repo_root: Path, tmp_path: Path) -> None:
    """Bytes (a log read in binary) and a path of a log file, as `analyze`
    takes them; anything else is a TypeError, never an AttributeError."""
    path = repo_root / "samples/oom/motivating.txt"
    assert hlomem.explain(path.read_bytes()).requested_bytes == 14787872288
    assert hlomem.explain(path).requested_bytes == 14787872288
    for wrong in (None, 123, ["a message"]):
        with pytest.raises(TypeError, match="out-of-memory message"):
            hlomem.explain(wrong)  # type: ignore[arg-type]


def test_budgets_in_bytes_and_slips(step_nodonate: Any) -> None:
    """An int budget is bytes however small; a string that is a bare number
    under 1 MiB is taken for a slip (`"16"` meant 16GiB) and refused."""
    with pytest.raises(hlomem.OutOfBudget):
        hlomem.assert_fits(step_nodonate, budget=1000, fail_on=())
    with pytest.raises(hlomem.HlomemError, match="did you mean 16GiB"):
        hlomem.assert_fits(step_nodonate, budget="16", fail_on=())


def test_objects_built_from_plain_data() -> None:
    """The views need no binary: fields the JSON leaves out when empty read
    as empty, and `str()` of one hlomem did not make is its repr."""
    report = hlomem.Report({"name": "m", "memory": {"total_bytes": 1}, "findings": []})
    assert report.memory.total_bytes == 1
    assert isinstance(report.memory, hlomem.Memory)
    assert report.notes == []
    assert str(report) == repr(report) == "Report(name='m', total_bytes=1, findings=[])"
    with pytest.raises(ValueError, match="not made by hlomem"):
        report.html()


def test_a_killed_binary_says_by_what() -> None:
    """A run the kernel killed (out of memory) says so, not "exited with code -9"."""
    import subprocess

    from hlomem._binary import failure

    killed = subprocess.CompletedProcess(["hlomem"], -9, b"", b"")
    error = failure(killed)
    assert "killed by SIGKILL" in str(error) and "out-of-memory" in str(error)


def test_a_missing_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HLOMEM_BIN", "/no/such/hlomem")
    with pytest.raises(hlomem.BinaryNotFound, match="HLOMEM_BIN=/no/such/hlomem"):
        hlomem.analyze("HloModule m\n")
    monkeypatch.delenv("HLOMEM_BIN", raising=False)
    monkeypatch.setattr("hlomem._binary._candidates", list)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(hlomem.BinaryNotFound, match="pip install hlomem"):
        hlomem.find_binary()


def test_explain_with_the_dump_links_buffers(repo_root: Path) -> None:
    message = (repo_root / "samples/oom/gpu_add_small.txt").read_text()
    explanation = hlomem.explain(message, dump=repo_root / "samples/add_nodonate/dump")
    dump = explanation.explanation.dump
    assert dump.module == "jit_fn"
    assert len(dump.buffers) == 3
    assert dump.buffers[0].instruction == "wrapped_add"
    assert "wrapped_add" in str(explanation)
