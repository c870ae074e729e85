"""What :func:`hlomem.compile_for` reads from the dump folder XLA writes
during the compile (``--xla_dump_to``): the optimized module and XLA's own
buffer assignment totals, also when the compiler refused the program.

This module finds the files; the binary reads the totals (Rust reads
XLA's reports for ``hlomem analyze --verify``). Found on real compiles
(jax 0.10.2, libtpu 0.0.42, jax-cuda12-plugin 0.10.2): XLA writes
``<prefix>after_optimizations.txt`` with its ``-buffer-assignment.txt``,
``-buffer-assignment-values.txt`` ("Total bytes used") and
``-memory-usage-report.txt`` (each memory space's total) for every module;
when libtpu refuses a program for memory it has already written them, and
adds ``<prefix>oom_intermediate_module.txt``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ._binary import run

__all__ = ["DumpedModule", "XlaTotals", "read_dump"]

_AFTER = "after_optimizations.txt"


@dataclass(frozen=True)
class XlaTotals:
    """XLA's own totals for one module, from the buffer assignment reports
    of its dump: the numbers hlomem's are checked against."""

    #: The buffer assignment's "Total bytes used" (every memory space).
    total_bytes: int
    #: Each memory space's allocations, as XLA names the space (``default``:
    #: HBM on TPU, the GPU's memory; ``vmem``...): the totals of XLA's
    #: ``-memory-usage-report.txt``.
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
    """XLA's totals of the module ``prefix`` names, as the binary reads its
    buffer-assignment report (``hlomem analyze FILE --verify``: Rust's
    reader of XLA's reports is the one); ``None`` when the report is not
    there or cannot be read."""
    process = run(["analyze", str(folder / f"{prefix}{_AFTER}"), "--verify", "--format", "json"])
    if process.returncode not in (0, 1):  # 1: hlomem's figures differ somewhere; XLA's are read
        return None
    modules = json.loads(process.stdout).get("modules") or [{}]
    totals = (modules[0].get("verification") or {}).get("xla_totals")
    if totals is None or totals.get("total_bytes_used") is None:
        return None
    spaces = {space["name"]: space["bytes"] for space in totals["by_space"]}
    return XlaTotals(totals["total_bytes_used"], spaces)
