"""The text tables of :func:`hlomem.largest_fit` (one row per compiled
value) and :func:`hlomem.compare_variants` (one column per variant)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._measure import FitPoint
from ._targets import gib

if TYPE_CHECKING:
    from ._fit import LargestFit
    from ._variants import VariantComparison

__all__ = ["curve_table", "variants_table"]


def _size(n: int | None) -> str:
    return "" if n is None else gib(n)


def _grid(rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    """Rows of cells as aligned columns (two spaces apart)."""
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if right[c] else cell.ljust(w)
            for c, (cell, w) in enumerate(zip(row, widths))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _spaces(points: Sequence[FitPoint]) -> list[str]:
    """Memory spaces worth a column: all, when some point has more than the
    device's (TPU: vmem, smem)."""
    names: dict[str, None] = {}
    for p in points:
        names.update(dict.fromkeys(p.by_space))
    return list(names) if len(names) > 1 else []


def curve_table(fit: LargestFit) -> str:
    points = fit.points
    spaces = _spaces(points)
    has_xla = any(p.xla_bytes is not None for p in points)
    head = ["n", "fits", "needs", "arguments", "outputs", "aliased", "temp"]
    head += [f"{s} space" for s in spaces]
    head += ["hlomem's figure"] if has_xla else []
    head += ["compile", ""]
    rows = [head]
    for p in points:
        if p.refused:
            row = [str(p.n), "no", p.shown] + [""] * (4 + len(spaces) + has_xla)
        else:
            row = [
                str(p.n),
                "yes" if p.fits else "no",
                _size(p.needed_bytes),
                _size(p.argument_bytes),
                _size(p.output_bytes),
                _size(p.alias_bytes),
                _size(p.temp_bytes),
            ]
            row += [_size(p.by_space.get(s)) for s in spaces]
            row += [_size(p.hlomem_bytes)] if has_xla else []
        row.append("dump" if p.dumped else "cache" if p.cached else f"{p.compile_seconds:.1f} s")
        mark = ""
        if p.n == fit.value:
            mark = "<- largest fit"
        elif p.n == fit.next_value:
            mark = "<- next: does not fit"
        row.append(mark)
        rows.append(row)
    right = [True, False] + [True] * (len(head) - 4) + [True, False]
    budget = f"budget: {gib(fit.budget_bytes)} per device ({fit.budget_from})"
    legend = (
        "needs: the device memory of XLA's buffer assignment of the compile (XLA's own figure\n"
        "  where its dump gave one, else hlomem's analysis, which equals it); arguments, outputs,\n"
        "  aliased (donated arguments reused as outputs, counted in both), temp: as the buffer\n"
        "  assignment splits them (compiled.memory_analysis()'s fields, off TPU)"
    )
    return f"{budget}\n{_grid(rows, right)}\n{legend}"


def variants_table(comparison: VariantComparison) -> str:
    rows_ = comparison.rows
    points = [r.point for r in rows_]
    base = points[0]
    spaces = _spaces(points)
    has_xla = any(p.xla_bytes is not None for p in points)
    has_analysis = any(p.memory_analysis is not None for p in points)
    table: list[list[str]] = [[""] + [r.name for r in rows_]]

    def line(label: str, cells: list[str]) -> None:
        table.append([label, *cells])

    if comparison.budget_bytes is not None:
        line(
            "fits",
            ["refused" if p.refused else ("yes" if p.fits else "no") for p in points],
        )
    line("needs", [p.shown if p.refused else _size(p.needed_bytes) for p in points])
    line(f"vs {rows_[0].name}", ["", *(_delta(p, base) for p in points[1:])])
    line("arguments", [_size(p.argument_bytes) for p in points])
    line("outputs", [_size(p.output_bytes) for p in points])
    line("aliased (donated)", [_size(p.alias_bytes) for p in points])
    line("temp", [_size(p.temp_bytes) for p in points])
    line("live peak", [_size(p.live_peak_bytes) for p in points])
    for s in spaces:
        line(f"{s} space", [_size(p.by_space.get(s)) for p in points])
    if has_xla:
        line("hlomem's figure", [_size(p.hlomem_bytes) for p in points])
    if has_analysis:
        for field, label in (
            ("argument_size_in_bytes", "XLA argument_size"),
            ("output_size_in_bytes", "XLA output_size"),
            ("alias_size_in_bytes", "XLA alias_size"),
            ("temp_size_in_bytes", "XLA temp_size"),
        ):
            line(label, [_size((p.memory_analysis or {}).get(field)) for p in points])
    line("findings", [" ".join(p.findings) or "-" for p in points])
    line("compile", ["cache" if p.cached else f"{p.compile_seconds:.1f} s" for p in points])
    right = [False] + [True] * len(rows_)
    text = _grid(table, right)
    peaks = ["what holds the live peak:"]
    for r in rows_:
        if not r.point.peak:
            continue
        peaks.append(f"  {r.name}:")
        width = max(len(gib(b)) for _, b in r.point.peak)
        peaks += [f"    {gib(b).rjust(width)}  {where}" for where, b in r.point.peak]
    return text + ("\n" + "\n".join(peaks) if len(peaks) > 1 else "")


def _delta(p: FitPoint, base: FitPoint) -> str:
    if p.needed_bytes is None or base.needed_bytes is None:
        return ""
    d = p.needed_bytes - base.needed_bytes
    if d == 0:
        return "same"
    return ("saves " if d < 0 else "costs ") + gib(abs(d))
