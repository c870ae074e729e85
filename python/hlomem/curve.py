"""The curve of :func:`hlomem.largest_fit` from dump folders made at several
sizes, without compiling: :func:`curve_from_dumps`, and on the command line::

    python -m hlomem.curve --budget 16GiB 8=dump_b8 16=dump_b16 32=dump_b32 --svg curve.svg

Each folder is an XLA dump (``XLA_FLAGS=--xla_dump_to=DIR``) of the program
at one size. Its module is the one ``--module`` names (its ``HloModule``
name, or part of it), else the one that needs the most device memory. Each
is compared with the budget as :func:`hlomem.largest_fit` compares a
compile (``hlomem fits FILE --budget``): XLA's own buffer assignment total
where the dump holds its report, else hlomem's count, which
:func:`hlomem.assert_fits` compares. The largest size that fits is
the largest dumped size below the first that does not.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

from ._fit import LargestFit, about_note
from ._measure import FitPoint, report_fields
from ._verdict import fits_within

__all__ = ["curve_from_dumps", "main"]

PathArg = Union[str, "os.PathLike[str]"]


def _module(folder: Path, module: str | None) -> Any:
    from . import analyze

    reports = analyze(folder)
    if not isinstance(reports, list):
        reports = [reports]
    if module is not None:
        named = [r for r in reports if r.name == module] or [r for r in reports if module in r.name]
        if not named:
            names = ", ".join(sorted({r.name for r in reports}))
            raise ValueError(f"{folder} has no module named {module!r} (it has {names})")
        reports = named
    return max(reports, key=lambda r: r.memory.device_bytes)


def _point(n: int, path: PathArg, budget: str | int, module: str | None) -> FitPoint:
    from . import analyze

    where = Path(path)
    if where.is_dir():
        report = _module(where, module)
        file = Path(report.file)
    else:
        report = analyze(where)
        file = where
    # The binary decides, as for largest_fit: XLA's own figure where the
    # dump holds its report beside the file, else hlomem's.
    decided = fits_within(budget, file=str(file))
    checked = decided["module"]
    return FitPoint(
        n=n,
        label=f"n={n}",
        fits=bool(decided["fits"]),
        needed_bytes=int(decided["deciding_bytes"]),
        budget_bytes=int(decided["budget_bytes"]),
        hlomem_bytes=int(checked["device_bytes"]),
        xla_bytes=decided["xla_bytes"],
        exact=bool(checked["exact"]),
        dumped=True,
        **report_fields(report),
    )


def curve_from_dumps(
    dumps: Mapping[int, PathArg] | Iterable[tuple[int, PathArg]],
    *,
    budget: str | int,
    module: str | None = None,
    name: str | None = None,
) -> LargestFit:
    """The curve of the program dumped at each size: ``dumps`` maps a size
    ``n`` to its dump folder (or the module's after-optimizations file).

    ``budget`` is one device's memory (``"16GiB"`` or bytes), as
    :func:`hlomem.assert_fits` takes it. Returns a :class:`hlomem.LargestFit`
    (``.table()``, ``.svg()``, ``.points``) whose ``value`` is the largest
    dumped size that fits below the first that does not (``None`` when the
    smallest does not), ``next_value`` that one; it made no compile.
    """
    started = time.monotonic()
    pairs = sorted(dict(dumps).items() if isinstance(dumps, Mapping) else dumps)
    if not pairs:
        raise ValueError("give at least one size and its dump folder")
    points = tuple(_point(int(n), path, budget, module) for n, path in pairs)
    value = next_value = None
    for point in points:
        if not point.fits:
            next_value = point.n
            break
        value = point.n
    first = points[0].report
    notes = [note for note in [about_note(points)] if note is not None]
    fits_after = [p.n for p in points if p.fits and next_value is not None and p.n > next_value]
    if fits_after:
        notes.append(
            f"memory is not monotone in n: n={fits_after[0]} fits above n={next_value}, "
            "which does not"
        )
    return LargestFit(
        name=name or (first.name if first is not None else "module"),
        target=None,
        budget_bytes=points[0].budget_bytes or 0,
        budget_from="the budget given",
        grid=tuple(p.n for p in points if p.n is not None),
        points=points,
        value=value,
        next_value=next_value,
        compiles=0,
        cache_hits=0,
        compile_seconds=0.0,
        seconds=time.monotonic() - started,
        steps=("read from dump folders",),
        notes=tuple(notes),
    )


def _pair(text: str) -> tuple[int, str]:
    n, sep, path = text.partition("=")
    if not sep or not n.strip().lstrip("-").isdigit():
        raise argparse.ArgumentTypeError(f"expected N=FOLDER (a size and its dump), not {text!r}")
    return int(n), path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hlomem.curve",
        description="Memory against size from XLA dump folders made at several sizes: a table, "
        "and the chart with the budget line and the largest size that fits.",
    )
    parser.add_argument("dumps", nargs="+", type=_pair, metavar="N=FOLDER")
    parser.add_argument("--budget", required=True, help="one device's memory: 16GiB, 80GB, bytes")
    parser.add_argument("--module", help="the module to read (its HloModule name, or part)")
    parser.add_argument("--svg", help="write the chart to this file")
    parser.add_argument("--html", help="write the chart and the table to this HTML page")
    args = parser.parse_args(argv)
    budget: str | int = int(args.budget) if args.budget.isdigit() else args.budget
    fit = curve_from_dumps(args.dumps, budget=budget, module=args.module)
    print(fit)
    if args.svg:
        fit.save_svg(args.svg)
    if args.html:
        Path(args.html).write_text(f"<!doctype html><html><body>{fit.html()}</body></html>\n")
    return 0 if fit.value is not None else 1


if __name__ == "__main__":
    sys.exit(main())
