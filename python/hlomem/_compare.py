"""What one step needs on several targets: :func:`compare_targets`, one
deviceless compile per target (``compile_for``) and one :class:`Verdict`
each, optionally beside what a device that ran out of memory said it needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ._targets import TargetArg, gib, resolve_target
from ._verdict import CompiledProgram, Verdict

if TYPE_CHECKING:
    from . import OutOfBudget
    from ._deviceless import DevicelessCompiled
    from ._model import Explanation

__all__ = ["Comparison", "compare_targets"]


@dataclass(frozen=True)
class Comparison:
    """One step compiled for several targets: a :class:`Verdict` per target
    (iterate, or index by position or target name), the compiled programs,
    and ``str()`` a line per target.

    With ``failed`` (:func:`compare_targets`), :attr:`failed_needs_bytes` is
    what the device that ran out of memory said the step needs, and the text
    starts with it: "step needs 27.50GiB on the device that failed; ...".
    """

    #: The function's name, as the text says it.
    name: str
    verdicts: tuple[Verdict, ...]
    #: Target name -> its compile (a refused one is absent: see :attr:`refusals`).
    compiled: dict[str, DevicelessCompiled] = field(default_factory=dict, repr=False)
    #: Target name -> the OutOfBudget its compiler raised (its report and explanation).
    refusals: dict[str, OutOfBudget] = field(default_factory=dict, repr=False)
    #: ``failed``'s explanation, when given.
    explanation: Explanation | None = field(default=None, repr=False)
    #: What the failing device needed, from its message (``None`` when it does not say).
    failed_needs_bytes: int | None = None

    def __iter__(self) -> Iterator[Verdict]:
        return iter(self.verdicts)

    def __len__(self) -> int:
        return len(self.verdicts)

    def __getitem__(self, key: int | str) -> Verdict:
        """The verdict at position ``key``, or of the target named ``key``."""
        if isinstance(key, int):
            return self.verdicts[key]
        for verdict in self.verdicts:
            if verdict.target.name == key:
                return verdict
        names = ", ".join(v.target.name for v in self.verdicts)
        raise KeyError(f"no target {key!r} in this comparison ({names})")

    @property
    def fitting(self) -> list[str]:
        """The targets the step fits on, in the order given."""
        return [v.target.name for v in self.verdicts if v.fits]

    def __str__(self) -> str:
        if self.explanation is None:
            head = f"{self.name} on {len(self)} target{'s' * (len(self) != 1)}"
        elif self.failed_needs_bytes is not None:
            head = (
                f"{self.name} needs {gib(self.failed_needs_bytes)} on the device that failed "
                "(its message says); on other targets"
            )
        else:
            head = (
                f"the device that failed does not say how much {self.name} needs in all; "
                "on other targets"
            )
        width = max((len(v.target.name) for v in self.verdicts), default=0)
        lines = [f"{head} (compiled here, no device needed):"]
        for verdict in self.verdicts:
            lines.append(f"  {verdict.target.name:<{width}}  {verdict.headline}")
            for line in (verdict.unfinished_line, verdict.disagreement):
                if line is not None:
                    lines.append(f"  {'':<{width}}  {line}")
        # The arguments are the same on every target (each compile was
        # checked against them): said once.
        program = next((v.program for v in self.verdicts if v.program is not None), None)
        if program is not None:
            lines.append(f"  {_without_versions(program)}")
        return "\n".join(lines)


def _without_versions(program: CompiledProgram) -> str:
    # Each target's compiler has its own version; jax's is in the verdicts.
    return str(replace(program, versions={}))


def compare_targets(
    fn: Callable[..., Any],
    *args: Any,
    targets: Sequence[TargetArg],
    failed: str | BaseException | None = None,
    progress: bool = True,
    **compile_kwargs: Any,
) -> Comparison:
    """Compiles ``fn`` for each of ``targets`` (:func:`compile_for`, one child
    process each, no device needed) and says whether it fits on each.

    ``args`` and ``compile_kwargs`` (``donate_argnums``, ``mesh``,
    ``in_shardings``... and other ``jax.jit`` keywords) are
    :func:`compile_for`'s, the same for every target. A target whose
    compiler refuses the step for memory gets a verdict that it needs at
    least what the refusal says (``verdict.at_least``) instead of an error.

    ``failed`` is an out-of-memory error from a real device (or its message):
    the comparison then starts with what that device said the step needs::

        except Exception as e:
            print(hlomem.compare_targets(step, state, batch,
                                         targets=["tpu-v5p:2x2x1", "h100"], failed=e))

    Raises :class:`BackendNotInstalled` before compiling anything when a
    target's compiler is not installed.
    """
    from . import OutOfBudget, explain, fits
    from ._deviceless import _needs_from, _require_backend, compile_for

    if isinstance(targets, (str, bytes)):
        raise TypeError("targets is a list of targets: targets=['tpu-v5e:2x2', 'h100']")
    resolved = [resolve_target(t) for t in targets]
    if not resolved:
        raise ValueError("give at least one target")
    for target in resolved:
        _require_backend(target)
    explanation = explain(failed) if failed is not None else None
    verdicts: list[Verdict] = []
    compiled: dict[str, DevicelessCompiled] = {}
    refusals: dict[str, OutOfBudget] = {}
    for target in resolved:
        try:
            program = compile_for(fn, *args, target=target, progress=progress, **compile_kwargs)
        except OutOfBudget as e:
            if e.verdict is None:
                raise
            refusals[target.name] = e
            verdicts.append(e.verdict)
            continue
        compiled[target.name] = program
        verdicts.append(fits(program))
    needs = _needs_from(explanation) if explanation is not None else None
    return Comparison(
        getattr(fn, "__name__", type(fn).__name__),
        tuple(verdicts),
        compiled,
        refusals,
        explanation,
        needs,
    )
