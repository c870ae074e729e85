"""What :func:`hlomem.assert_fits` says when a test fails, and the budget it
takes when none is given.

The message is for pytest: its first line is the verdict (pytest's short
test summary shows that line alone), the groups that hold the peak follow,
then ``hlomem check``'s text. Every function here sets
``__tracebackhide__`` so that a failing test shows the verdict, not this
package's source.
"""

from __future__ import annotations

from typing import Any

from ._devices import devices_of
from ._model import CheckedModule, CheckResult, Report

__all__ = ["device_budget", "failure_message", "human_bytes", "place"]

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")

#: Groups of the peak named under the verdict.
TOP_GROUPS = 3


def human_bytes(n: int) -> str:
    """A size as hlomem prints it (XLA's ``HumanReadableNumBytes``):
    ``512B``, ``5.0KiB``, ``6.00MiB``, ``13.77GiB``."""
    __tracebackhide__ = True
    if n < 1024:
        return f"{n}B"
    # As XLA: integer division while at least 1 MiB, then one float division.
    value, unit = n, 0
    while value >= 1024 * 1024:
        value //= 1024
        unit += 1
    shown = value / 1024
    return f"{shown:.1f}{_UNITS[unit]}" if unit == 0 else f"{shown:.2f}{_UNITS[unit]}"


def place(group: Any) -> str:
    """A ``peak.by_source`` group as the text report names it:
    ``flax/linen/stochastic.py:105 (Dropout.__call__) ← train.py:40 (Block.__call__)``,
    ``argument `params```, ``made by XLA for ...``: the binary words it (its
    JSON's ``place``), so the pytest message and the report say the same."""
    __tracebackhide__ = True
    return str(group["place"])


def _lead(result: CheckResult) -> CheckedModule | None:
    """The module a failure names first: the one most over the budget, else
    the first with a failing finding."""
    over = [m for m in result.modules if m.over_by is not None]
    if over:
        return max(over, key=lambda m: m.over_by or 0)
    for module in result.modules:
        if module.failing_findings:
            return module
    return None


def summary(result: CheckResult, module: CheckedModule) -> str:
    """One line: ``jit_step needs 3.75MiB of 1.00MiB, over by 2.75MiB``, or
    ``jit_step: HM003 <its message>``."""
    __tracebackhide__ = True
    failing = [m for m in result.modules if m.over_by is not None or m.failing_findings]
    more = len(failing) - 1
    tail = f" (and {more} more module{'s' * (more != 1)})" if more > 0 else ""
    codes = list(dict.fromkeys(f.code for f in module.failing_findings))
    if module.over_by is not None and result.budget_bytes is not None:
        line = (
            f"{module.name} needs {'' if module.exact else 'about '}{human_bytes(module.bytes)} of "
            f"{human_bytes(result.budget_bytes)}, over by {human_bytes(module.over_by)}"
        )
        if codes:
            line += f"; and {', '.join(codes)}"
        return line + tail
    first = module.failing_findings[0]
    others = len(module.failing_findings) - 1
    also = f" (+{others} more)" if others else ""
    return f"{module.name}: {first.code}{also} {first.message}{tail}"


def peak_lines(report: Report | None) -> list[str]:
    """The top groups of what holds the live peak, by source line."""
    __tracebackhide__ = True
    if report is None:
        return []
    peak = report.to_json().get("peak") or {}
    groups = peak.get("by_source") or []
    if not groups:
        return []
    live = report.to_json().get("memory", {}).get("live_peak_bytes")
    head = "what holds the live peak"
    if isinstance(live, int):
        head += f", {human_bytes(live)}"
    if peak.get("instruction"):
        head += f" (at {peak['instruction']})"
    sizes = [human_bytes(int(g.get("bytes", 0))) for g in groups[:TOP_GROUPS]]
    width = max(len(s) for s in sizes)
    lines = [f"  {head}:"]
    for group, size in zip(groups[:TOP_GROUPS], sizes):
        lines.append(f"    {size.ljust(width)}  {place(group)}")
    rest = groups[TOP_GROUPS:]
    if rest:
        rest_bytes = sum(int(g.get("bytes", 0)) for g in rest)
        lines.append(f"    ... and {len(rest)} more ({human_bytes(rest_bytes)})")
    return lines


def failure_message(
    result: CheckResult,
    reports: dict[str, Report],
    *,
    headline: str | None = None,
    budget_from: str | None = None,
) -> str:
    """The message of :class:`hlomem.OutOfBudget`: the verdict on one line
    (``headline`` when given: a :class:`hlomem.Verdict`'s), the groups that
    hold the peak, where the budget came from, then ``check``'s text."""
    __tracebackhide__ = True
    module = _lead(result)
    lines: list[str] = []
    if headline is not None:
        lines.append(headline)
    elif module is not None:
        lines.append(summary(result, module))
    if module is not None:
        lines += peak_lines(reports.get(module.key))
    if budget_from is not None:
        lines.append(f"  budget: {budget_from}")
    lines += ["", str(result).rstrip()]
    return "\n".join(lines)


def device_budget(x: Any) -> tuple[int | None, str]:
    """The memory limit JAX knows for the devices ``x`` (a
    ``jax.stages.Compiled``) runs on: the smallest
    ``device.memory_stats()["bytes_limit"]`` of an accelerator, with words
    saying where it came from; ``None`` and why not when there is none
    (a CPU: ``memory_stats()`` is ``None``; text or a path: no device)."""
    __tracebackhide__ = True
    if not hasattr(x, "as_text") or not hasattr(x, "input_shardings"):
        return None, "hlomem was given HLO text or a file, which names no device"
    devices = devices_of(x)
    if not devices:
        return None, "JAX does not say which devices this program runs on"
    limits: list[tuple[int, Any]] = []
    for device in devices:
        if getattr(device, "platform", "cpu") == "cpu":
            continue
        try:
            stats = device.memory_stats()
        except Exception:  # noqa: BLE001 - a backend without memory stats: no limit known
            stats = None
        limit = stats.get("bytes_limit") if isinstance(stats, dict) else None
        if isinstance(limit, int) and limit > 0:
            limits.append((limit, device))
    if not limits:
        kinds = ", ".join(dict.fromkeys(str(getattr(d, "platform", d)) for d in devices))
        return None, f"its devices ({kinds}) have no memory limit JAX knows"
    limit, device = min(limits, key=lambda pair: pair[0])
    return limit, f"{human_bytes(limit)}, the bytes_limit of {device}'s memory_stats()"
