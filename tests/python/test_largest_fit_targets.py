"""hlomem.largest_fit and hlomem.compare_variants for a TPU and a GPU this
machine does not have (deviceless compiles through compile_for), checked
against direct deviceless compiles of the same function (``direct_fit.py``:
XLA's own figures, not hlomem's): the answer compiles within the target's
budget (``assert_fits``'s), the next grid value does not or is refused.

Needs the ``tpu`` / ``cuda12`` extras (skipped without them); a TPU
compile takes seconds to a minute on 2 cores, so the programs are small.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest

import hlomem
import mlp
import transformer
from hlomem._targets import resolve_target

HERE = Path(__file__).resolve().parent
MIB = 1 << 20

needs_tpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None,
    reason='libtpu is not installed here (pip install "hlomem[tpu]")',
)
needs_cuda = pytest.mark.skipif(
    importlib.util.find_spec("jax_cuda12_plugin") is None,
    reason='the CUDA plugin is not installed here (pip install "hlomem[cuda12]")',
)


def direct(
    tmp: Path, fn: str, make_args: str, target: str, sizes: list[int], donate: tuple[int, ...]
) -> dict[int, dict[str, Any]]:
    """XLA's figures for ``fn(*make_args(n))`` compiled directly for
    ``target`` at each of ``sizes``, in one child process."""
    resolved = resolve_target(target)
    platform = resolved.platform
    env = dict(
        os.environ, JAX_PLATFORMS="cpu", TPU_SKIP_MDS_QUERY="1", ALLOW_MULTIPLE_LIBTPU_LOAD="1"
    )
    dump = tmp / f"direct-{fn.replace(':', '-')}-{resolved.name.replace(':', '_')}"
    argv = [sys.executable, str(HERE / "direct_fit.py"), str(dump), fn, make_args, platform]
    argv += [resolved.topology, resolved.target_config or "", json.dumps(list(donate))]
    argv += [str(n) for n in sizes]
    out = subprocess.run(argv, env=env, capture_output=True, check=True).stdout
    return {int(k): v for k, v in json.loads(out.decode().strip().splitlines()[-1]).items()}


def refused(result: dict[str, Any]) -> bool:
    return "error" in result and "RESOURCE_EXHAUSTED" in result["error"]


def check_against_direct(fit: hlomem.LargestFit, reference: dict[int, dict[str, Any]]) -> None:
    """The answer compiles within the budget and the next value does not, in
    direct compiles; the search's figures are XLA's."""
    assert fit.value is not None and fit.next_value is not None
    at = reference[fit.value]
    assert "error" not in at, at
    assert at["hbm"] == fit.needed_bytes <= fit.budget_bytes
    after = reference[fit.next_value]
    if refused(after):
        assert fit.next_refused and fit.next_needed_bytes is None
    else:
        assert "error" not in after, after
        assert after["hbm"] == fit.next_needed_bytes > fit.budget_bytes
    for n in (fit.value, fit.next_value):
        point = fit.point(n)
        if not point.refused:
            # XLA's own figure decides; hlomem's is shown beside it, and a
            # note says where the two differ.
            assert point.xla_bytes == point.needed_bytes == reference[n]["hbm"]
            assert point.memory_analysis == reference[n]["memory_analysis"]
            if point.hlomem_bytes != point.xla_bytes:
                assert any(
                    "hlomem's analysis and XLA's buffer assignment differ" in note
                    for note in fit.notes
                )


def transformer_search(target: str, tmp_path: Path) -> hlomem.LargestFit:
    fit = hlomem.largest_fit(
        transformer.train_step,
        transformer.make_args,
        target=target,
        grid=range(8, 4097, 8),
        donate_argnums=(0, 1),
    )
    print(fit)
    usable = resolve_target(target).usable_bytes
    assert fit.budget_bytes == usable  # assert_fits's budget for the target
    assert fit.budget_from == resolve_target(target).share
    # A smooth curve: two compiles predict, the checks confirm.
    assert fit.compiles <= 6
    reference = direct(
        tmp_path,
        "transformer:train_step",
        "transformer:make_args",
        target,
        [fit.value, fit.next_value],
        (0, 1),
    )
    check_against_direct(fit, reference)
    # The donation took at every compiled point.
    assert all(p.alias_bytes for p in fit.points if not p.refused)
    if fit.point(fit.value).hlomem_bytes == fit.needed_bytes:
        hlomem.assert_fits(fit.compiled)  # the answer passes the gate itself
    (tmp_path / "curve.svg").write_text(fit.svg())
    return fit


@needs_tpu
def test_tpu_v5e_transformer_largest_batch(tmp_path: Path) -> None:
    transformer_search("tpu-v5e:2x2", tmp_path)


@needs_cuda
def test_gpu_h100_transformer_largest_batch(tmp_path: Path) -> None:
    transformer_search("h100", tmp_path)


def square(x: Any) -> Any:
    """``sin(x @ x.T)``: an n x n temporary, memory quadratic in the rows."""
    return jnp.sin(x @ x.T)


def square_args(n: int) -> tuple[Any]:
    return (jax.ShapeDtypeStruct((n, 1024), jnp.float32),)


@needs_tpu
def test_tpu_refusal_is_the_next_value(tmp_path: Path) -> None:
    """libtpu refuses n=65536 (a 16 GiB temporary) while compiling: the
    search takes the refusal as "does not fit", with no figure but its lower
    bound; the brute force over the grid, compiled directly, agrees."""
    grid = list(range(8192, 98305, 8192))
    fit = hlomem.largest_fit(square, square_args, target="tpu-v5e:2x2", grid=grid)
    reference = direct(
        tmp_path,
        "test_largest_fit_targets:square",
        "test_largest_fit_targets:square_args",
        "tpu-v5e:2x2",
        grid,
        (),
    )
    usable = resolve_target("tpu-v5e:2x2").usable_bytes
    fitting = [n for n in grid if not refused(reference[n]) and reference[n]["hbm"] <= usable]
    assert fitting == grid[: len(fitting)] and fitting  # monotone, and the boundary in the grid
    assert fit.value == fitting[-1] and fit.next_value == grid[len(fitting)]
    assert refused(reference[fit.next_value])
    check_against_direct(fit, reference)
    nxt = fit.point(fit.next_value)
    assert nxt.refused and nxt.needed_bytes is None and nxt.fits is False
    assert nxt.at_least_bytes is not None and nxt.at_least_bytes > usable
    assert "Ran out of memory" in (nxt.message or "") or "RESOURCE_EXHAUSTED" in (nxt.message or "")
    assert fit.compiles < len(grid)
    assert "does not fit: refused by the compiler (at least" in fit.headline
    table = fit.table()
    assert "refused by the compiler (at least" in table and "<- next: does not fit" in table
    svg = fit.svg()
    ET.fromstring(svg)
    assert 'class="refused"' in svg and "refused by the compiler" in svg


@needs_tpu
def test_tpu_mesh_per_device_batch() -> None:
    """With a mesh, the batch is sharded 4 ways: the figures are per device,
    and the answer and the next value are checked with compile_for itself."""
    from jax.sharding import PartitionSpec as P

    params, _, _ = mlp._shapes()
    replicated = jax.tree_util.tree_map(lambda _: P(), params)
    options: dict[str, Any] = {
        "mesh": {"data": 4},
        "in_shardings": (replicated, P("data"), P("data")),
    }
    grid = range(64, 8193, 64)

    def make_args(n: int) -> Any:
        return (
            params,
            jax.ShapeDtypeStruct((n, mlp.SIZES[0]), jnp.float32),
            jax.ShapeDtypeStruct((n, mlp.SIZES[-1]), jnp.float32),
        )

    fit = hlomem.largest_fit(
        mlp.step, make_args, target="tpu-v5e:2x2", grid=grid, budget="5MiB", **options
    )
    assert fit.value is not None and fit.next_value is not None and fit.budget_bytes == 5 * MIB
    at = hlomem.compile_for(mlp.step, *make_args(fit.value), target="tpu-v5e:2x2", **options)
    assert "num_partitions=4" in at.as_text()
    hlomem.assert_fits(at, budget="5MiB", fail_on=())
    assert hlomem.analyze(at).memory.device_bytes == fit.needed_bytes
    after = hlomem.compile_for(
        mlp.step, *make_args(fit.next_value), target="tpu-v5e:2x2", **options
    )
    with pytest.raises(hlomem.OutOfBudget):
        hlomem.assert_fits(after, budget="5MiB", fail_on=())


@needs_tpu
def test_tpu_a_failure_not_about_memory_is_the_compilers_message() -> None:
    with pytest.raises(hlomem.HlomemError) as caught:
        hlomem.largest_fit(
            mlp.step, _mlp_args, target="tpu-v5e:2x2", mesh={"data": 8}, progress=False
        )
    message = str(caught.value)
    assert message.startswith(
        "largest_fit: the compile of step at n=8 for tpu-v5e:2x2 failed, not for memory:\n"
    )
    assert "mesh {'data': 8} needs 8 devices; tpu-v5e:2x2 has 4" in message


def _mlp_args(n: int) -> tuple[Any, Any, Any]:
    params, _, _ = mlp._shapes()
    return (
        params,
        jax.ShapeDtypeStruct((n, mlp.SIZES[0]), jnp.float32),
        jax.ShapeDtypeStruct((n, mlp.SIZES[-1]), jnp.float32),
    )


@needs_tpu
def test_tpu_compare_variants_donation_with_xlas_numbers(tmp_path: Path) -> None:
    comparison = hlomem.compare_variants(
        mlp.step_donated,
        mlp._shapes(),
        {"as is": {}, "donate": {"donate_argnums": 0}},
        target="tpu-v5e:2x2",
    )
    reference = direct(
        tmp_path,
        "mlp:step_donated",
        "test_largest_fit_targets:_mlp_shapes",
        "tpu-v5e:2x2",
        [0],
        (),
    )[0]
    donated = direct(
        tmp_path / "donated",
        "mlp:step_donated",
        "test_largest_fit_targets:_mlp_shapes",
        "tpu-v5e:2x2",
        [0],
        (0,),
    )[0]
    for name, ref in (("as is", reference), ("donate", donated)):
        point = comparison[name].point
        assert point.memory_analysis == ref["memory_analysis"]
        assert point.xla_bytes == point.hlomem_bytes == point.needed_bytes == ref["hbm"]
        assert point.fits and point.budget_bytes == resolve_target("tpu-v5e").usable_bytes
    assert comparison["as is"].point.alias_bytes == 0 < comparison["donate"].point.alias_bytes
    assert comparison.saving("donate") == reference["hbm"] - donated["hbm"]
    text = str(comparison)
    assert "hlomem's figure" in text and "vmem space" in text
    print(text)


def _mlp_shapes(_: int) -> Any:
    return mlp._shapes()


@needs_tpu
def test_tpu_nothing_fits_when_the_smallest_is_refused() -> None:
    # A cache of its own: another test may have compiled n=65536 already, and
    # the count below is of this search's compiles.
    with pytest.raises(hlomem.NothingFits) as caught:
        hlomem.largest_fit(
            square,
            square_args,
            target="tpu-v5e:2x2",
            grid=[65536, 73728],
            progress=False,
            cache=hlomem.CompileCache(),
        )
    message = str(caught.value)
    assert message.startswith(
        "largest_fit: even n=65536, the grid's smallest value, does not fit square on "
        "tpu-v5e:2x2: its compiler refused it, it needs at least 16.25GiB; the budget is "
        "15.75GiB (what libtpu lets a program use of a v5e chip)"
    )
    assert "what holds the live peak" in message and "The compiler said: " in message
    assert caught.value.point.refused and caught.value.fit.compiles == 1
