"""The largest value of a knob (batch, sequence length, layers...) whose
compile fits a device: :func:`largest_fit`, from a handful of compiles.

The search. Memory is close to affine in a batch-like knob, but not
exactly: fusion, layouts and rematerialization change the slope. So:

1. compile the grid's smallest value (it must fit: else :class:`NothingFits`)
   and a second one (the first grid value at 4x the smallest, or the last);
2. draw the line through the two latest compiled points (a secant) and
   take the largest grid value it puts within the budget; if that falls
   outside what is still open, take the line between the nearest points on
   each side of the budget instead, each side's excess halved each time the
   other side moved twice in a row (the Illinois rule: regula falsi alone
   creeps toward the boundary from one side on a curved line);
3. check it: compile that value, and when it fits, the next grid value
   (the search ends when a value that fits sits next to one that does
   not, or that the compiler refused, both compiled);
4. each new point draws a better line (back to 2); when three compiles in
   a row have not halved the values still open between a value that fits
   and one that does not (or four in a row fit with none known above), or
   the line puts within the budget a value known not to fit (a refused
   compile has no figure to draw a line through), a bisection follows, so
   the search ends within a few times the compiles of a bisection.

On a smooth curve that is four to six compiles: two to predict, the rest
to check. Memory is assumed to grow with the knob; a compile that says
otherwise is reported in the result's notes.

Every value reported was compiled and checked: the answer fits the budget,
the next grid value does not. The figure is XLA's (see ``_measure.py``).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

from ._measure import CompileCache, FitPoint, Session, args_key, split_args
from ._targets import Target, TargetArg, gib

__all__ = ["LargestFit", "NothingFits", "largest_fit"]


#: Why hlomem's figure for a module is an estimate, by
#: ``Memory.device_estimates`` kind.
_WHY_ABOUT = {
    "chip-assumed": "the TPU chip was assumed (tuple tables differ by chip)",
    "libtpu-assumed": "the libtpu release was assumed (0.0.42 and 0.0.52 pack HBM differently)",
    "packing-order": "libtpu's packing order of HBM could not be told from the text",
    "operands-at-update": "libtpu's SparseCore offload form (operands at an async-update) is not known",
    "piece-order": "libtpu's order of the HBM scratch block's pieces is not known",
}


def about_note(points: Sequence[FitPoint]) -> str | None:
    """Which points' hlomem figures are estimates, and why: the analysis's
    own reasons (``Memory.device_estimates``), in a few words each (the
    CLI's text gives them whole)."""
    about = [p for p in points if not p.exact]
    if not about:
        return None
    kinds = dict.fromkeys(k for p in about for k in p.estimated_because)
    why = "; ".join(_WHY_ABOUT.get(k, k) for k in kinds) or "hlomem marks them estimates"
    return f"hlomem's figures are about at {len(about)} of the {len(points)} points: {why}"


@dataclass(frozen=True)
class LargestFit:
    """What :func:`largest_fit` found: the answer and the curve it was read from.

    ``str()`` is the answer in words and the table of every compiled point;
    in a notebook it shows the chart (:meth:`svg`) and the table.
    """

    #: The function's name.
    name: str
    #: The target compiled for, or ``None`` (this process's device).
    target: Target | None
    #: The budget every point was compared with (``assert_fits``'s), in bytes.
    budget_bytes: int
    #: Where the budget came from, in words.
    budget_from: str
    #: The grid searched, sorted.
    grid: tuple[int, ...]
    #: Every compiled point, by ``n``: the curve.
    points: tuple[FitPoint, ...]
    #: The largest grid value that fits (compiled), or ``None``.
    value: int | None
    #: The grid value after it, compiled and found not to fit (or refused);
    #: ``None`` when ``value`` is the grid's last.
    next_value: int | None
    #: Compiles made by this search (points taken from the cache not counted).
    compiles: int
    #: Points taken from the compile cache.
    cache_hits: int
    #: Seconds the compiles took (hlomem's reading of each included).
    compile_seconds: float
    #: Seconds the whole search took.
    seconds: float
    #: How the search went, one line per step.
    steps: tuple[str, ...] = ()
    #: Caveats: a curve that is not monotone, figures hlomem had to guess.
    notes: tuple[str, ...] = ()

    def point(self, n: int) -> FitPoint:
        """The compiled point at ``n`` (``KeyError`` if ``n`` was not compiled)."""
        for p in self.points:
            if p.n == n:
                return p
        raise KeyError(f"n={n} was not compiled (compiled: {[p.n for p in self.points]})")

    @property
    def needed_bytes(self) -> int | None:
        """What the program needs at :attr:`value` (XLA's figure, per device)."""
        return self.point(self.value).needed_bytes if self.value is not None else None

    @property
    def next_needed_bytes(self) -> int | None:
        """What it needs at :attr:`next_value`; ``None`` when the compiler refused it."""
        return self.point(self.next_value).needed_bytes if self.next_value is not None else None

    @property
    def next_refused(self) -> bool:
        """The compiler refused :attr:`next_value` (TPU: libtpu checks HBM while compiling)."""
        return self.next_value is not None and self.point(self.next_value).refused

    @property
    def compiled(self) -> Any:
        """The compiled program at :attr:`value` (for ``assert_fits``, ``analyze``)."""
        return self.point(self.value).compiled if self.value is not None else None

    @property
    def grid_size(self) -> int:
        """How many values the grid has: the compiles a brute force makes."""
        return len(self.grid)

    @property
    def curve(self) -> list[dict[str, Any]]:
        """The curve as data: one dict per compiled point (``FitPoint.to_json``)."""
        return [p.to_json() for p in self.points]

    @property
    def headline(self) -> str:
        """The answer in one line."""
        where = self.target.name if self.target is not None else "this device"
        budget = f"{gib(self.budget_bytes)} ({self.budget_from})"
        if self.value is None:
            return f"{self.name} on {where}: no value of the grid fits {budget}"
        at = f"n={self.value} needs {gib(self.needed_bytes)}"
        if self.next_value is None:
            return (
                f"{self.name} on {where}: every value of the grid fits {budget}; the largest, {at}"
            )
        nxt = self.point(self.next_value)
        after = f"n={self.next_value} does not fit: " + (
            nxt.shown if nxt.refused else f"needs {nxt.shown}"
        )
        return f"{self.name} on {where}: largest fit n={self.value} of {budget}: {at}; {after}"

    def summary(self) -> str:
        """The answer, the search's cost, and the notes."""
        lines = [self.headline]
        if any(p.dumped for p in self.points):
            lines.append(f"  read from {len(self.points)} dump folders: no compile")
            lines += [f"  note: {note}" for note in self.notes]
            return "\n".join(lines)
        lines.append(
            f"  {self.compiles} compile{'s' * (self.compiles != 1)} in "
            f"{self.compile_seconds:.0f} s"
            + (f", {self.cache_hits} from the cache" if self.cache_hits else "")
            + f" (a brute force over the grid compiles {self.grid_size} values)"
        )
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    def table(self) -> str:
        """Every compiled point, one row each, as XLA splits the memory."""
        from ._table import curve_table

        return curve_table(self)

    def svg(self, width: int = 760, height: int = 400) -> str:
        """The curve as an SVG chart: bytes needed against ``n``, split into
        arguments, outputs and temporaries, with the budget and the boundary."""
        from ._chart import curve_svg

        return curve_svg(self, width=width, height=height)

    def save_svg(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg())

    def html(self) -> str:
        """The chart and the table, for a notebook or a page."""
        from ._chart import page

        return page(self.summary(), self.svg(), self.table())

    def _repr_html_(self) -> str:
        return self.html()

    def __str__(self) -> str:
        return f"{self.summary()}\n\n{self.table()}"


class NothingFits(AssertionError):
    """Even the grid's smallest value does not fit: the message says what
    it needs there and what holds its peak. :attr:`fit` is the search's
    result (``value`` ``None``), :attr:`point` the smallest value's point.
    An ``AssertionError``, as :class:`hlomem.OutOfBudget` is."""

    def __init__(self, message: str, fit: LargestFit, point: FitPoint) -> None:
        super().__init__(message)
        self.fit = fit
        self.point = point


def _grid(grid: Iterable[int]) -> tuple[int, ...]:
    values = list(grid)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, Integral):
            raise TypeError(f"the grid holds integers (knob values), not {v!r}")
    if not values:
        raise ValueError("the grid is empty: give the values to try, e.g. range(8, 4097, 8)")
    return tuple(sorted({int(v) for v in values}))


def largest_fit(
    fn: Callable[..., Any],
    make_args: Callable[[int], Any],
    *,
    target: TargetArg | None = None,
    grid: Iterable[int] = range(8, 4097, 8),
    budget: str | int | None = None,
    progress: bool = True,
    cache: CompileCache | bool = True,
    **jit_options: Any,
) -> LargestFit:
    """The largest ``n`` of ``grid`` whose compile of ``fn(*make_args(n))``
    fits one device of ``target``, from a handful of compiles.

    ``make_args(n)`` returns ``fn``'s arguments for the knob value ``n``
    (a tuple of them, or the one argument): ``jax.ShapeDtypeStruct``s or
    arrays, only their shapes and dtypes are used. ``n`` is anything whose
    growth grows memory: a batch, a sequence length, a number of layers.
    With a mesh and shardings the figures are per device, so the knob is
    whatever ``make_args`` makes of it (a global batch sharded 4 ways holds
    ``n / 4`` per device).

    ``target`` is what :func:`hlomem.compile_for` takes (``"tpu-v5e:2x2"``,
    ``"h100"``...: compiled in a child process, no device needed), or
    ``None`` to compile in this process for JAX's default device. The
    budget is :func:`hlomem.assert_fits`'s for the same program, which
    makes the decision: the target's usable memory, a real accelerator's
    ``bytes_limit``, or ``budget`` (``"16GiB"`` or bytes; a CPU needs one).
    Other keywords (``donate_argnums``, ``mesh``, ``in_shardings``,
    ``static_argnums``...) go to :func:`hlomem.compile_for` or ``jax.jit``.

    Returns a :class:`LargestFit`: ``.value`` (compiled, fits),
    ``.next_value`` (the next grid value, compiled: does not fit, or the
    compiler refused it; ``None`` when ``.value`` is the grid's last),
    ``.needed_bytes``, ``.next_needed_bytes`` (``None`` if refused),
    ``.budget_bytes``, ``.compiles``, ``.compile_seconds``, ``.points`` (the
    curve: every compiled value, split as XLA splits it), ``.table()``,
    ``.svg()``. Progress goes to standard error unless ``progress=False``.
    Compiles are cached (``cache``): searching again with another budget
    or grid reuses them.

    Raises :class:`NothingFits` when even the grid's smallest value does
    not fit (its message says what holds the peak there); ``ValueError``
    when ``make_args`` gives the same arguments for two values of the grid;
    :class:`hlomem.HlomemError` with the compiler's message when a compile
    fails for another reason than memory.
    """
    started = time.monotonic()
    values = _grid(grid)
    session = Session(
        fn,
        target=target,
        budget=budget,
        options=jit_options,
        progress=progress,
        cache=cache,
        need_budget=True,
        caller="largest_fit",
    )
    search = _Search(session, make_args, values)
    search.run()
    return search.result(time.monotonic() - started)


class _Search:
    def __init__(self, session: Session, make_args: Callable[[int], Any], grid: tuple[int, ...]):
        self.session = session
        self.make_args = make_args
        self.grid = grid
        self.points: dict[int, FitPoint] = {}  # grid index -> point
        self.steps: list[str] = []
        self.notes: list[str] = []
        self.lo = 0  # largest index known to fit
        self.hi: int | None = None  # smallest index known not to fit
        # Illinois: when one side keeps moving, the other side's point
        # weighs half as much in the line each time (regula falsi would
        # otherwise creep toward the boundary from one side).
        self.moved: str | None = None
        self.order: list[int] = []  # grid indices, in the order compiled
        self.weight = {"lo": 1.0, "hi": 1.0}

    def log(self, text: str) -> None:
        self.steps.append(text)
        self.session.say(text)

    def args(self, i: int) -> tuple[Any, ...]:
        return split_args(self.make_args(self.grid[i]))

    def get(self, i: int) -> FitPoint:
        if i not in self.points:
            n = self.grid[i]
            point = self.session.measure(self.args(i), n=n, label=f"n={n}")
            self.points[i] = point
            self.order.append(i)
            if point.fits:
                if self.hi is not None and i > self.hi:
                    self.notes.append(
                        f"memory is not monotone in n: n={n} fits above "
                        f"n={self.grid[self.hi]}, which does not; the answer is the first "
                        "boundary found"
                    )
                elif i > self.lo:
                    self.lo = i
                    self._moved("lo")
            elif i < self.lo:
                self.notes.append(
                    f"memory is not monotone in n: n={n} does not fit below "
                    f"n={self.grid[self.lo]}, which does"
                )
            elif self.hi is None or i < self.hi:
                self.hi = i
                self._moved("hi")
        return self.points[i]

    def _moved(self, side: str) -> None:
        other = "hi" if side == "lo" else "lo"
        self.weight[side] = 1.0
        if self.moved == side:
            self.weight[other] /= 2
        else:
            self.weight[other] = 1.0
        self.moved = side

    def run(self) -> None:
        session, grid = self.session, self.grid
        span = (
            f"n in {grid[0]}..{grid[-1]} ({len(grid)} values)" if len(grid) > 1 else f"n={grid[0]}"
        )
        budget = session.budget
        if isinstance(budget, int):
            budget = gib(budget)
        budget = "" if budget is None else f", budget {budget}"
        session.say(f"largest_fit: {session.name} on {session.where}, {span}{budget}")
        second = self._second_index()
        if second is not None:
            self._check_knob(second)
        first = self.get(0)
        if not first.fits:
            return
        if second is None:
            return
        self.get(second)
        # With both sides known: compiles since what is still open last
        # halved; past 3, a bisection. With none above yet: compiles in a
        # row that fit; past 4, a bisection toward the grid's end.
        stale, mark, rising = 0, self._open_width(), 0
        while not self._done():
            guess = None if stale >= 3 or rising >= 4 else self._predict()
            if guess is not None and self.hi is not None and guess >= self.hi:
                # The line puts within the budget a value that does not fit
                # (the compiler refused it: no figure to draw a line with).
                self.log(f"the line is wrong there: n={grid[self.hi]} does not fit")
                guess = None
            if guess is None:
                i = self._midpoint()
                self.log(
                    f"bisecting: n={grid[i]}, between n={grid[self.lo]} and "
                    + (f"n={grid[self.hi]}" if self.hi is not None else "the grid's end")
                )
            else:
                i = self._check(guess)
            above = self.hi
            self.get(i)
            width = self._open_width()
            if guess is None or width <= mark / 2 or above is None:
                stale, mark = 0, width
            else:
                stale += 1
            rising = rising + 1 if guess is not None and self.hi is None else 0

    def _done(self) -> bool:
        if self.hi is not None:
            return self.hi == self.lo + 1
        return self.lo == len(self.grid) - 1

    def _open_width(self) -> int:
        """How many grid values are still unknown between the two sides."""
        top = self.hi if self.hi is not None else len(self.grid)
        return top - self.lo - 1

    def _midpoint(self) -> int:
        top = self.hi if self.hi is not None else len(self.grid) - 1
        if self.hi is None:
            return top if top - self.lo <= 1 else (self.lo + top + 1) // 2
        return (self.lo + top) // 2

    def _second_index(self) -> int | None:
        grid = self.grid
        if len(grid) == 1:
            return None
        if grid[0] > 0:
            i = bisect.bisect_left(grid, 4 * grid[0])
            return max(1, min(i, len(grid) - 1))
        return 1

    def _check_knob(self, second: int) -> None:
        """``make_args`` must make different arguments for different values."""
        a, b = self.grid[0], self.grid[second]
        if args_key(self.args(0)) == args_key(self.args(second)):
            raise ValueError(
                f"make_args gives the same arguments for n={a} and n={b} (the same shapes, "
                "dtypes and other values): the knob must change what is compiled, e.g. "
                "make_args = lambda n: (params, jax.ShapeDtypeStruct((n, 1024), jnp.float32))"
            )

    def _line(self) -> tuple[FitPoint, FitPoint] | None:
        """The two measured points the prediction draws its line through."""
        fitting = [p for i, p in sorted(self.points.items()) if p.fits and i <= self.lo]
        over = [
            p
            for i, p in sorted(self.points.items())
            if not p.fits and not p.refused and p.needed_bytes is not None and i > self.lo
        ]
        if fitting and over:
            return fitting[-1], over[0]
        if len(fitting) >= 2:
            return fitting[-2], fitting[-1]
        return None

    def _predict(self) -> int | None:
        """The largest grid index a line puts within the budget, or ``None``:
        the line through the two latest points when it lands between the
        sides, else the bracket's (weighted) line."""
        latest = [self.points[i] for i in self.order if self.points[i].needed_bytes is not None][
            -2:
        ]
        top = self.hi if self.hi is not None else len(self.grid)
        crossed = None
        if len(latest) == 2:
            crossed = self._cross(*sorted(latest, key=lambda p: p.n or 0), weighted=False)
            if crossed is not None and not self.lo <= crossed[0] < top:
                crossed = None
        if crossed is None:
            line = self._line()
            if line is not None:
                crossed = self._cross(*line, weighted=True)
        if crossed is None:
            return None
        guess, text = crossed
        self.log(text)
        return guess

    def _cross(self, a: FitPoint, b: FitPoint, *, weighted: bool) -> tuple[int, str] | None:
        """The largest grid index the line through ``a`` and ``b`` puts
        within the budget, and the line in words; ``None`` if it does not rise."""
        from ._gate import human_bytes

        budget = self.session.budget_bytes
        assert a.n is not None and b.n is not None
        assert a.needed_bytes is not None and b.needed_bytes is not None
        if budget is None or b.n == a.n:
            return None
        slope = (b.needed_bytes - a.needed_bytes) / (b.n - a.n)
        if slope <= 0:
            self.log(
                f"memory does not grow from n={a.n} to n={b.n} "
                f"({gib(a.needed_bytes)}, {gib(b.needed_bytes)}): no line to follow"
            )
            return None
        start = a.needed_bytes
        if weighted and a.fits and not b.fits:
            # Across the boundary: each side's excess over the budget, weighted.
            under = (a.needed_bytes - budget) * self.weight["lo"]
            over = (b.needed_bytes - budget) * self.weight["hi"]
            slope, start = (over - under) / (b.n - a.n), budget + under
        crossing = a.n + (budget - start) / slope
        text = (
            f"the line through n={a.n} and n={b.n} ({human_bytes(int(slope))} per unit of n) "
            f"reaches the budget at n={crossing:.1f}"
        )
        return bisect.bisect_right(self.grid, crossing) - 1, text

    def _check(self, guess: int) -> int:
        """The compile that checks a prediction: the value it puts last
        within the budget, or, when that one is known to fit, the next."""
        grid = self.grid
        top = self.hi if self.hi is not None else len(grid)
        if guess <= self.lo:
            i = self.lo + 1
            self.log(f"checking n={grid[i]}, the value after n={grid[self.lo]}, which fits")
        else:
            i = min(guess, top - 1)
            self.log(f"checking n={grid[i]}")
        return i

    def result(self, seconds: float) -> LargestFit:
        session = self.session
        first = self.points[0]
        value = next_value = None
        if first.fits:
            value = self.grid[self.lo]
            next_value = self.grid[self.hi] if self.hi is not None else None
        points = tuple(p for _, p in sorted(self.points.items()))
        about = about_note(points)
        if about is not None:
            self.notes.append(about)
        differ = [p for p in points if p.xla_bytes is not None and p.xla_bytes != p.hlomem_bytes]
        if differ:
            p = differ[-1]
            assert p.hlomem_bytes is not None and p.xla_bytes is not None
            self.notes.append(
                f"hlomem's analysis and XLA's buffer assignment differ at {len(differ)} of the "
                f"{len(points)} points (n={p.n}: hlomem {gib(p.hlomem_bytes)}, XLA "
                f"{gib(p.xla_bytes)}); XLA's figure decides here, as in hlomem.fits, while "
                "assert_fits with a budget given compares hlomem's"
            )
        budget = session.budget_bytes
        fit = LargestFit(
            name=session.name,
            target=session.target,
            budget_bytes=budget if budget is not None else 0,
            budget_from=session.budget_from or "",
            grid=self.grid,
            points=points,
            value=value,
            next_value=next_value,
            compiles=session.compiles,
            cache_hits=session.cache_hits,
            compile_seconds=session.compile_seconds,
            seconds=seconds,
            steps=tuple(self.steps),
            notes=tuple(dict.fromkeys(self.notes)),
        )
        if value is None:
            raise NothingFits(_nothing_fits(fit, first), fit, first)
        session.say(
            f"done: largest fit n={value}, {fit.compiles} compile{'s' * (fit.compiles != 1)} "
            f"in {fit.compile_seconds:.0f} s"
            + (f", {fit.cache_hits} from the cache" if fit.cache_hits else "")
        )
        return fit


def _nothing_fits(fit: LargestFit, first: FitPoint) -> str:
    from . import _gate

    where = fit.target.name if fit.target is not None else "this device"
    head = (
        f"largest_fit: even n={first.n}, the grid's smallest value, does not fit {fit.name} on "
        f"{where}: "
    )
    if first.refused:
        least = f" at least {gib(first.at_least_bytes)}" if first.at_least_bytes else ""
        budget = (
            f"{gib(fit.budget_bytes)} ({fit.budget_from})" if fit.budget_bytes else "the one given"
        )
        head += f"its compiler refused it, it needs{least}; the budget is {budget}"
    else:
        assert first.needed_bytes is not None
        head += (
            f"needs {gib(first.needed_bytes)}, the budget is {gib(fit.budget_bytes)} "
            f"({fit.budget_from}), over by {gib(first.needed_bytes - fit.budget_bytes)}"
        )
    lines = [head]
    lines += _gate.peak_lines(first.report)
    if first.refused and first.message:
        lines.append(f"The compiler said: {first.message}")
    return "\n".join(lines)


def brute_force(
    fn: Callable[..., Any],
    make_args: Callable[[int], Any],
    grid: Sequence[int],
    *,
    target: TargetArg | None = None,
    budget: str | int | None = None,
    progress: bool = False,
    cache: CompileCache | bool = True,
    **jit_options: Any,
) -> list[FitPoint]:
    """Every grid value compiled, as :func:`largest_fit` compiles one (for
    tests, and to see what the search avoids)."""
    session = Session(
        fn,
        target=target,
        budget=budget,
        options=jit_options,
        progress=progress,
        cache=cache,
        need_budget=True,
        caller="brute_force",
    )
    return [session.measure(split_args(make_args(n)), n=n, label=f"n={n}") for n in grid]
