"""SVG charts of :func:`hlomem.largest_fit`'s curve and of
:func:`hlomem.compare_variants`' variants, self-contained (no script, no
network), as the HTML report draws its own: bytes per device, split into
arguments, outputs of their own and temporaries, with the budget line
and, for a curve, the boundary between the largest value that fits and
the next."""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._measure import FitPoint
from ._targets import gib

if TYPE_CHECKING:
    from ._fit import LargestFit
    from ._variants import VariantComparison

__all__ = ["curve_svg", "page", "variants_svg"]

# Colors of the parts (arguments, outputs, temporaries), the budget, the
# boundary, and a refusal.
_PARTS = (
    ("arguments", "#4e79a7"),
    ("outputs (own)", "#f28e2b"),
    ("temp and the rest", "#76b7b2"),
)
_BUDGET = "#d62728"
_FIT = "#2ca02c"
_REFUSED = "#d62728"
_INK = "#222"
_GRID = "#e3e3e3"
_FONT = 'font-family="-apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="12"'

_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B"))


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _nice_step(span: float, count: int = 5) -> float:
    """A round step (1, 2, 2.5 or 5 times a power of ten) for about
    ``count`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * power:
            return m * power
    return 10 * power


def _unit(top: float) -> tuple[int, str]:
    for size, name in _UNITS:
        if top >= size:
            return size, name
    return 1, "B"


def _number(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


class _Axes:
    """Pixel positions of data values inside the plot area."""

    def __init__(
        self, width: int, height: int, x0: float, x1: float, top_bytes: float, left: int = 78
    ):
        self.left, self.right, self.top, self.bottom = left, width - 24, 58, height - 46
        self.x0, self.x1 = x0, x1
        self.unit, self.unit_name = _unit(top_bytes)
        step = _nice_step(top_bytes / self.unit)
        self.y_step = step
        self.y_max = math.ceil(top_bytes / self.unit / step) * step * self.unit

    def x(self, v: float) -> float:
        if self.x1 == self.x0:
            return (self.left + self.right) / 2
        return self.left + (v - self.x0) / (self.x1 - self.x0) * (self.right - self.left)

    def y(self, b: float) -> float:
        return self.bottom - b / self.y_max * (self.bottom - self.top)

    def y_axis(self) -> list[str]:
        out = []
        ticks = round(self.y_max / self.unit / self.y_step)
        for k in range(ticks + 1):
            value = k * self.y_step
            y = self.y(value * self.unit)
            out.append(
                f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.right}" y2="{y:.1f}" '
                f'stroke="{_GRID}"/>'
            )
            out.append(
                f'<text x="{self.left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="{_INK}">'
                f"{_number(value)} {self.unit_name}</text>"
            )
        out.append(
            f'<line x1="{self.left}" y1="{self.bottom}" x2="{self.right}" y2="{self.bottom}" '
            f'stroke="{_INK}"/>'
        )
        return out

    def budget(self, budget: int | None, words: str, left: bool = False) -> list[str]:
        """The budget's dashed line, labelled at the right end (or the left)."""
        if not budget:
            return []
        y = self.y(budget)
        x, anchor = (self.left + 4, "start") if left else (self.right - 4, "end")
        label = f"budget {gib(budget)}" + (f" ({words})" if words else "")
        budget_line = (
            f'<g class="budget"><title>{_esc(label)}</title>'
            f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.right}" y2="{y:.1f}" '
            f'stroke="{_BUDGET}" stroke-width="1.5" stroke-dasharray="6 4"/>'
            f'<text x="{x}" y="{y - 5:.1f}" text-anchor="{anchor}" fill="{_BUDGET}">'
            f"budget {_esc(gib(budget))}</text></g>"
        )
        return [budget_line]


def _stack(p: FitPoint, x: float, w: float, axes: _Axes) -> list[str]:
    """One point's bar: arguments, outputs of their own, the rest."""
    parts = [p.argument_bytes or 0, p.outputs_not_aliased_bytes or 0, max(p.rest_bytes or 0, 0)]
    out = []
    base = 0
    for (name, color), size in zip(_PARTS, parts):
        if size <= 0:
            continue
        y1, y0 = axes.y(base + size), axes.y(base)
        out.append(
            f'<rect x="{x - w / 2:.1f}" y="{y1:.1f}" width="{w:.1f}" '
            f'height="{max(y0 - y1, 0.5):.1f}" fill="{color}"><title>{_esc(p.label)}: {name} '
            f"{_esc(gib(size))}</title></rect>"
        )
        base += size
    return out


def _legend(x: int, y: int, items: Sequence[tuple[str, str, str]]) -> list[str]:
    """Swatches: (label, color, kind: "box", "dash" or "hatch")."""
    out = []
    for label, color, kind in items:
        if kind == "dash":
            out.append(
                f'<line x1="{x}" y1="{y - 4}" x2="{x + 16}" y2="{y - 4}" stroke="{color}" '
                'stroke-width="1.5" stroke-dasharray="5 3"/>'
            )
        else:
            fill = "url(#refused)" if kind == "hatch" else color
            stroke = f' stroke="{color}"' if kind == "hatch" else ""
            out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{fill}"{stroke}/>')
        out.append(f'<text x="{x + 20}" y="{y}" fill="{_INK}">{_esc(label)}</text>')
        x += 28 + int(len(label) * 6.6)
    return out


_DEFS = (
    '<defs><pattern id="refused" width="6" height="6" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fbeaea"/>'
    f'<line x1="0" y1="0" x2="0" y2="6" stroke="{_REFUSED}" stroke-width="2"/></pattern></defs>'
)


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" {_FONT} role="img" aria-label="{_esc(title)}">'
        f"<title>{_esc(title)}</title>{_DEFS}"
        f'<rect width="{width}" height="{height}" fill="white"/>'
        f'<text x="12" y="20" font-size="14" font-weight="bold" fill="{_INK}">{_esc(title)}</text>'
        + "".join(body)
        + "</svg>"
    )


def curve_svg(fit: LargestFit, width: int = 760, height: int = 400) -> str:
    points = fit.points
    ns = [p.n for p in points if p.n is not None]
    lo, hi = min(ns), max(ns)
    pad = (hi - lo) * 0.04 or 1
    tops = [p.needed_bytes or 0 for p in points] + [p.at_least_bytes or 0 for p in points]
    top = max([*tops, fit.budget_bytes, 1]) * 1.06
    axes = _Axes(width, height, lo - pad, hi + pad, top)
    where = fit.target.name if fit.target is not None else "this device"
    answer = f"largest fit n={fit.value}" if fit.value is not None else "nothing fits"
    title = f"{fit.name} on {where}: {answer}"
    body = axes.y_axis()
    # x ticks
    step = _nice_step(hi - lo or 1, 6)
    first = math.ceil((lo - pad) / step) * step
    t = first
    while t <= hi + pad:
        x = axes.x(t)
        body.append(
            f'<line x1="{x:.1f}" y1="{axes.bottom}" x2="{x:.1f}" y2="{axes.bottom + 4}" '
            f'stroke="{_INK}"/><text x="{x:.1f}" y="{axes.bottom + 17}" text-anchor="middle" '
            f'fill="{_INK}">{_number(t)}</text>'
        )
        t += step
    body.append(
        f'<text x="{(axes.left + axes.right) / 2:.0f}" y="{height - 10}" text-anchor="middle" '
        f'fill="{_INK}">n (each bar a compile)</text>'
    )
    body.append(
        f'<text x="14" y="{(axes.top + axes.bottom) / 2:.0f}" text-anchor="middle" '
        f'fill="{_INK}" transform="rotate(-90 14 {(axes.top + axes.bottom) / 2:.0f})">'
        "bytes per device</text>"
    )
    # The boundary: a band between the largest fit and the next value.
    if fit.value is not None and fit.next_value is not None:
        xa, xb = axes.x(fit.value), axes.x(fit.next_value)
        body.append(
            f'<rect x="{xa:.1f}" y="{axes.top}" width="{max(xb - xa, 1):.1f}" '
            f'height="{axes.bottom - axes.top}" fill="{_FIT}" fill-opacity="0.12"/>'
        )
    if fit.value is not None:
        xa = axes.x(fit.value)
        anchor = "end" if xa > (axes.left + axes.right) / 2 else "start"
        dx = -4 if anchor == "end" else 4
        body.append(
            f'<g class="boundary"><line x1="{xa:.1f}" y1="{axes.top}" x2="{xa:.1f}" '
            f'y2="{axes.bottom}" stroke="{_FIT}" stroke-width="1.5"/>'
            f'<text x="{xa + dx:.1f}" y="{axes.top + 12}" text-anchor="{anchor}" fill="{_FIT}">'
            f"largest fit n={fit.value}</text></g>"
        )
    gaps = [b - a for a, b in itertools.pairwise(ns) if b > a]
    px = min((axes.x(lo + g) - axes.x(lo) for g in gaps), default=40.0)
    w = min(max(px * 0.6, 3.0), 22.0)
    line = []
    for p in points:
        assert p.n is not None
        x = axes.x(p.n)
        if p.refused:
            y = axes.y(p.at_least_bytes) if p.at_least_bytes else axes.top
            body.append(
                f'<g class="refused"><title>{_esc(p.label)}: {_esc(p.shown)}</title>'
                f'<rect x="{x - w / 2:.1f}" y="{y:.1f}" width="{w:.1f}" '
                f'height="{axes.bottom - y:.1f}" fill="url(#refused)" stroke="{_REFUSED}"/>'
                f'<text x="{x:.1f}" y="{y - 4:.1f}" text-anchor="middle" fill="{_REFUSED}">'
                "refused</text></g>"
            )
            continue
        assert p.needed_bytes is not None
        tip = f"{p.label}: needs {gib(p.needed_bytes)}, " + ("fits" if p.fits else "does not fit")
        body.append(f'<g class="point"><title>{_esc(tip)}</title>')
        body += _stack(p, x, w, axes)
        color = _FIT if p.fits else _REFUSED
        body.append(
            f'<circle cx="{x:.1f}" cy="{axes.y(p.needed_bytes):.1f}" r="3.5" fill="{color}" '
            f'stroke="white"/></g>'
        )
        line.append(f"{x:.1f},{axes.y(p.needed_bytes):.1f}")
    if len(line) > 1:
        body.append(
            f'<polyline points="{" ".join(line)}" fill="none" stroke="{_INK}" '
            'stroke-width="1" stroke-opacity="0.6"/>'
        )
    # The budget's label away from the boundary's.
    right_half = fit.value is not None and axes.x(fit.value) > (axes.left + axes.right) / 2
    body += axes.budget(fit.budget_bytes, fit.budget_from, left=right_half)
    legend = [(name, color, "box") for name, color in _PARTS]
    if any(p.refused for p in points):
        legend.append(("refused by the compiler", _REFUSED, "hatch"))
    legend.append(("budget", _BUDGET, "dash"))
    body += _legend(axes.left, 42, legend)
    return _svg(width, height, title, body)


def variants_svg(comparison: VariantComparison, width: int = 760, height: int = 400) -> str:
    rows = comparison.rows
    points = [r.point for r in rows]
    tops = [p.needed_bytes or p.at_least_bytes or 0 for p in points]
    top = max([*tops, comparison.budget_bytes or 0, 1]) * 1.1
    axes = _Axes(width, height, 0, len(rows), top)
    where = comparison.target.name if comparison.target is not None else "this device"
    title = f"{comparison.name} on {where}: {len(rows)} variants"
    body = axes.y_axis()
    slot = (axes.right - axes.left) / len(rows)
    w = min(slot * 0.5, 90)
    for i, (row, p) in enumerate(zip(rows, points)):
        x = axes.left + slot * (i + 0.5)
        body.append(
            f'<text x="{x:.1f}" y="{axes.bottom + 17}" text-anchor="middle" fill="{_INK}">'
            f"{_esc(row.name)}</text>"
        )
        if p.refused:
            y = axes.y(p.at_least_bytes) if p.at_least_bytes else axes.top
            body.append(
                f'<g class="refused"><title>{_esc(row.name)}: {_esc(p.shown)}</title>'
                f'<rect x="{x - w / 2:.1f}" y="{y:.1f}" width="{w:.1f}" '
                f'height="{axes.bottom - y:.1f}" fill="url(#refused)" stroke="{_REFUSED}"/>'
                f'<text x="{x:.1f}" y="{y - 5:.1f}" text-anchor="middle" fill="{_REFUSED}">'
                f"refused, {_esc(gib(p.at_least_bytes or 0))}+</text></g>"
            )
            continue
        assert p.needed_bytes is not None
        body.append(f'<g class="variant"><title>{_esc(row.name)}: {_esc(p.shown)}</title>')
        body += _stack(p, x, w, axes)
        body.append(
            f'<text x="{x:.1f}" y="{axes.y(p.needed_bytes) - 5:.1f}" text-anchor="middle" '
            f'fill="{_INK}">{_esc(gib(p.needed_bytes))}</text></g>'
        )
    body += axes.budget(comparison.budget_bytes, comparison.budget_from or "")
    legend = [(name, color, "box") for name, color in _PARTS]
    if comparison.budget_bytes:
        legend.append(("budget", _BUDGET, "dash"))
    body += _legend(axes.left, 42, legend)
    return _svg(width, height, title, body)


def page(summary: str, svg: str, table: str) -> str:
    """The chart between the summary and the table, as HTML (a notebook's
    display, or a page of its own)."""
    return (
        f'<div class="hlomem-fit"><pre style="white-space:pre-wrap">{_esc(summary)}</pre>{svg}'
        f'<pre style="font-size:12px">{_esc(table)}</pre></div>'
    )
