"""One compile of a function at one size, and what it needs there, as
:func:`hlomem.largest_fit` and :func:`hlomem.compare_variants` read it.

A :class:`FitPoint` holds XLA's figures for one compile: the device memory
the program needs (hlomem's analysis of the compiled module, checked
against XLA's own buffer assignment where a deviceless compile dumped it),
its split into arguments, outputs and temporaries and per memory space,
``memory_analysis()``, and the groups that hold the live peak.

The budget is :func:`hlomem.assert_fits`'s, reached by calling it (a
target's usable memory, a real accelerator's ``bytes_limit``, or the one
given). The figure compared with it, by the binary (``hlomem fits
--budget``), is XLA's own: the buffer assignment's total for the device's
memory from the compile's dump (deviceless compiles), else hlomem's
analysis of the module, which is what ``assert_fits`` decides on and
equals XLA's on CPU and GPU. Where
hlomem's analysis and XLA's dump disagree (hlomem's model of libtpu's
packing is not exact on every module), XLA's figure decides and the
search says so. A compiler's refusal for memory (libtpu checks HBM while
compiling) is a point that does not fit, with no figure but the refusal's
lower bound.

Compiles are cached in memory by (function, argument shapes, target,
options, JAX's settings, XLA's flags): :class:`CompileCache`.
"""

from __future__ import annotations

import os
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any

from ._binary import HlomemError
from ._targets import Target, TargetArg, gib, resolve_target

__all__ = ["CompileCache", "FitPoint", "Session"]

#: Groups of the live peak a point keeps.
PEAK_GROUPS = 3

# compiled.memory_analysis()'s fields a point keeps.
_MEMORY_FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "alias_size_in_bytes",
    "temp_size_in_bytes",
)

# compile_for's own keywords that largest_fit and compare_variants set themselves.
_RESERVED = ("progress", "keep_dump")


@dataclass(frozen=True)
class FitPoint:
    """One compile: what the program needs there, as XLA splits it.

    Figures are one device's bytes (an SPMD program's are per device).
    ``None`` where the compile gave none: a refused compile has only
    :attr:`at_least_bytes`.
    """

    #: The knob's value (:func:`hlomem.largest_fit`), or ``None`` (a variant).
    n: int | None
    #: ``"n=64"``, or the variant's name.
    label: str
    #: Whether :attr:`needed_bytes` is within the budget (``assert_fits``'s);
    #: ``None`` when there is no budget to compare with.
    fits: bool | None
    #: What decides: XLA's own buffer assignment total where the compile's
    #: dump gave it (:attr:`xla_bytes`), else hlomem's analysis of the
    #: module (what ``assert_fits`` compares, equal to XLA's on CPU and
    #: GPU); ``None`` when the compiler refused.
    needed_bytes: int | None
    #: The budget it was compared with, in bytes.
    budget_bytes: int | None
    #: The target's compiler refused the program for memory.
    refused: bool = False
    #: Refused: what the program needs at least (the compiler's figure, or
    #: the refused module's, the larger).
    at_least_bytes: int | None = None
    #: hlomem's figure for the device's memory (``hlomem check``'s, per device).
    hlomem_bytes: int | None = None
    #: XLA's own buffer assignment total for the device's memory, from the
    #: compile's dump (deviceless compiles; ``None`` for one in this process).
    xla_bytes: int | None = None
    #: hlomem's figure is XLA's to the byte (not when a TPU chip or libtpu
    #: release was assumed, libtpu's packing order could not be told, or a
    #: SparseCore offload's form is not known).
    exact: bool = True
    #: Why it is not (``Memory.device_estimates``' kinds: ``chip-assumed``,
    #: ``libtpu-assumed``, ``packing-order``, ``piece-order``, ``operands-at-update``).
    estimated_because: tuple[str, ...] = ()
    argument_bytes: int | None = None
    output_bytes: int | None = None
    #: Donated arguments reused as outputs (counted in both).
    alias_bytes: int | None = None
    temp_bytes: int | None = None
    #: The buffer assignment's "Total bytes used" (every memory space).
    total_bytes: int | None = None
    live_peak_bytes: int | None = None
    #: Each memory space's bytes, as XLA names the space (``default``, ``vmem``).
    by_space: dict[str, int] = field(default_factory=dict)
    #: ``compiled.memory_analysis()``: XLA's own fields, in bytes.
    memory_analysis: dict[str, int] | None = None
    #: What holds the live peak: (where, bytes), largest first, as
    #: ``assert_fits``'s message names them.
    peak: tuple[tuple[str, int], ...] = ()
    #: Finding codes of hlomem's analysis (``HM001``: an argument not donated...).
    findings: tuple[str, ...] = ()
    #: Seconds the compile took (and hlomem's reading of it).
    compile_seconds: float = 0.0
    #: Taken from the compile cache (no compile was made for it this time).
    cached: bool = False
    #: Read from a dump folder (:func:`hlomem.curve.curve_from_dumps`), not compiled here.
    dumped: bool = False
    #: Refused: the compiler's message; a compile that did not finish: its error.
    message: str | None = None
    #: The compiled program (a ``jax.stages.Compiled`` or a
    #: :class:`hlomem.DevicelessCompiled`); ``None`` when refused.
    compiled: Any = field(default=None, repr=False, compare=False)
    #: hlomem's analysis (for a refusal: of the module XLA wrote before refusing).
    report: Any = field(default=None, repr=False, compare=False)
    #: Refused: the :class:`hlomem.OutOfBudget` the compile raised.
    refusal: Any = field(default=None, repr=False, compare=False)
    # The budget as given when the decision was made (the cache's).
    budget_spec: Any = field(default=None, repr=False, compare=False)

    @property
    def outputs_not_aliased_bytes(self) -> int | None:
        """Outputs that take memory of their own (not a donated argument's)."""
        if self.output_bytes is None or self.alias_bytes is None:
            return None
        return self.output_bytes - self.alias_bytes

    @property
    def rest_bytes(self) -> int | None:
        """The device figure less arguments and outputs of their own:
        temporaries (and constants, and what else the device's memory holds)."""
        if self.needed_bytes is None or self.argument_bytes is None:
            return None
        return self.needed_bytes - self.argument_bytes - (self.outputs_not_aliased_bytes or 0)

    def to_json(self) -> dict[str, Any]:
        """The point as plain data (no compiled program or report)."""
        skip = {"compiled", "report", "refusal", "budget_spec"}
        data = {k: v for k, v in self.__dict__.items() if k not in skip}
        data["by_space"] = dict(self.by_space)
        data["peak"] = [{"where": w, "bytes": b} for w, b in self.peak]
        data["findings"] = list(self.findings)
        return data

    @property
    def shown(self) -> str:
        """What it needs, in words: ``"3.61MiB"``, ``"refused (at least 16.25GiB)"``."""
        if self.refused:
            least = f" (at least {gib(self.at_least_bytes)})" if self.at_least_bytes else ""
            return f"refused by the compiler{least}"
        return gib(self.needed_bytes) if self.needed_bytes is not None else "?"


class CompileCache:
    """Compiles already made, by (function, argument shapes and dtypes,
    target, options, JAX's settings, ``XLA_FLAGS``/``LIBTPU_INIT_ARGS``),
    least recently used dropped past ``maxsize``. :func:`hlomem.largest_fit`
    and :func:`hlomem.compare_variants` share one unless given another
    (``cache=hlomem.CompileCache()``) or ``cache=False``. A cached point
    keeps its compiled program (a large module's text): ``clear()`` frees them.
    """

    def __init__(self, maxsize: int = 64) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, not {maxsize}")
        self.maxsize = maxsize
        self._points: OrderedDict[Hashable, FitPoint] = OrderedDict()
        #: Points served from the cache, and compiles made, since made or cleared.
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> FitPoint | None:
        point = self._points.get(key)
        if point is None:
            self.misses += 1
            return None
        self._points.move_to_end(key)
        self.hits += 1
        return point

    def put(self, key: Hashable, point: FitPoint) -> None:
        self._points[key] = point
        self._points.move_to_end(key)
        while len(self._points) > self.maxsize:
            self._points.popitem(last=False)

    def clear(self) -> None:
        self._points.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._points)

    def __repr__(self) -> str:
        return f"CompileCache({len(self)} compiles, {self.hits} hits, {self.misses} misses)"


#: The cache largest_fit and compare_variants share by default.
DEFAULT_CACHE = CompileCache()


def pick_cache(cache: CompileCache | bool | None) -> CompileCache | None:
    if cache is True:
        return DEFAULT_CACHE
    if cache is False or cache is None:
        return None
    if isinstance(cache, CompileCache):
        return cache
    raise TypeError(f"cache is True, False or a hlomem.CompileCache, not {cache!r}")


def _freeze(x: Any) -> Hashable:
    """``x`` as a hashable key: containers by their items, the rest as is
    when hashable, else by type and repr."""
    if isinstance(x, dict):
        return ("dict", tuple(sorted(((repr(k), _freeze(v)) for k, v in x.items()))))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_freeze(v) for v in x))
    if isinstance(x, (set, frozenset)):
        return ("set", tuple(sorted(repr(v) for v in x)))
    try:
        hash(x)
    except TypeError:
        return ("repr", type(x).__qualname__, repr(x))
    return x  # type: ignore[no-any-return]


def args_key(args: Any) -> Hashable:
    """The arguments as a compile sees them: the tree's structure, each
    array's shape, dtype and sharding, and any other leaf (a static
    argument) itself."""
    import jax

    leaves, tree = jax.tree_util.tree_flatten(args)
    keyed: list[Hashable] = []
    for leaf in leaves:
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            sharding = getattr(leaf, "sharding", None)
            keyed.append(("array", tuple(leaf.shape), str(leaf.dtype), repr(sharding)))
        else:
            keyed.append(("leaf", _freeze(leaf)))
    return (tree, tuple(keyed))


def _fn_key(fn: Any) -> Hashable:
    try:
        hash(fn)
    except TypeError:
        return ("id", id(fn))
    return fn  # type: ignore[no-any-return]


def split_args(made: Any) -> tuple[Any, ...]:
    """``make_args(n)``'s result as positional arguments: a tuple or list is
    the arguments, anything else the one argument."""
    return tuple(made) if isinstance(made, (tuple, list)) else (made,)


def report_fields(report: Any) -> dict[str, Any]:
    """A :class:`FitPoint`'s fields that hlomem's report of its module gives:
    the bytes as XLA splits them, the peak's top groups, the findings, and
    the report (one place for ``Session`` and :mod:`hlomem.curve`)."""
    memory = report.memory
    return {
        "argument_bytes": memory.argument_bytes,
        "output_bytes": memory.output_bytes,
        "alias_bytes": memory.alias_bytes,
        "temp_bytes": memory.temp_bytes,
        "total_bytes": memory.total_bytes,
        "live_peak_bytes": memory.live_peak_bytes,
        "by_space": {s.name: s.bytes for s in memory.by_space},
        "estimated_because": tuple(
            dict.fromkeys(e.kind for e in getattr(memory, "device_estimates", None) or ())
        ),
        "peak": _peak(report),
        "findings": tuple(dict.fromkeys(f.code for f in report.findings)),
        "report": report,
    }


class Session:
    """Compiles ``fn`` for one target, measures each compile, and keeps
    count; prints progress on standard error unless ``progress`` is false."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        target: TargetArg | None,
        budget: str | int | None,
        options: dict[str, Any],
        progress: bool,
        cache: CompileCache | bool | None,
        need_budget: bool,
        caller: str,
    ) -> None:
        for name in _RESERVED:
            if name in options:
                raise TypeError(f"{caller} sets {name} itself; it is not a jit option")
        self.fn = fn
        self.name = getattr(fn, "__name__", type(fn).__name__)
        self.target: Target | None = resolve_target(target) if target is not None else None
        if self.target is None and "mesh" in options:
            raise TypeError(
                "mesh= is compile_for's (a target's devices); for a compile in this process give "
                "jax shardings in in_shardings/out_shardings, or give a target"
            )
        if self.target is not None:
            from ._deviceless import _require_backend

            _require_backend(self.target)
        self.budget = budget
        self.options = dict(options)
        self.progress = progress
        self.cache = pick_cache(cache)
        self.need_budget = need_budget
        self.caller = caller
        #: The budget in bytes, and where it came from, once the first compile said.
        self.budget_bytes: int | None = None
        self.budget_from: str | None = None
        self.compiles = 0
        self.cache_hits = 0
        self.compile_seconds = 0.0

    @property
    def where(self) -> str:
        """``tpu-v5e:2x2`` or ``this process's cpu``."""
        if self.target is not None:
            return self.target.name
        import jax

        return f"this process's {jax.default_backend()}"

    def say(self, text: str) -> None:
        if self.progress:
            lines = "\n".join(f"hlomem: {line.strip()}" for line in text.splitlines())
            print(lines, file=sys.stderr, flush=True)

    def key(self, fn: Any, args: tuple[Any, ...], options: dict[str, Any]) -> Hashable:
        from ._forward import config_to_send

        config, _ = config_to_send()
        env = tuple(
            os.environ.get(v, "")
            for v in ("XLA_FLAGS", "LIBTPU_INIT_ARGS", "XLA_PYTHON_CLIENT_MEM_FRACTION")
        )
        if self.target is not None:
            where: Hashable = self.target
        else:
            import jax

            where = ("here", jax.default_backend(), tuple(str(d) for d in jax.devices()))
        return (_fn_key(fn), args_key(args), where, _freeze(options), _freeze(config), env)

    def measure(
        self,
        args: tuple[Any, ...],
        *,
        n: int | None,
        label: str,
        fn: Callable[..., Any] | None = None,
        options: dict[str, Any] | None = None,
    ) -> FitPoint:
        """The point of one compile of ``fn`` (the session's unless given)
        with ``args`` and ``options`` (the session's unless given)."""
        fn = self.fn if fn is None else fn
        options = self.options if options is None else options
        key = self.key(fn, args, options) if self.cache is not None else None
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                self.cache_hits += 1
                if cached.budget_spec != _freeze(self.budget) or cached.fits is None:
                    # Compiled before, compared with another budget: compared again.
                    cached = replace(self._decide(cached), budget_spec=_freeze(self.budget))
                self._take_budget(cached)
                self.say(f"{label}: {self._words(cached)} (compiled before: from the cache)")
                return replace(cached, n=n, label=label, cached=True)
        self.compiles += 1
        self.say(f"{label}: compiling {self.name} for {self.where} (compile {self.compiles})...")
        started = time.monotonic()
        point = self._compile(fn, args, options, n=n, label=label)
        seconds = time.monotonic() - started
        point = replace(point, compile_seconds=seconds, budget_spec=_freeze(self.budget))
        self.compile_seconds += seconds
        self._take_budget(point)
        self.say(f"{label}: {self._words(point)} ({seconds:.0f} s)")
        if self.cache is not None:
            self.cache.put(key, point)
        return point

    def _take_budget(self, point: FitPoint) -> None:
        if self.budget_bytes is None and point.budget_bytes is not None:
            self.budget_bytes = point.budget_bytes
            self.budget_from = self._budget_words(point)

    def _budget_words(self, point: FitPoint) -> str:
        if self.budget is not None:
            return "the budget given"
        if self.target is not None:
            return self.target.share
        from . import _gate

        _, why = _gate.device_budget(point.compiled)
        return why

    def _words(self, point: FitPoint) -> str:
        if point.refused:
            return f"does not fit: {point.shown}"
        budget = f" of {gib(point.budget_bytes)}" if point.budget_bytes is not None else ""
        decision = {True: "fits", False: "does not fit", None: "compiled"}[point.fits]
        return f"{decision}: needs {point.shown}{budget}"

    def _compile(
        self, fn: Callable[..., Any], args: tuple[Any, ...], options: dict[str, Any], **name: Any
    ) -> FitPoint:
        from . import OutOfBudget

        if self.target is not None:
            from ._deviceless import BackendNotInstalled, compile_for
            from ._signature import SignatureMismatch

            try:
                compiled = compile_for(fn, *args, target=self.target, progress=False, **options)
            except OutOfBudget as e:
                if e.verdict is None:
                    raise
                return self._refused(e, **name)
            except (BackendNotInstalled, SignatureMismatch):
                raise
            except HlomemError as e:
                raise HlomemError(
                    f"{self.caller}: the compile of {self.name} at {name['label']} for "
                    f"{self.target.name} failed, not for memory:\n{e}",
                    e.returncode,
                ) from e
        else:
            import jax

            from ._deviceless import _is_out_of_memory

            lowered = jax.jit(fn, **options).lower(*args)  # the caller's errors are theirs
            try:
                compiled = lowered.compile()
            except Exception as e:  # a compiler's error, in its own words
                if _is_out_of_memory(str(e)):
                    return FitPoint(
                        refused=True,
                        fits=False,
                        needed_bytes=None,
                        budget_bytes=self.budget_bytes,
                        message=str(e),
                        **name,
                    )
                raise HlomemError(
                    f"{self.caller}: the compile of {self.name} at {name['label']} failed, not "
                    f"for memory; the compiler said:\n{e}"
                ) from e
        return self._read(compiled, **name)

    def _refused(self, error: Any, **name: Any) -> FitPoint:
        verdict = error.verdict
        report = error.report
        said = str(error).rsplit("The compiler said: ", 1)
        return FitPoint(
            fits=False,
            needed_bytes=None,
            budget_bytes=self._budget_bytes_of_target(),
            refused=True,
            at_least_bytes=verdict.deciding_bytes,
            peak=_peak(report),
            message=said[1].strip() if len(said) == 2 else str(error),
            report=report,
            refusal=error,
            **name,
        )

    def _budget_bytes_of_target(self) -> int | None:
        if self.budget_bytes is not None:
            return self.budget_bytes
        if self.budget is None and self.target is not None:
            return self.target.usable_bytes
        return None

    def _read(self, compiled: Any, **name: Any) -> FitPoint:
        from . import analyze
        from ._deviceless import DevicelessCompiled

        report = analyze(compiled)
        memory = report.memory
        xla = None
        if isinstance(compiled, DevicelessCompiled) and compiled.xla_totals is not None:
            xla = compiled.xla_totals.device_bytes
        try:
            ma = compiled.memory_analysis()
            analysis: dict[str, int] | None = {f: int(getattr(ma, f)) for f in _MEMORY_FIELDS}
        except Exception:  # noqa: BLE001 -- a compile that did not finish has none
            analysis = None
        point = FitPoint(
            fits=None,
            needed_bytes=xla if xla is not None else memory.device_bytes,
            budget_bytes=None,
            hlomem_bytes=memory.device_bytes,
            xla_bytes=xla,
            # As `hlomem check` says of the module: the device's space is XLA's to the byte.
            exact=all(s.exact for s in memory.by_space if s.color == 0),
            memory_analysis=analysis,
            message=getattr(compiled, "unfinished", None),
            compiled=compiled,
            **report_fields(report),
            **name,
        )
        return self._decide(point)

    def _decide(self, point: FitPoint) -> FitPoint:
        """``point`` with ``assert_fits``'s budget and the binary's decision
        (``hlomem fits --budget``): XLA's own figure within it where the
        dump gave one, else hlomem's."""
        from . import _budget_for
        from ._verdict import fits_within

        if point.refused:
            return replace(point, fits=False, budget_bytes=self._budget_bytes_of_target())
        budget, _, _ = _budget_for(point.compiled, self.budget)
        if budget is None:
            if self.need_budget:
                raise ValueError(
                    f"{self.caller} needs a budget for {self.name} compiled in this process "
                    f"on {self.where}: JAX knows no memory limit of its devices. Give one "
                    'device\'s memory, budget="16GiB" (or bytes), or a target '
                    '(target="tpu-v5e:2x2", "h100": compiled here, no device needed)'
                )
            return replace(point, fits=None, budget_bytes=None)
        assert point.hlomem_bytes is not None
        decided = fits_within(budget, needs=point.hlomem_bytes, xla_needs=point.xla_bytes)
        return replace(
            point,
            fits=bool(decided["fits"]),
            needed_bytes=int(decided["deciding_bytes"]),
            budget_bytes=int(decided["budget_bytes"]),
        )


def _peak(report: Any) -> tuple[tuple[str, int], ...]:
    """The groups that hold the live peak, by source line, as
    ``assert_fits``'s message names them."""
    if report is None:
        return ()
    from . import _gate

    groups = (report.to_json().get("peak") or {}).get("by_source") or []
    return tuple((_gate.place(g), int(g.get("bytes", 0))) for g in groups[:PEAK_GROUPS])
