"""hlomem.largest_fit and hlomem.compare_variants on real compiles in this
process (JAX's CPU): the search's answer against a brute force that
compiles every value of the grid with jax.jit and asks hlomem.assert_fits,
the points' figures against XLA's memory_analysis() of those compiles.

The TPU and GPU cases (deviceless compiles, a compiler's refusal) are in
test_largest_fit_targets.py.
"""

from __future__ import annotations

import itertools
import os
import shutil
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

HERE = Path(__file__).resolve().parent
MIB = 1 << 20
F32 = jnp.float32
GRID = range(16, 1025, 16)


def mlp_args(n: int) -> tuple[Any, Any, Any]:
    """The MLP step's arguments for a batch of ``n``."""
    params, _, _ = mlp._shapes()
    return (
        params,
        jax.ShapeDtypeStruct((n, mlp.SIZES[0]), F32),
        jax.ShapeDtypeStruct((n, mlp.SIZES[-1]), F32),
    )


W = jax.ShapeDtypeStruct((512, 512), F32)


def chunked_grad(w: Any, x: Any) -> Any:
    """The gradient of a 4-layer tanh MLP whose batch goes through in chunks
    of 128 rows (lax.map) above 256 rows: the memory jumps there, and its
    slope changes from about 3 KiB to 20 KiB a row."""

    def loss(w: Any, x: Any) -> Any:
        def block(x: Any) -> Any:
            for _ in range(4):
                x = jnp.tanh(x @ w)
            return x

        n = x.shape[0]
        if n > 256:
            out = jax.lax.map(block, x.reshape(n // 128, 128, 512)).reshape(n, 512)
        else:
            out = block(x)
        return jnp.sum(out**2)

    return jax.grad(loss)(w, x)


def chunked_args(n: int) -> tuple[Any, Any]:
    return W, jax.ShapeDtypeStruct((n, 512), F32)


CHUNKED_GRID = range(128, 8193, 128)


def brute(fn: Any, make_args: Any, grid: Any) -> dict[int, dict[str, Any]]:
    """Every grid value compiled with jax.jit, XLA's memory_analysis() and
    hlomem's figure (what assert_fits compares with a budget) of each."""
    out = {}
    for n in grid:
        compiled = jax.jit(fn).lower(*make_args(n)).compile()
        analysis = compiled.memory_analysis()
        out[n] = {
            "compiled": compiled,
            "needed": hlomem.analyze(compiled).memory.device_bytes,
            "argument": analysis.argument_size_in_bytes,
            "output": analysis.output_size_in_bytes,
            "alias": analysis.alias_size_in_bytes,
            "temp": analysis.temp_size_in_bytes,
        }
    return out


def expected(curve: dict[int, dict[str, Any]], budget: int) -> tuple[int | None, int | None]:
    """The brute force's answer: the largest value that fits, and the next.
    Checked with assert_fits itself at both."""
    values = sorted(curve)
    fitting = [n for n in values if curve[n]["needed"] <= budget]
    # The curves of these tests are monotone: what fits is a prefix.
    assert fitting == values[: len(fitting)]
    if not fitting:
        return None, values[0]
    value = fitting[-1]
    after = values[len(fitting)] if len(fitting) < len(values) else None
    hlomem.assert_fits(curve[value]["compiled"], budget=budget, fail_on=())
    if after is not None:
        with pytest.raises(hlomem.OutOfBudget):
            hlomem.assert_fits(curve[after]["compiled"], budget=budget, fail_on=())
    return value, after


@pytest.fixture(scope="module")
def mlp_curve() -> dict[int, dict[str, Any]]:
    return brute(mlp.step, mlp_args, GRID)


@pytest.fixture(scope="module")
def chunked_curve() -> dict[int, dict[str, Any]]:
    return brute(chunked_grad, chunked_args, CHUNKED_GRID)


def same_as_brute(fit: hlomem.LargestFit, curve: dict[int, dict[str, Any]]) -> None:
    """Every point the search compiled has XLA's figures of the brute force's compile."""
    for point in fit.points:
        reference = curve[point.n]
        assert point.needed_bytes == reference["needed"], point.n
        assert point.argument_bytes == reference["argument"]
        assert point.output_bytes == reference["output"]
        assert point.alias_bytes == reference["alias"]
        assert point.temp_bytes == reference["temp"]
        assert point.memory_analysis == {
            "argument_size_in_bytes": reference["argument"],
            "output_size_in_bytes": reference["output"],
            "alias_size_in_bytes": reference["alias"],
            "temp_size_in_bytes": reference["temp"],
        }
        assert point.fits == (reference["needed"] <= fit.budget_bytes)


def test_mlp_batch_equals_the_brute_force(
    mlp_curve: dict[int, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    budget = 12 * MIB
    value, after = expected(mlp_curve, budget)
    assert value is not None and after is not None  # the boundary is inside the grid
    fit = hlomem.largest_fit(mlp.step, mlp_args, grid=GRID, budget="12MiB", cache=False)
    assert (fit.value, fit.next_value) == (value, after)
    assert fit.needed_bytes == mlp_curve[value]["needed"] <= budget
    assert fit.next_needed_bytes == mlp_curve[after]["needed"] > budget
    assert fit.budget_bytes == budget and not fit.next_refused
    same_as_brute(fit, mlp_curve)
    # A smooth curve: two compiles predict, two check, two more at most.
    assert fit.compiles <= 6 < len(GRID) == fit.grid_size
    assert fit.cache_hits == 0 and fit.compile_seconds > 0
    assert fit.value in [p.n for p in fit.points] and fit.next_value in [p.n for p in fit.points]
    # The answer passes assert_fits, with the budget it was found with.
    hlomem.assert_fits(fit.compiled, budget="12MiB", fail_on=())
    # Progress on standard error: each compile, the prediction, the answer.
    err = capsys.readouterr().err
    assert f"hlomem: n={GRID[0]}: compiling step for this process's cpu (compile 1)..." in err
    assert "reaches the budget at n=" in err and "checking n=" in err
    assert f"hlomem: done: largest fit n={value}, {fit.compiles} compiles in " in err
    print(fit)


def test_a_change_of_slope_is_found_by_the_checks(
    chunked_curve: dict[int, dict[str, Any]],
) -> None:
    """The first two compiles (n=128 and 512) draw a line the curve leaves
    (it jumps at 384 and is steeper after); the checks find the boundary."""
    needed = [chunked_curve[n]["needed"] for n in CHUNKED_GRID]
    slopes = [(b - a) / 128 for a, b in itertools.pairwise(needed)]
    assert max(slopes) > 4 * min(slopes)  # the slope does change
    for budget_mib in (10, 40, 70):
        budget = budget_mib * MIB
        value, after = expected(chunked_curve, budget)
        fit = hlomem.largest_fit(
            chunked_grad, chunked_args, grid=CHUNKED_GRID, budget=budget, progress=False
        )
        assert (fit.value, fit.next_value) == (value, after), budget_mib
        same_as_brute(fit, chunked_curve)
        # Far fewer than the grid's 64, and within a bisection's bound twice over.
        assert fit.compiles + fit.cache_hits <= 12


def test_the_whole_grid_fits(mlp_curve: dict[int, dict[str, Any]]) -> None:
    fit = hlomem.largest_fit(
        mlp.step, mlp_args, grid=GRID, budget="1GiB", progress=False, cache=False
    )
    assert fit.value == GRID[-1] and fit.next_value is None and fit.next_needed_bytes is None
    assert fit.needed_bytes == mlp_curve[GRID[-1]]["needed"]
    assert fit.compiles <= 3  # the two first, then the grid's last
    assert "every value of the grid fits" in fit.headline


def test_nothing_fits_says_what_holds_the_peak() -> None:
    with pytest.raises(hlomem.NothingFits) as caught:
        hlomem.largest_fit(mlp.step, mlp_args, grid=GRID, budget="2MiB", progress=False)
    error = caught.value
    assert isinstance(error, AssertionError)
    message = str(error)
    assert message.startswith(
        "largest_fit: even n=16, the grid's smallest value, does not fit step on this device: "
        "needs "
    )
    assert "what holds the live peak" in message and "argument `params`" in message
    assert error.fit.value is None and error.point.n == 16 and error.fit.compiles <= 1


def test_make_args_that_ignore_n_are_an_error() -> None:
    with pytest.raises(ValueError, match="make_args gives the same arguments for n=16 and n=64"):
        hlomem.largest_fit(mlp.step, lambda n: mlp._shapes(), grid=GRID, budget="12MiB")


def test_a_cpu_needs_a_budget() -> None:
    with pytest.raises(ValueError, match="largest_fit needs a budget"):
        hlomem.largest_fit(mlp.step, mlp_args, grid=GRID, progress=False, cache=False)


def test_bad_grids_and_options() -> None:
    with pytest.raises(ValueError, match="the grid is empty"):
        hlomem.largest_fit(mlp.step, mlp_args, grid=[], budget="12MiB")
    with pytest.raises(TypeError, match="integers"):
        hlomem.largest_fit(mlp.step, mlp_args, grid=[8, 16.5], budget="12MiB")
    with pytest.raises(TypeError, match="mesh= is compile_for's"):
        hlomem.largest_fit(mlp.step, mlp_args, budget="12MiB", mesh={"data": 2})
    with pytest.raises(TypeError, match="sets keep_dump itself"):
        hlomem.compare_variants(mlp.step, mlp_args(8), {"a": {}}, keep_dump=True, progress=False)


def test_the_cache_serves_a_second_search(mlp_curve: dict[int, dict[str, Any]]) -> None:
    """Compiles are cached by function, shapes, target and options: a search
    with another budget compiles only what it had not."""
    cache = hlomem.CompileCache()
    first = hlomem.largest_fit(
        mlp.step, mlp_args, grid=GRID, budget="12MiB", progress=False, cache=cache
    )
    again = hlomem.largest_fit(
        mlp.step, mlp_args, grid=GRID, budget="12MiB", progress=False, cache=cache
    )
    assert again.compiles == 0 and again.cache_hits == first.compiles
    assert (again.value, again.next_value) == (first.value, first.next_value)
    assert all(p.cached for p in again.points)
    budget = 8 * MIB
    other = hlomem.largest_fit(
        mlp.step, mlp_args, grid=GRID, budget=budget, progress=False, cache=cache
    )
    assert (other.value, other.next_value) == expected(mlp_curve, budget)
    assert other.cache_hits >= 1  # n=16 and n=64 at least
    same_as_brute(other, mlp_curve)
    # Another option is another compile.
    donated = hlomem.largest_fit(
        mlp.step,
        mlp_args,
        grid=GRID,
        budget="12MiB",
        progress=False,
        cache=cache,
        donate_argnums=0,
    )
    assert donated.cache_hits == 0


def test_the_table_and_the_chart(tmp_path: Path) -> None:
    fit = hlomem.largest_fit(mlp.step, mlp_args, grid=GRID, budget="12MiB", progress=False)
    table = fit.table()
    lines = table.splitlines()
    assert lines[0] == "budget: 12.00MiB per device (the budget given)"
    assert lines[1].split() == [
        "n",
        "fits",
        "needs",
        "arguments",
        "outputs",
        "aliased",
        "temp",
        "compile",
    ]
    rows = {line.split()[0]: line for line in lines[2 : 2 + len(fit.points)]}
    assert set(rows) == {str(p.n) for p in fit.points}
    assert rows[str(fit.value)].endswith("<- largest fit")
    assert rows[str(fit.next_value)].endswith("<- next: does not fit")
    assert f"{fit.needed_bytes / MIB:.2f}MiB" in rows[str(fit.value)]
    curve = fit.curve
    assert [row["n"] for row in curve] == [p.n for p in fit.points]
    assert curve[0]["needed_bytes"] == fit.points[0].needed_bytes and "compiled" not in curve[0]

    svg = fit.svg()
    root = ET.fromstring(svg)  # well-formed, self-contained
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "budget 12.00MiB" in svg and f"largest fit n={fit.value}" in svg
    assert svg.count('class="point"') == len(fit.points)
    assert "<script" not in svg and "http://" not in svg.replace("http://www.w3.org/2000/svg", "")
    html = fit._repr_html_()
    assert svg in html and "largest fit" in html
    page = tmp_path / "curve.html"
    page.write_text(f"<!doctype html><html><body>{html}</body></html>")
    screenshot(page, tmp_path / "curve.png")
    # As a notebook shows it: the output inside JupyterLab's, the classic
    # notebook's and VS Code's CSS (tests/it/notebook.css, the HTML report's
    # notebook test uses the same rules).
    notebook_css = (Path(__file__).resolve().parents[1] / "it" / "notebook.css").read_text()
    notebook = tmp_path / "curve-notebook.html"
    notebook.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><style>{notebook_css}</style></head>"
        "<body><div class='jp-Notebook'><div class='jp-Cell jp-CodeCell'><div class='jp-OutputArea'>"
        "<div class='jp-OutputArea-child'><div class='jp-OutputPrompt'>[1]:</div>"
        "<div class='jp-RenderedHTMLCommon jp-RenderedHTML jp-OutputArea-output rendered_html' "
        f"data-mime-type='text/html'>{html}</div></div></div></div></div></body></html>"
    )
    screenshot(notebook, tmp_path / "curve-notebook.png")


def screenshot(page: Path, png: Path) -> None:
    """A headless Chromium's picture of the page, when Chromium is here (the
    test output names the file)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("no chromium here: no screenshot of", page)
        return
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={png}",
            "--window-size=820,760",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert png.exists() and png.stat().st_size > 10_000, "chromium drew nothing"
    print("screenshot:", png)


def test_compare_variants_donation_with_xlas_numbers() -> None:
    args = mlp_args(64)
    comparison = hlomem.compare_variants(
        mlp.step,
        args,
        {"as is": {}, "donate": {"donate_argnums": 0}},
        budget="12MiB",
        progress=False,
        cache=False,
    )
    assert comparison.names == ["as is", "donate"]
    for name, donate in (("as is", ()), ("donate", 0)):
        compiled = jax.jit(mlp.step, donate_argnums=donate).lower(*args).compile()
        analysis = compiled.memory_analysis()
        point = comparison[name].point
        assert point.memory_analysis == {
            "argument_size_in_bytes": analysis.argument_size_in_bytes,
            "output_size_in_bytes": analysis.output_size_in_bytes,
            "alias_size_in_bytes": analysis.alias_size_in_bytes,
            "temp_size_in_bytes": analysis.temp_size_in_bytes,
        }
        assert point.alias_bytes == analysis.alias_size_in_bytes
        assert point.temp_bytes == analysis.temp_size_in_bytes
        assert point.needed_bytes == hlomem.analyze(compiled).memory.device_bytes
        assert point.fits is True and point.budget_bytes == 12 * MIB
    plain, donated = comparison["as is"].point, comparison["donate"].point
    assert plain.alias_bytes == 0 < donated.alias_bytes
    assert "HM001" in plain.findings and "HM001" not in donated.findings
    assert comparison.saving("donate") == plain.needed_bytes - donated.needed_bytes
    text = str(comparison)
    assert text.startswith("step on this device, 2 variants, budget 12.00MiB (the budget given)")
    assert "aliased (donated)" in text and "XLA temp_size" in text
    assert "what holds the live peak:" in text and "argument `params`" in text
    ET.fromstring(comparison.svg())


def test_compare_variants_replaces_the_function_or_the_arguments() -> None:
    params, x, y = mlp_args(64)
    bf16 = jax.tree_util.tree_map(lambda s: jax.ShapeDtypeStruct(s.shape, jnp.bfloat16), params)
    comparison = hlomem.compare_variants(
        mlp.step,
        (params, x, y),
        {
            "as is": {},
            "bf16 params": {"args": (bf16, x, y)},
            "donated twin": {"fn": mlp.step_donated, "donate_argnums": 0},
        },
        progress=False,
    )
    assert comparison.budget_bytes is None  # a CPU, no budget: figures only
    assert all(v.point.fits is None for v in comparison)
    assert comparison["bf16 params"].point.argument_bytes < comparison["as is"].point.argument_bytes
    assert comparison["donated twin"].own_fn and comparison["donated twin"].point.alias_bytes > 0
    assert "fits" not in comparison.table().splitlines()[1]


DUMP_SIZES = (64, 256, 512, 768, 1024)


@pytest.fixture(scope="module")
def mlp_dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """XLA's dump of the MLP step at each of DUMP_SIZES, one folder each
    (a child process per size: XLA reads XLA_FLAGS once)."""
    folders = {}
    for n in DUMP_SIZES:
        folder = tmp_path_factory.mktemp(f"dump{n}")
        code = (
            "import jax, test_largest_fit as t, mlp; "
            f"jax.jit(mlp.step).lower(*t.mlp_args({n})).compile()"
        )
        env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={folder} --xla_dump_hlo_as_text")
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
        subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=HERE)
        folders[n] = folder
    return folders


def test_the_curve_from_dump_folders(
    mlp_dumps: dict[int, Path], mlp_curve: dict[int, dict[str, Any]], tmp_path: Path
) -> None:
    from hlomem.curve import curve_from_dumps

    fit = curve_from_dumps(mlp_dumps, budget="12MiB")
    assert (fit.value, fit.next_value) == (512, 768)
    assert fit.compiles == 0 and [p.n for p in fit.points] == list(DUMP_SIZES)
    for point in fit.points:
        assert point.needed_bytes == mlp_curve[point.n]["needed"]
        assert point.xla_bytes == point.needed_bytes  # XLA's "Total bytes used", from the dump
        assert point.temp_bytes == mlp_curve[point.n]["temp"]
    assert "read from 5 dump folders: no compile" in str(fit)
    # The command line: the table, and the chart written out.
    svg = tmp_path / "curve.svg"
    argv = [sys.executable, "-m", "hlomem.curve", "--budget", "12MiB", "--svg", str(svg)]
    argv += [f"{n}={folder}" for n, folder in mlp_dumps.items()]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "jit_step on this device: largest fit n=512 of 12.00MiB (the budget given)"
    )
    assert "<- next: does not fit" in done.stdout
    ET.fromstring(svg.read_text())
    with pytest.raises(SystemExit):
        from hlomem.curve import main

        main(["--budget", "12MiB", "not-a-pair"])


class _Curve(hlomem._fit.Session):
    """A session whose compiles are a formula (bytes against n): the search's
    logic on many curves, without compiling. With ``refuses``, a value over
    the budget is refused (no figure), as libtpu refuses while compiling."""

    def __init__(self, curve: Any, budget: int, refuses: bool) -> None:
        self.curve, self.budget, self.budget_bytes = curve, budget, budget
        self.refuses = refuses
        self.name, self.target, self.progress, self.budget_from = "curve", None, False, "given"
        self.compiles, self.cache_hits, self.compile_seconds = 0, 0, 0.0

    @property
    def where(self) -> str:
        return "a formula"

    def measure(self, args: Any, *, n: Any, label: str, **_: Any) -> hlomem.FitPoint:
        self.compiles += 1
        needed = self.curve(n)
        fits = needed <= self.budget
        refused = self.refuses and not fits
        return hlomem.FitPoint(
            n=n,
            label=label,
            fits=fits,
            needed_bytes=None if refused else needed,
            budget_bytes=self.budget,
            refused=refused,
            argument_bytes=None if refused else 0,
        )


CURVES = {
    "affine": lambda n: 1000 + 37 * n,
    "quadratic": lambda n: 5000 + n * n,
    "concave": lambda n: int(1000 + 4000 * n**0.5),
    "jumps": lambda n: 1000 + 20 * n + 3000 * (n // 300),
    "flat then steep": lambda n: 1000 if n < 500 else 1000 + 90 * (n - 500),
}


@pytest.mark.parametrize("refuses", [False, True], ids=["figures", "refusals"])
@pytest.mark.parametrize("name", list(CURVES))
def test_the_search_on_curves_of_every_shape(name: str, refuses: bool) -> None:
    """On monotone curves of every shape (no compile: a formula stands for
    XLA; with refusals, what does not fit has no figure), the search's
    answer is the brute force's, in far fewer compiles than the grid."""
    from hlomem._fit import _Search

    curve = CURVES[name]
    grid = tuple(range(8, 2049, 8))
    counts = []
    for budget in range(1500, 200_000, 1733):
        brute = [n for n in grid if curve(n) <= budget]
        if not brute:
            continue
        session = _Curve(curve, budget, refuses)
        search = _Search(session, lambda n: (jnp.zeros((n,)),), grid)
        search.run()
        fit = search.result(0.0)
        after = grid[len(brute)] if len(brute) < len(grid) else None
        assert (fit.value, fit.next_value) == (brute[-1], after), (name, budget)
        counts.append(fit.compiles)
    # A bisection of these 256 values takes 8 or 9 compiles.
    print(name, "refusals" if refuses else "figures", max(counts), sum(counts) / len(counts))
    assert max(counts) <= 18 and sum(counts) / len(counts) <= 11
