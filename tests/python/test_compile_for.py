"""hlomem.compile_for: real deviceless compiles for TPUs (libtpu) and GPUs
(the CUDA plugin with XLA's target configs) on a machine with neither,
checked against XLA's own numbers for the same compile done directly
(``direct_compile.py``: ``memory_analysis()`` and the buffer assignment
reports of XLA's dump).

The compiles need the ``tpu`` / ``cuda12`` extras; without them those tests
are skipped with the reason, and the missing-extra error is tested instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import hlomem
import mlp
from hlomem import _deviceless, _signature
from hlomem._targets import resolve_target

HERE = Path(__file__).resolve().parent

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
HAS_CUDA = importlib.util.find_spec("jax_cuda12_plugin") is not None
needs_tpu = pytest.mark.skipif(
    not HAS_LIBTPU, reason='libtpu is not installed here (pip install "hlomem[tpu]")'
)
needs_cuda = pytest.mark.skipif(
    not HAS_CUDA, reason='the CUDA plugin is not installed here (pip install "hlomem[cuda12]")'
)
GIB = 1 << 30


def direct(
    tmp: Path,
    program: str,
    platform: str,
    topology: str,
    config: str | None = None,
    **environment: str,
) -> dict[str, Any]:
    """XLA's numbers for ``program`` of mlp.PROGRAMS compiled directly for
    the target, in this environment plus ``environment`` (``JAX_ENABLE_X64="1"``:
    JAX's settings as JAX reads them from its variables)."""
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        TPU_SKIP_MDS_QUERY="1",
        ALLOW_MULTIPLE_LIBTPU_LOAD="1",
        **environment,
    )
    dump = tmp / f"direct-{program}-{platform}-{topology.replace(':', '_')}"
    dump = dump.with_name(dump.name + "".join(f"-{k}={v}" for k, v in environment.items()))
    argv = [sys.executable, str(HERE / "direct_compile.py"), str(dump), program, platform]
    argv += [topology] + ([config] if config else [])
    out = subprocess.run(argv, env=env, capture_output=True, check=True).stdout
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


def same_numbers(compiled: hlomem.DevicelessCompiled, reference: dict[str, Any]) -> None:
    """compile_for's program, and hlomem's analysis of it, against XLA's own
    numbers for the same compile done directly."""
    xla = reference["memory_analysis"]
    ours = compiled.memory_analysis()
    assert ours.argument_size_in_bytes == xla["argument_size_in_bytes"]
    assert ours.output_size_in_bytes == xla["output_size_in_bytes"]
    assert ours.alias_size_in_bytes == xla["alias_size_in_bytes"]
    assert xla["alias_size_in_bytes"] > 0  # the donation took
    report = hlomem.analyze(compiled)
    assert report.memory.argument_bytes == xla["argument_size_in_bytes"]
    assert report.memory.output_bytes == xla["output_size_in_bytes"]
    assert report.memory.alias_bytes == xla["alias_size_in_bytes"]
    # The device's memory as XLA's buffer assignment counts it (TPU: HBM,
    # the default space; GPU: everything, "Total bytes used").
    device = reference["spaces"]["default"]
    assert report.memory.device_bytes == device
    assert compiled.xla_totals is not None
    assert compiled.xla_totals.device_bytes == device
    assert compiled.xla_totals.total_bytes == reference["total_bytes_used"]
    verdict = hlomem.fits(compiled)
    assert verdict.needed_bytes == device and verdict.xla_bytes == device


@needs_tpu
def test_tpu_v5e_mlp_step_equals_a_direct_compile(tmp_path: Path) -> None:
    compiled = hlomem.compile_for(
        mlp.step_donated, *mlp._shapes(), target="tpu-v5e:2x2", donate_argnums=0
    )
    assert compiled.target.name == "tpu-v5e:2x2"
    assert "T(8,128)" in compiled.as_text()  # TPU layouts: it was compiled for the TPU
    same_numbers(compiled, direct(tmp_path, "step", "tpu", "v5e:2x2"))
    verdict = hlomem.fits(compiled)
    assert verdict.fits
    needs = f"{verdict.needed_bytes / (1 << 20):.2f}MiB"
    assert str(verdict).startswith(
        f"fits: needs {needs}, what libtpu lets a program use of a v5e chip is 15.75GiB, "
    )
    assert f"XLA's buffer assignment says the same ({needs})" in str(verdict)
    # What was compiled: the function, its arguments' dtypes, the biggest ones.
    assert "compiled step_donated with jax " in str(verdict)
    assert "8 arguments (float32), the biggest: params[1]['w'] f32[512,512] 1.00MiB" in str(verdict)
    result = hlomem.assert_fits(compiled)  # the budget: what libtpu lets a program use
    assert result.passed and result.budget_bytes == int(15.75 * GIB)
    # The report's chart draws that budget without being asked.
    assert "budget 15.75GiB" in hlomem.analyze(compiled).html()
    with pytest.raises(hlomem.OutOfBudget) as caught:
        hlomem.assert_fits(compiled, budget="1MiB")
    assert caught.value.verdict is None  # a budget of one's own: no target verdict


# A program jitted by hand for a v6e device (not through compile_for): the
# text does not name the chip, the compiled object's devices do. Its two
# outputs make a tuple table, 32 bytes on v6e and 512 on v5e, which hlomem
# would assume without the chip.
_OWN_JIT = """
import json, os, sys
from pathlib import Path
import jax, jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import SingleDeviceSharding
import hlomem
from hlomem._xla_dump import read_dump
device = topologies.get_topology_desc(topology_name="v6e:2x2", platform="tpu").devices[0]
at = SingleDeviceSharding(device)
compiled = jax.jit(lambda a: (a + 1, a * 2), in_shardings=at, out_shardings=at).lower(
    jax.ShapeDtypeStruct((128, 128), jnp.float32)
).compile()
xla = compiled.memory_analysis()
dumped = read_dump(Path(os.environ["DUMP"]))
report = hlomem.analyze(compiled)
check = hlomem.assert_fits(compiled, budget="1GiB")
print(json.dumps({
    "kind": device.device_kind,
    "xla": [xla.argument_size_in_bytes, xla.output_size_in_bytes, dumped.xla.device_bytes],
    "ours": [report.memory.argument_bytes, report.memory.output_bytes, report.memory.device_bytes],
    "target": {k: report["target"][k] for k in ("tpu_version", "chip_source")},
    "exact": report.memory.total_exact,
    "check_exact": check.modules[0].exact,
}))
"""


@needs_tpu
def test_a_tpu_compile_of_ones_own_tells_hlomem_its_chip(tmp_path: Path) -> None:
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        TPU_SKIP_MDS_QUERY="1",
        ALLOW_MULTIPLE_LIBTPU_LOAD="1",
        DUMP=str(tmp_path),
        XLA_FLAGS=f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text",
    )
    out = subprocess.run(
        [sys.executable, "-c", _OWN_JIT], env=env, capture_output=True, check=True
    ).stdout
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["kind"] == "TPU v6 lite"
    assert result["target"]["tpu_version"] == "v6e"
    assert result["target"]["chip_source"] != "assumed"
    # XLA's arguments and outputs (the outputs' 32-byte tuple table included)
    # and its buffer assignment's HBM total.
    assert result["ours"] == result["xla"]
    assert result["exact"] and result["check_exact"]


@needs_tpu
def test_tpu_refusal_is_out_of_budget_with_the_dumped_module(tmp_path: Path) -> None:
    with pytest.raises(hlomem.OutOfBudget) as caught:
        hlomem.compile_for(mlp.too_big, *mlp.too_big_shapes(), target="tpu-v5e:2x2", progress=False)
    error = caught.value
    reference = direct(tmp_path, "too_big", "tpu", "v5e:2x2")
    assert "error" in reference  # the direct compile is refused too
    said = re.search(
        r"HLO temporaries \(([\d.]+)G\) exceeds available HBM \(([\d.]+)G\)", reference["error"]
    )
    assert said is not None
    # The target's usable memory is what libtpu said is available.
    assert error.verdict is not None
    assert error.verdict.target.usable_bytes == int(float(said.group(2)) * GIB)
    # XLA dumped the module before refusing: hlomem's analysis of it has
    # XLA's own HBM total for it, and the refusal's figure (a lower bound).
    assert error.report is not None
    xla_hbm = reference["spaces"]["default"]
    assert error.report.memory.device_bytes == xla_hbm
    assert abs(xla_hbm / GIB - float(said.group(1))) < 0.01
    assert error.verdict is not None and error.verdict.at_least and not error.verdict.fits
    assert error.verdict.needed_bytes == xla_hbm == error.verdict.xla_bytes
    assert error.result is not None and not error.result.passed  # check against 16 GiB
    assert error.result.modules[0].bytes == xla_hbm
    assert error.explanation is not None
    assert error.explanation.format.startswith("tpu")
    message = str(error)
    assert message.startswith(
        "tpu-v5e:2x2's compiler refused too_big for memory: does not fit (its compiler refused "
        f"it): needs at least {xla_hbm / GIB:.2f}GiB, what libtpu lets a program use of a v5e "
        f"chip is 15.75GiB, over by at least {(xla_hbm - int(15.75 * GIB)) / GIB:.2f}GiB\n"
    )
    assert "compiled too_big with jax " in message
    assert "hlomem's check of the module XLA wrote before refusing" in message
    # The explanation, but for the dump folder's path: it went with the compile.
    explained = str(error.explanation).strip()
    assert "/hlomem-compile-" in explained and "/hlomem-compile-" not in message
    assert explained.splitlines()[0] in message
    assert explained[explained.index("What to try") :] in message
    assert message.rstrip().endswith("exceeds available HBM (15.75G).")


@needs_tpu
def test_compare_targets_after_a_refusal(tmp_path: Path) -> None:
    """What a v5e said it needed, and what the same program needs on a v5p."""
    with pytest.raises(hlomem.OutOfBudget) as caught:
        hlomem.compile_for(mlp.too_big, *mlp.too_big_shapes(), target="tpu-v5e", progress=False)
    message = str(caught.value).rsplit("The compiler said: ", 1)[1]
    comparison = hlomem.compare_targets(
        mlp.too_big,
        *mlp.too_big_shapes(),
        targets=["tpu-v5e:2x2", "tpu-v5p:2x2x1"],
        failed=message,
        progress=False,
    )
    v5e, v5p = comparison
    assert v5e.at_least and not v5e.fits
    reference = direct(tmp_path, "too_big", "tpu", "v5p:2x2x1")
    assert "memory_analysis" in reference  # a v5p chip takes it
    assert v5p.fits and comparison["tpu-v5p:2x2x1"] is v5p
    assert v5p.needed_bytes == reference["spaces"]["default"] == v5p.xla_bytes
    assert comparison.fitting == ["tpu-v5p:2x2x1"]
    assert "tpu-v5p:2x2x1" in comparison.compiled and "tpu-v5e:2x2" in comparison.refusals
    said = re.search(r"HLO temporaries \(([\d.]+)G\)", message)
    assert said is not None and comparison.failed_needs_bytes is not None
    assert abs(comparison.failed_needs_bytes / GIB - float(said.group(1))) < 0.01
    text = str(comparison).splitlines()
    assert text[0] == (
        f"too_big needs {comparison.failed_needs_bytes / GIB:.2f}GiB on the device that failed "
        "(its message says); "
        "on other targets (compiled here, no device needed):"
    )
    assert text[1].startswith(
        "  tpu-v5e:2x2    does not fit (its compiler refused it): needs at least "
        f"{v5e.needed_bytes / GIB:.2f}GiB"
    )
    assert text[2].startswith("  tpu-v5p:2x2x1  fits: needs ")
    # The arguments, once for every target.
    assert re.fullmatch(
        r"  compiled too_big: 1 argument \(float32\), x f32\[100000,1000\] [\d.]+MiB; "
        r"1 output \(float32\), result f32\[100000,1000\] [\d.]+MiB",
        text[3],
    )

    # explain(also_on=...) is the same comparison, after the explanation.
    explained = hlomem.explain(
        message, also_on=["tpu-v5p"], fn=mlp.too_big, args=mlp.too_big_shapes()
    )
    assert explained.comparison is not None
    assert explained.comparison["tpu-v5p:2x2x1"] == v5p
    assert str(explained).rstrip().endswith(str(explained.comparison).splitlines()[-1])


@needs_tpu
def test_arrays_are_read_as_shapes_and_lambdas_travel_with_cloudpickle() -> None:
    pytest.importorskip("cloudpickle", reason="cloudpickle is not installed (the extras have it)")
    a = jnp.ones((256, 256), jnp.float32)  # a CPU array: only its shape and dtype go
    compiled = hlomem.compile_for(lambda a: a @ a, a, target="tpu-v6e", progress=False)
    assert compiled.target.name == "tpu-v6e:2x2"
    assert compiled.memory_analysis().argument_size_in_bytes == 256 * 256 * 4
    assert hlomem.fits(compiled).target.memory_bytes == 32 * GIB
    # The HLO text does not name the chip; hlomem is told it (--tpu v6e), and
    # the libtpu installed here, which compiled it (--libtpu).
    target = hlomem.analyze(compiled).target
    assert target.tpu_version == "v6e"
    assert target.libtpu_source == "user"


@needs_tpu
def test_a_mesh_shards_the_arguments_over_the_topology() -> None:
    from jax.sharding import PartitionSpec as P

    params, x, y = mlp._shapes()
    replicated = jax.tree_util.tree_map(lambda _: P(), params)
    sharded = hlomem.compile_for(
        mlp.step,
        params,
        x,
        y,
        target="tpu-v5e:2x2",
        mesh={"data": 4},
        in_shardings=(replicated, P("data"), P("data")),
        progress=False,
    )
    whole = hlomem.compile_for(mlp.step, params, x, y, target="tpu-v5e:2x2", progress=False)
    assert "num_partitions=4" in sharded.as_text()
    # Per device: the batch is a quarter, the parameters whole.
    assert (
        sharded.memory_analysis().argument_size_in_bytes
        < whole.memory_analysis().argument_size_in_bytes
    )


@needs_cuda
@pytest.mark.parametrize("name", list(hlomem.GPU_TARGETS))
def test_gpu_mlp_step_equals_a_direct_compile(name: str, tmp_path: Path) -> None:
    """Every shipped GPU target config compiles with the installed plugin, and
    hlomem's numbers are XLA's for it (GPU: temp and "Total bytes used" too)."""
    compiled = hlomem.compile_for(
        mlp.step_donated, *mlp._shapes(), target=name, donate_argnums=0, progress=False
    )
    target = compiled.target
    reference = direct(tmp_path, "step", "cuda", target.topology, target.target_config)
    same_numbers(compiled, reference)
    report = hlomem.analyze(compiled)
    assert report.memory.temp_bytes == reference["memory_analysis"]["temp_size_in_bytes"]
    assert report.memory.total_bytes == reference["total_bytes_used"]
    # The budget alone (on some GPUs XLA copies a donated weight: HM003).
    result = hlomem.assert_fits(compiled, fail_on=())
    assert result.budget_bytes == target.usable_bytes == int(target.memory_bytes * 0.75)
    assert str(hlomem.fits(compiled)).startswith(
        f"fits: needs {report.memory.device_bytes / (1 << 20):.2f}MiB, "
        f"JAX's share of {target.article} {target.device} is {target.usable_bytes / GIB:.2f}GiB, "
    )


@needs_cuda
def test_a_gpu_config_of_ones_own(tmp_path: Path) -> None:
    config = tmp_path / "my_a100.txtpb"
    shutil.copy(resolve_target("a100-80").target_config or "", config)
    compiled = hlomem.compile_for(
        mlp.step_donated, *mlp._shapes(), target=str(config), donate_argnums=0, progress=False
    )
    assert compiled.target.name == "my_a100"
    assert compiled.target.device == "A100-SXM4-80GB"  # the config's device_description_str
    same_numbers(compiled, direct(tmp_path, "step", "cuda", "1x1x4", str(config)))
    custom = hlomem.gpu_target(config, memory_gib=40, name="a100-half", topology="1x1x2")
    again = hlomem.compile_for(
        mlp.step_donated, *mlp._shapes(), target=custom, donate_argnums=0, progress=False
    )
    assert again.target == custom and hlomem.fits(again).target.memory_bytes == 40 * GIB


A100 = resolve_target("a100-40")


def same_as_direct(compiled: hlomem.DevicelessCompiled, reference: dict[str, Any]) -> None:
    """compile_for's program has every number of the direct compile (XLA's
    memory_analysis() and buffer assignment totals), and hlomem's analysis too."""
    ours = compiled.memory_analysis()
    for field, value in reference["memory_analysis"].items():
        assert getattr(ours, field) == value, field
    assert compiled.xla_totals is not None
    assert compiled.xla_totals.total_bytes == reference["total_bytes_used"]
    assert hlomem.analyze(compiled).memory.device_bytes == reference["spaces"]["default"]


@needs_cuda
@pytest.mark.parametrize("x64", [True, False], ids=["x64", "x32"])
def test_gpu_x64_on_and_off_equal_direct_compiles(x64: bool, tmp_path: Path) -> None:
    """jax_enable_x64 as the caller has it (here in a `with`, thread-local)
    reaches the compile: f64[2048,2048] arguments stay f64, or become f32."""
    with jax.enable_x64(x64):
        compiled = hlomem.compile_for(mlp.add, *mlp.add_shapes(), target="a100-40", progress=False)
    reference = direct(
        tmp_path, "add", "cuda", "1x1x4", A100.target_config, JAX_ENABLE_X64=str(int(x64))
    )
    same_as_direct(compiled, reference)
    width = 8 if x64 else 4
    assert compiled.memory_analysis().argument_size_in_bytes == 2 * 2048 * 2048 * width
    assert compiled.program is not None
    dtype = "float64" if x64 else "float32"
    assert [a.dtype for a in compiled.program.arguments] == [dtype, dtype]
    each = f"{2048 * 2048 * width / (1 << 20):.2f}MiB"
    assert f"2 arguments ({dtype}), a f{width * 8}[2048,2048] {each}" in str(hlomem.fits(compiled))
    assert compiled.config_sent.get("jax_enable_x64", False) is x64


@needs_cuda
def test_gpu_the_issues_x64_example_does_not_fit_an_a100_40() -> None:
    """Issue 43: `a + b` of two f64[42994,42994] with x64 on needs three
    13.77GiB arrays, 41.32GiB, more than an A100 40GB has."""
    a = jax.ShapeDtypeStruct((42994, 42994), jnp.float64)
    with jax.enable_x64(True):
        compiled = hlomem.compile_for(lambda a, b: a + b, a, a, target="a100-40", progress=False)
        comparison = hlomem.compare_targets(
            lambda a, b: a + b, a, a, targets=["a100-40", "h100"], progress=False
        )
    needs = 3 * 42994 * 42994 * 8
    verdict = hlomem.fits(compiled)
    assert verdict.needed_bytes == verdict.xla_bytes == needs  # 41.32GiB
    assert not verdict.fits
    assert str(verdict).startswith(
        "does not fit: needs 41.32GiB, JAX's share of an A100 40GB is "
        f"{A100.usable_bytes / GIB:.2f}GiB, over by {(needs - A100.usable_bytes) / GIB:.2f}GiB\n"
    )
    assert "2 arguments (float64), a f64[42994,42994] 13.77GiB, b f64[42994,42994] 13.77GiB" in (
        str(verdict)
    )
    with pytest.raises(hlomem.OutOfBudget, match="^does not fit: needs 41.32GiB"):
        hlomem.assert_fits(compiled)
    # compare_targets compiles through compile_for: the same program, and an
    # H100 takes it only because XLA's figure is within JAX's share of it.
    assert comparison["a100-40"].needed_bytes == needs
    h100 = comparison["h100"]
    assert h100.xla_bytes == needs and h100.fits == (needs <= h100.target.usable_bytes)
    assert str(comparison).splitlines()[-1].startswith("  compiled <lambda>: 2 arguments (float64)")


@needs_cuda
def test_gpu_matmul_precision_reaches_the_compile(tmp_path: Path) -> None:
    """jax.default_matmul_precision("highest") around compile_for: the dots
    of the compiled step carry it, as in a direct compile with
    JAX_DEFAULT_MATMUL_PRECISION=highest, and the numbers are that compile's."""
    with jax.default_matmul_precision("highest"):
        compiled = hlomem.compile_for(
            mlp.step_donated, *mlp._shapes(), target="a100-40", donate_argnums=0, progress=False
        )
    reference = direct(
        tmp_path,
        "step",
        "cuda",
        "1x1x4",
        A100.target_config,
        JAX_DEFAULT_MATMUL_PRECISION="highest",
    )
    assert compiled.config_sent == {"jax_default_matmul_precision": "highest"}
    ours = sorted(set(re.findall(r"operand_precision=\{[^}]*\}", compiled.as_text())))
    assert ours == reference["precisions"] == ["operand_precision={highest,highest}"]
    same_as_direct(compiled, reference)
    default = hlomem.compile_for(
        mlp.step_donated, *mlp._shapes(), target="a100-40", donate_argnums=0, progress=False
    )
    assert "operand_precision" not in default.as_text()


@needs_cuda
def test_gpu_xla_flags_reach_the_compile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The caller's XLA_FLAGS reach the compiler: without GPU priority fusion
    the step's temporaries grow, as in a direct compile with the same flags.
    The caller's own dump flags give way to the child's."""
    plain = hlomem.compile_for(
        mlp.step_donated, *mlp._shapes(), target="a100-40", donate_argnums=0, progress=False
    )
    monkeypatch.setenv("XLA_FLAGS", "--xla_disable_hlo_passes=priority-fusion")
    unfused = hlomem.compile_for(
        mlp.step_donated, *mlp._shapes(), target="a100-40", donate_argnums=0, progress=False
    )
    same_as_direct(unfused, direct(tmp_path, "step", "cuda", "1x1x4", A100.target_config))
    plain_temp = plain.memory_analysis().temp_size_in_bytes
    assert unfused.memory_analysis().temp_size_in_bytes > plain_temp
    monkeypatch.setenv(
        "XLA_FLAGS",
        f"--xla_dump_to={tmp_path / 'mine'} --xla_dump_hlo_module_re=nothing-matches",
    )
    dumped = hlomem.compile_for(
        mlp.step_donated, *mlp._shapes(), target="a100-40", donate_argnums=0, progress=False
    )
    assert dumped.xla_totals == plain.xla_totals


@needs_cuda
def test_gpu_cub_sort_unfinished_compile_still_gets_a_verdict(tmp_path: Path) -> None:
    """On an A100 XLA makes a large sort a CUB sort, whose deviceless compile
    fails after XLA assigned buffers ("invalid device ordinal"): the verdict
    is that module's, says so, and the dump is kept on request."""
    kept = tmp_path / "dump"
    compiled = hlomem.compile_for(
        mlp.sort_flat, *mlp.sort_shapes(), target="a100-40", progress=False, keep_dump=kept
    )
    reference = direct(tmp_path, "sort", "cuda", "1x1x4", A100.target_config)
    assert "invalid device ordinal" in reference["error"]  # the direct compile fails too
    assert compiled.unfinished is not None and "invalid device ordinal" in compiled.unfinished
    assert "cub" in compiled.as_text().lower()
    assert compiled.xla_totals is not None
    assert compiled.xla_totals.total_bytes == reference["total_bytes_used"]
    assert hlomem.analyze(compiled).memory.device_bytes == reference["spaces"]["default"]
    verdict = hlomem.fits(compiled)
    assert verdict.needed_bytes == verdict.xla_bytes == reference["spaces"]["default"]
    assert str(verdict).startswith("fits (the compile did not finish): needs ")
    assert "invalid device ordinal" in str(verdict)
    with pytest.raises(hlomem.HlomemError, match="did not finish"):
        compiled.memory_analysis()
    assert compiled.dump == kept.resolve()
    assert list(kept.glob("*after_optimizations-buffer-assignment.txt"))
    with pytest.raises(ValueError, match="not empty"):
        hlomem.compile_for(mlp.sort_flat, *mlp.sort_shapes(), target="a100-40", keep_dump=kept)


def any_target() -> str:
    if HAS_LIBTPU:
        return "tpu-v5e:2x2"
    if HAS_CUDA:
        return "a100-40"
    pytest.skip("neither libtpu nor the CUDA plugin is installed here")


def test_a_child_that_compiles_another_program_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check that the compiled module is the caller's: a child made to
    turn x64 off (the tests' hook) compiles f32 for f64, and that is an
    error naming each difference, not a verdict."""
    target = any_target()
    monkeypatch.setitem(_deviceless._CHILD_CONFIG_FOR_TESTS, "jax_enable_x64", False)
    a = jax.ShapeDtypeStruct((256, 256), jnp.float64)
    with jax.enable_x64(True), pytest.raises(hlomem.SignatureMismatch) as caught:
        hlomem.compile_for(lambda a, b: (a @ b, a.sum()), a, a, target=target, progress=False)
    message = str(caught.value)
    assert message.startswith("the compiled program is not yours, so hlomem gives no verdict")
    assert "argument 0 (a) is float64 here but was compiled as float32 (f32[256,256])" in message
    assert "argument 1 (b) is float64 here" in message
    assert "output 1 (result[1]) is float64 here but was compiled as float32 (f32[])" in message


def test_the_signature_check_reads_the_entry_layout() -> None:
    """The check on modules written out: shards per device, unused
    arguments dropped by jit, tupled parameters, tokens."""
    from jax.sharding import PartitionSpec as P

    x = jax.ShapeDtypeStruct((64, 256), jnp.float32)
    w = jax.ShapeDtypeStruct((256, 128), jnp.float32)
    step = lambda x, unused, w: (x @ w).astype(jnp.bfloat16)
    sharded = _signature.expected(
        step,
        (x, x, w),
        mesh={"data": 4},
        in_shardings=(P("data"), P(), P()),
        out_shardings=None,
    )
    header = "HloModule jit_step, entry_computation_layout={(%s)->%s}\n"
    # jit keeps arguments 0 and 2; the output's sharding is the compiler's.
    ok = header % ("f32[16,256]{1,0}, f32[256,128]{1,0:T(8,128)}", "bf16[16,128]{1,0}")
    _signature.check(sharded, ok, kept=[0, 2])
    tupled = header % ("(f32[16,256]{1,0}, f32[256,128]{1,0}), token[]", "(bf16[64,128]{1,0})")
    _signature.check(sharded, tupled, kept=[0, 2])
    whole = header % ("f32[64,256]{1,0}, f32[256,128]{1,0}", "bf16[16,128]{1,0}")
    with pytest.raises(
        hlomem.SignatureMismatch,
        match=r"argument 0 \(x\) is \[16, 256\] per "
        r"device \(of \[64, 256\]\) here but was compiled as \[64, 256\]",
    ):
        _signature.check(sharded, whole, kept=[0, 2])
    wider = header % ("f32[16,256]{1,0}, f32[256,128]{1,0}", "bf16[16,256]{1,0}")
    with pytest.raises(hlomem.SignatureMismatch, match="not a shard of it"):
        _signature.check(sharded, wider, kept=[0, 2])
    with pytest.raises(hlomem.SignatureMismatch, match="takes 3 arrays, the function 2"):
        _signature.check(
            sharded,
            header % ("f32[16,256], f32[16,256], f32[256,128]", "bf16[16,128]"),
            kept=[0, 2],
        )
    whole_expected = _signature.expected(
        step, (x, x, w), mesh=None, in_shardings=None, out_shardings=None
    )
    f16 = header % ("f32[64,256]{1,0}, f32[256,128]{1,0}", "f16[64,128]{1,0}")
    with pytest.raises(
        hlomem.SignatureMismatch,
        match=r"output 0 \(result\) is bfloat16 here "
        r"but was compiled as float16",
    ):
        _signature.check(whole_expected, f16, kept=[0, 2])


def test_the_childs_flags_are_the_callers_with_its_own_dump(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """XLA_FLAGS and LIBTPU_INIT_ARGS reach the child as they are, but for
    their dump flags: the child's dump is the one hlomem reads."""
    monkeypatch.setenv(
        "XLA_FLAGS",
        "--xla_disable_hlo_passes=priority-fusion --xla_dump_to=/mine --xla_dump_hlo_pass_re=.*",
    )
    monkeypatch.setenv(
        "LIBTPU_INIT_ARGS", "--xla_tpu_scoped_vmem_limit_kib=1024 --xla_dump_to=/mine"
    )
    env = _deviceless._child_env(tmp_path)
    assert env["XLA_FLAGS"] == (
        f"--xla_disable_hlo_passes=priority-fusion --xla_dump_to={tmp_path} --xla_dump_hlo_as_text"
    )
    assert env["LIBTPU_INIT_ARGS"] == "--xla_tpu_scoped_vmem_limit_kib=1024"
    assert env["JAX_PLATFORMS"] == "cpu"


def test_jax_settings_travel_but_not_the_process_local_ones() -> None:
    from hlomem import _forward

    with jax.enable_x64(True), jax.default_matmul_precision("bfloat16"):
        sent, unsent = _forward.config_to_send()
    assert sent["jax_enable_x64"] is True
    assert sent["jax_default_matmul_precision"] == "bfloat16"
    assert "jax_default_prng_impl" in sent and "jax_compiler_enable_remat_pass" in sent
    for local in ("jax_platforms", "jax_compilation_cache_dir", "jax_enable_compilation_cache"):
        assert local not in sent
    assert unsent == []


def test_missing_extra_names_the_extra() -> None:
    missing = [
        (name, extra)
        for name, extra, present in (
            ("tpu-v5e:2x2", "tpu", HAS_LIBTPU),
            ("h100", "cuda12", HAS_CUDA),
        )
        if not present
    ]
    if not missing:
        pytest.skip("both extras are installed here: no missing one to report")
    for name, extra in missing:
        with pytest.raises(hlomem.BackendNotInstalled, match=rf'pip install "hlomem\[{extra}\]"'):
            hlomem.compile_for(mlp.step, *mlp._shapes(), target=name)
        # compare_targets says so before compiling anything.
        with pytest.raises(hlomem.BackendNotInstalled):
            hlomem.compare_targets(mlp.step, *mlp._shapes(), targets=[name])


def test_verdicts_in_words() -> None:
    """The decision first, then the figures it was made from, each rounded
    once, with two decimals."""
    v5e = resolve_target("tpu-v5e")
    assert hlomem.Verdict(v5e, 97 * GIB).headline == (
        "does not fit: needs 97.00GiB, what libtpu lets a program use of a v5e chip is "
        "15.75GiB, over by 81.25GiB"
    )
    assert str(hlomem.Verdict(v5e, 97 * GIB)).splitlines()[1] == (
        "  a v5e chip has 16.00GiB of HBM; libtpu lets a program use 15.75GiB of it"
    )
    refused = hlomem.Verdict(v5e, 19 * GIB, 19 * GIB, at_least=True)
    assert str(refused) == (
        "does not fit (its compiler refused it): needs at least 19.00GiB, what libtpu lets a "
        "program use of a v5e chip is 15.75GiB, over by at least 3.25GiB\n"
        "  a v5e chip has 16.00GiB of HBM; libtpu lets a program use 15.75GiB of it; "
        f"XLA's buffer assignment of the module it refused: 19.00GiB ({19 * GIB} bytes)"
    )
    assert hlomem.Verdict(v5e, 15 * GIB).headline.endswith(", 0.75GiB to spare")
    h100 = resolve_target("h100")
    assert h100.memory_bytes == 84942979072  # the config's device_memory_size: 79.11GiB
    fits = hlomem.Verdict(h100, int(48 * GIB), int(48.2 * GIB))
    assert fits.fits
    # hlomem's figure and XLA's differ: XLA's decides, both are said.
    assert fits.deciding_bytes == int(48.2 * GIB)
    # Whichever is larger: XLA's buffer assignment is what the device is asked for.
    assert hlomem.Verdict(h100, int(48.2 * GIB), 48 * GIB).deciding_bytes == 48 * GIB
    assert str(fits) == (
        "fits: needs 48.20GiB, JAX's share of an H100 is 59.33GiB, 11.13GiB to spare\n"
        "  an H100 has 79.11GiB of memory; JAX's allocator takes "
        f"XLA_PYTHON_CLIENT_MEM_FRACTION=0.75 of it; XLA's buffer assignment says 48.20GiB "
        f"({int(48.2 * GIB)} bytes), hlomem's analysis 48.00GiB ({48 * GIB} bytes): they "
        "differ, and XLA's decides (hlomem analyze --verify on a kept dump shows where)"
    )
    assert not hlomem.Verdict(h100, 70 * GIB)
    # A comparison's one line per target says so too.
    assert str(hlomem.Comparison("step", (fits,))).splitlines()[1:] == [
        "  h100  fits: needs 48.20GiB, JAX's share of an H100 is 59.33GiB, 11.13GiB to spare",
        (
            "        XLA's buffer assignment says 48.20GiB, hlomem's analysis 48.00GiB: they differ, "
            "and XLA's decides"
        ),
    ]
    # The issue's V100 example: just over JAX's share, well under the GPU.
    v100 = resolve_target("v100")
    over = hlomem.Verdict(v100, v100.usable_bytes + int(0.2 * GIB))
    assert over.headline == (
        f"does not fit: needs {over.needed_bytes / GIB:.2f}GiB, JAX's share of a V100 16GB is "
        f"{v100.usable_bytes / GIB:.2f}GiB, over by 0.20GiB"
    )
    assert not hlomem.Verdict(v5e, GIB, at_least=True)  # a refusal never fits
    unfinished = hlomem.Verdict(h100, GIB, unfinished="INTERNAL: CUDA Runtime error: ...")
    assert unfinished.headline.startswith("fits (the compile did not finish): needs 1.00GiB")
    assert "the compile did not finish (INTERNAL: CUDA Runtime error: ...)" in str(unfinished)


def test_gpu_budget_follows_the_allocator_fraction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.9")
    assert resolve_target("h100").usable_bytes == int(84942979072 * 0.9)


def test_unknown_target_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="tpu-v5e:2x2.*a100-80.*path of a GPU target config"):
        resolve_target("tpu-v9")


def test_gpu_targets_from_names_paths_and_topologies(tmp_path: Path) -> None:
    b200 = resolve_target("b200:1x1x8")
    assert (b200.name, b200.topology, b200.device) == ("b200:1x1x8", "1x1x8", "B200")
    assert b200.memory_bytes == 191514411008
    config = tmp_path / "l40s.txtpb"
    config.write_text(
        "gpu_device_info {\n  device_memory_size: 48305799168\n}\n"
        'device_description_str: "NVIDIA L40S"\n'
    )
    for given in (str(config), config, f"{config}:1x1x2"):
        target = resolve_target(given)
        assert (target.name, target.device, target.memory_bytes) == ("l40s", "L40S", 48305799168)
        assert target.target_config == str(config)
    assert resolve_target(f"{config}:1x1x2").topology == "1x1x2"
    assert hlomem.gpu_target(config, memory_gib=44).memory_bytes == 44 * GIB
    no_memory = tmp_path / "bare.txtpb"
    no_memory.write_text("gpu_device_info {\n  core_count: 1\n}\n")
    with pytest.raises(ValueError, match="memory_gib"):
        hlomem.gpu_target(no_memory)
    with pytest.raises(FileNotFoundError):
        resolve_target(str(tmp_path / "missing.txtpb"))
    with pytest.raises(ValueError, match="not a GpuTargetConfigProto"):
        hlomem.gpu_target(HERE / "mlp.py")


def test_the_gpu_target_configs_are_installed_with_the_package() -> None:
    for name in hlomem.GPU_TARGETS:
        target = resolve_target(name)
        config = target.target_config
        assert config is not None  # in the wheel beside the code (maturin packs the folder)
        text = Path(config).read_text()
        assert "gpu_device_info" in text and "Licensed under the Apache License" in text
        assert target.memory_bytes > 8 * GIB
