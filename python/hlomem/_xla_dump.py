"""What :func:`hlomem.compile_for` reads from the dump folder XLA writes
during the compile (``--xla_dump_to``): the optimized module and XLA's own
buffer assignment totals, also when the compiler refused the program.

Found on real compiles (jax 0.10.2, libtpu 0.0.42, jax-cuda12-plugin
0.10.2): XLA writes ``<prefix>after_optimizations.txt`` with its
``-buffer-assignment.txt``, ``-buffer-assignment-values.txt`` ("Total bytes
used") and ``-memory-usage-report.txt`` (each memory space's total) for
every module; when libtpu refuses a program for memory it has already
written them, and adds ``<prefix>oom_intermediate_module.txt``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DumpedModule", "XlaTotals", "read_dump"]

_AFTER = "after_optimizations.txt"
_SPACE = re.compile(r"^Memory Space: (\S+) \(color=(\d+)\)\nTotal bytes: (\d+)", re.MULTILINE)
_TOTAL = re.compile(r"^Total bytes used: (\d+)", re.MULTILINE)


@dataclass(frozen=True)
class XlaTotals:
    """XLA's own totals for one module, from the buffer assignment reports
    of its dump: the numbers hlomem's are checked against."""

    #: The buffer assignment's "Total bytes used" (every memory space).
    total_bytes: int
    #: Each memory space's total, as XLA names it (``default``: HBM on TPU,
    #: the GPU's memory; ``vmem``...).
    by_space: dict[str, int] = field(default_factory=dict)

    @property
    def device_bytes(self) -> int:
        """What must fit in the device's memory: the ``default`` space."""
        return self.by_space.get("default", self.total_bytes)


@dataclass(frozen=True)
class DumpedModule:
    """One module of a dump folder."""

    #: Its file name before ``after_optimizations.txt``.
    prefix: str
    #: The optimized module's HLO text.
    hlo_text: str
    xla: XlaTotals | None
    #: The compiler refused it (libtpu wrote ``oom_intermediate_module.txt``).
    refused: bool


def read_dump(folder: Path, module: str | None = None) -> DumpedModule | None:
    """The module of ``folder`` that ``module`` (its ``HloModule`` name)
    names, the last compiled if several do; without ``module``, the one the
    compiler refused, else the last one. ``None`` when there is none."""
    found: list[tuple[bool, int, DumpedModule]] = []
    for path in folder.glob(f"*{_AFTER}"):
        prefix = path.name[: -len(_AFTER)]
        text = path.read_text(errors="replace")
        if module is not None and _module_name(text) != module:
            continue
        number = re.match(r"module_(\d+)", prefix)
        refused = (folder / f"{prefix}oom_intermediate_module.txt").exists()
        dumped = DumpedModule(prefix, text, _totals(folder, prefix), refused)
        found.append((refused, int(number.group(1)) if number else -1, dumped))
    if not found:
        return None
    return max(found, key=lambda f: (f[0], f[1]))[2]


def _module_name(text: str) -> str | None:
    head = re.match(r"\s*HloModule\s+([^\s,]+)", text)
    return head.group(1) if head else None


def _totals(folder: Path, prefix: str) -> XlaTotals | None:
    stem = f"{prefix}{_AFTER[:-4]}"
    total = None
    for report in ("-buffer-assignment-values.txt", "-buffer-assignment.txt"):
        path = folder / f"{stem}{report}"
        if path.exists():
            match = _TOTAL.search(path.read_text(errors="replace"))
            if match:
                total = int(match.group(1))
                break
    if total is None:
        return None
    usage = folder / f"{stem}-memory-usage-report.txt"
    spaces = (
        {m.group(1): int(m.group(3)) for m in _SPACE.finditer(usage.read_text(errors="replace"))}
        if usage.exists()
        else {}
    )
    return XlaTotals(total, spaces)
