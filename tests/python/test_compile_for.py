"""hlomem.compile_for: real deviceless compiles for a TPU (libtpu) and an
H100 (the CUDA plugin) on a machine with neither, checked against the same
compile done directly (``direct_compile.py``).

The compiles need the ``tpu`` / ``cuda12`` extras; without them those tests
are skipped with the reason, and the missing-extra error is tested instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import hlomem
import mlp
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


def direct(platform: str, topology: str, config: str | None = None) -> dict[str, int]:
    """memory_analysis() of the MLP step compiled directly for the target."""
    env = dict(
        os.environ, JAX_PLATFORMS="cpu", TPU_SKIP_MDS_QUERY="1", ALLOW_MULTIPLE_LIBTPU_LOAD="1"
    )
    argv = [sys.executable, str(HERE / "direct_compile.py"), platform, topology]
    out = subprocess.run(
        argv + ([config] if config else []), env=env, capture_output=True, check=True
    ).stdout
    return json.loads(out.decode().strip().splitlines()[-1])


def same_numbers(compiled: hlomem.DevicelessCompiled, reference: dict[str, int]) -> None:
    ours = compiled.memory_analysis()
    report = hlomem.analyze(compiled)
    assert ours.argument_size_in_bytes == reference["argument_size_in_bytes"]
    assert ours.output_size_in_bytes == reference["output_size_in_bytes"]
    assert ours.alias_size_in_bytes == reference["alias_size_in_bytes"]
    assert reference["alias_size_in_bytes"] > 0  # the donation took
    # hlomem's analysis of the text reads the same numbers.
    assert report.memory.argument_bytes == reference["argument_size_in_bytes"]
    assert report.memory.output_bytes == reference["output_size_in_bytes"]
    assert report.memory.alias_bytes == reference["alias_size_in_bytes"]


def too_big(x: Any) -> Any:
    """A 40 GB temporary (x @ x.T for x f32[100000, 1000]): no TPU chip has it."""
    return jnp.sin(x @ x.T) @ x


@needs_tpu
def test_tpu_v5e_mlp_step_equals_a_direct_compile() -> None:
    compiled = hlomem.compile_for(
        mlp.step_donated, *mlp._shapes(), target="tpu-v5e:2x2", donate_argnums=0
    )
    assert compiled.target.name == "tpu-v5e:2x2"
    assert "T(8,128)" in compiled.as_text()  # TPU layouts: it was compiled for the TPU
    same_numbers(compiled, direct("tpu", "v5e:2x2"))
    verdict = hlomem.fits(compiled)
    assert verdict.fits and str(verdict).startswith("fits on one v5e chip with ")
    result = hlomem.assert_fits(compiled)  # the budget: a v5e chip's 16 GiB
    assert result.passed and result.budget_bytes == 16 * GIB
    with pytest.raises(hlomem.OutOfBudget):
        hlomem.assert_fits(compiled, budget="1MiB")


@needs_tpu
def test_tpu_refusal_for_memory_is_out_of_budget_with_an_explanation() -> None:
    x = jax.ShapeDtypeStruct((100_000, 1000), jnp.float32)
    with pytest.raises(hlomem.OutOfBudget) as caught:
        hlomem.compile_for(too_big, x, target="tpu-v5e:2x2", progress=False)
    error = caught.value
    assert error.result is None
    assert error.explanation is not None
    assert error.explanation.format.startswith("tpu")
    message = str(error)
    assert message.startswith("tpu-v5e:2x2's compiler refused the program for memory")
    assert str(error.explanation).strip() in message


@needs_tpu
def test_arrays_are_read_as_shapes_and_lambdas_travel_with_cloudpickle() -> None:
    pytest.importorskip("cloudpickle", reason="cloudpickle is not installed (the extras have it)")
    a = jnp.ones((256, 256), jnp.float32)  # a CPU array: only its shape and dtype go
    compiled = hlomem.compile_for(lambda a: a @ a, a, target="tpu-v6e", progress=False)
    assert compiled.target.name == "tpu-v6e:2x2"
    assert compiled.memory_analysis().argument_size_in_bytes == 256 * 256 * 4
    assert hlomem.fits(compiled).target.memory_bytes == 32 * GIB
    # The HLO text does not name the chip; hlomem is told it (--tpu v6e).
    assert hlomem.analyze(compiled).target.tpu_version == "v6e"


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
def test_h100_mlp_step_equals_a_direct_compile() -> None:
    compiled = hlomem.compile_for(mlp.step_donated, *mlp._shapes(), target="h100", donate_argnums=0)
    target = compiled.target
    same_numbers(compiled, direct("cuda", target.topology, target.target_config))
    result = hlomem.assert_fits(compiled)
    assert result.budget_bytes == int(80 * GIB * 0.75) == target.usable_bytes
    assert str(hlomem.fits(compiled)).startswith("fits on one H100 with ")


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


def test_verdicts_in_words() -> None:
    v5e = resolve_target("tpu-v5e")
    assert str(hlomem.Verdict(v5e, 97 * GIB)) == "needs 97 GiB of HBM, a v5e chip has 16 GiB"
    h100 = resolve_target("h100")
    fits = hlomem.Verdict(h100, int(48.7 * GIB))
    assert fits.fits
    assert str(fits) == (
        "fits on one H100 with 11.3 GiB to spare "
        "(JAX's allocator takes XLA_PYTHON_CLIENT_MEM_FRACTION=0.75 of it: 60 GiB)"
    )
    assert not hlomem.Verdict(h100, 70 * GIB)


def test_gpu_budget_follows_the_allocator_fraction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.9")
    assert resolve_target("h100").usable_bytes == int(80 * GIB * 0.9)


def test_unknown_target_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="tpu-v5e:2x2"):
        resolve_target("tpu-v9")


def test_the_h100_target_config_is_installed_with_the_package() -> None:
    config = resolve_target("h100").target_config
    assert config is not None  # in the wheel beside the code (maturin packs the folder)
    assert "gpu_device_info" in Path(config).read_text()
