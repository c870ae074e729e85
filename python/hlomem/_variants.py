"""Variants of one step side by side: :func:`compare_variants` compiles each
(donated or not, bf16 parameters, rematerialization...) for one target and
shows XLA's figures and what holds each one's peak next to each other."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._measure import CompileCache, FitPoint, Session
from ._targets import Target, TargetArg, gib

__all__ = ["Variant", "VariantComparison", "compare_variants"]

# A variant's keys that are not jit options.
_OWN_KEYS = ("fn", "args")


@dataclass(frozen=True)
class Variant:
    """One variant: its name, the options it was compiled with, and its point."""

    name: str
    #: The compile options (jit keywords, ``mesh``...) it was compiled with.
    options: dict[str, Any]
    #: Its compile: XLA's figures, the peak's groups, the decision.
    point: FitPoint
    #: Whether it replaced the function or the arguments.
    own_fn: bool = False
    own_args: bool = False


@dataclass(frozen=True)
class VariantComparison:
    """:func:`compare_variants`' result: a :class:`Variant` per name, in the
    order given (index by name or position, iterate). ``str()`` is a
    table with a column per variant; a notebook shows the chart too."""

    name: str
    target: Target | None
    #: The budget compared with (``assert_fits``'s), or ``None`` when there is none.
    budget_bytes: int | None
    budget_from: str | None
    rows: tuple[Variant, ...]
    compiles: int
    cache_hits: int
    compile_seconds: float
    seconds: float

    def __iter__(self) -> Iterator[Variant]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: int | str) -> Variant:
        if isinstance(key, int):
            return self.rows[key]
        for row in self.rows:
            if row.name == key:
                return row
        raise KeyError(f"no variant {key!r} (variants: {', '.join(r.name for r in self.rows)})")

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.rows]

    @property
    def smallest(self) -> Variant:
        """The variant that needs least (a refused one last)."""
        return min(self.rows, key=lambda r: (r.point.needed_bytes is None, r.point.needed_bytes))

    def saving(self, name: str, against: str | None = None) -> int | None:
        """Bytes ``name`` needs less than ``against`` (the first variant by
        default); negative when it needs more, ``None`` when one was refused."""
        base = self[against if against is not None else self.rows[0].name].point
        this = self[name].point
        if base.needed_bytes is None or this.needed_bytes is None:
            return None
        return base.needed_bytes - this.needed_bytes

    @property
    def headline(self) -> str:
        where = self.target.name if self.target is not None else "this device"
        budget = (
            f", budget {gib(self.budget_bytes)} ({self.budget_from})"
            if self.budget_bytes is not None
            else ""
        )
        best = self.smallest
        return (
            f"{self.name} on {where}, {len(self)} variants{budget}: {best.name} needs least "
            f"({best.point.shown}); {self.compiles} compile{'s' * (self.compiles != 1)} in "
            f"{self.compile_seconds:.0f} s"
            + (f", {self.cache_hits} from the cache" if self.cache_hits else "")
        )

    def table(self) -> str:
        from ._table import variants_table

        return variants_table(self)

    def svg(self, width: int = 760, height: int = 400) -> str:
        from ._chart import variants_svg

        return variants_svg(self, width=width, height=height)

    def html(self) -> str:
        from ._chart import page

        return page(self.headline, self.svg(), self.table())

    def _repr_html_(self) -> str:
        return self.html()

    def __str__(self) -> str:
        return f"{self.headline}\n{self.table()}"


def compare_variants(
    fn: Callable[..., Any],
    args: Sequence[Any],
    variants: Mapping[str, Mapping[str, Any]],
    *,
    target: TargetArg | None = None,
    budget: str | int | None = None,
    progress: bool = True,
    cache: CompileCache | bool = True,
    **common: Any,
) -> VariantComparison:
    """Compiles ``fn(*args)`` once per variant for ``target`` and shows
    XLA's figures side by side, so that one sees what each change buys
    before touching a device::

        hlomem.compare_variants(step, (params, opt_state, batch), target="tpu-v5e:2x2",
            variants={"as is": {}, "donate": {"donate_argnums": (0, 1)},
                      "bf16 params": {"args": (params_bf16, opt_state, batch)},
                      "remat": {"fn": step_with_checkpoint}})

    Each variant is a dict of compile options (``jax.jit`` keywords and
    :func:`hlomem.compile_for`'s ``mesh``, ``in_shardings``...), laid over
    ``common`` (keywords given to this function for every variant); the keys
    ``"fn"`` and ``"args"`` replace the function or the arguments (a tuple)
    for that variant. ``target`` is :func:`hlomem.compile_for`'s, or ``None``
    to compile in this process. With a budget (a target's, a real
    accelerator's, or ``budget=``; :func:`hlomem.assert_fits`'s) each
    variant also says whether it fits. A variant the compiler refuses for
    memory is shown as refused (what it needs at least); a compile that
    fails for another reason raises :class:`hlomem.HlomemError` with the
    compiler's message.
    """
    started = time.monotonic()
    if not isinstance(variants, Mapping) or not variants:
        raise TypeError(
            'variants is a dict of name -> options, e.g. {"as is": {}, '
            '"donate": {"donate_argnums": 0}}'
        )
    if not isinstance(args, (tuple, list)):
        raise TypeError(
            f"args is a tuple of fn's arguments, not {type(args).__name__} (one argument: (x,))"
        )
    session = Session(
        fn,
        target=target,
        budget=budget,
        options=common,
        progress=progress,
        cache=cache,
        need_budget=False,
        caller="compare_variants",
    )
    session.say(
        f"compare_variants: {session.name} on {session.where}, {len(variants)} variants: "
        + ", ".join(variants)
    )
    rows = []
    for name, spec in variants.items():
        if not isinstance(spec, Mapping):
            raise TypeError(f"variant {name!r} is a dict of options, not {type(spec).__name__}")
        options = {**common, **{k: v for k, v in spec.items() if k not in _OWN_KEYS}}
        variant_fn = spec.get("fn", fn)
        variant_args = spec.get("args", args)
        if not isinstance(variant_args, (tuple, list)):
            raise TypeError(f"variant {name!r}: args is a tuple of arguments")
        point = session.measure(
            tuple(variant_args), n=None, label=str(name), fn=variant_fn, options=options
        )
        rows.append(Variant(str(name), options, point, "fn" in spec, "args" in spec))
    comparison = VariantComparison(
        name=session.name,
        target=session.target,
        budget_bytes=session.budget_bytes,
        budget_from=session.budget_from,
        rows=tuple(rows),
        compiles=session.compiles,
        cache_hits=session.cache_hits,
        compile_seconds=session.compile_seconds,
        seconds=time.monotonic() - started,
    )
    session.say(comparison.headline)
    return comparison
