"""Whether a program fits on one device of a target, in words and as data,
and what was compiled, so that a reader can see it is their program."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ._targets import Target, gib

if TYPE_CHECKING:
    from ._signature import Expected, Leaf

__all__ = ["CompiledProgram", "ProgramArray", "Verdict"]

# How many arguments a verdict names, largest first.
_BIGGEST = 3


@dataclass(frozen=True)
class ProgramArray:
    """One argument or output of a compiled program."""

    #: JAX's name for it: ``a``, ``params['w']``, ``result[0]``.
    name: str
    #: numpy's name of its element type: ``float64``.
    dtype: str
    #: What one device holds, as XLA writes it: ``f64[42994,42994]``, with
    #: `` of [64,4096]`` after a shard's shape.
    shape: str
    #: One device's bytes of it (hlomem's analysis, equal to XLA's), or
    #: ``None`` when not analyzed.
    bytes: int | None = None


@dataclass(frozen=True)
class CompiledProgram:
    """What :func:`hlomem.compile_for` compiled: the function, its arrays as
    the compiled module takes and returns them (checked against the
    arguments given), and the versions that compiled it."""

    name: str
    arguments: tuple[ProgramArray, ...]
    outputs: tuple[ProgramArray, ...]
    versions: dict[str, str]

    @classmethod
    def of(
        cls, name: str, expected: Expected, kept: Sequence[int] | None, versions: dict[str, str]
    ) -> CompiledProgram:
        """The program of ``expected``'s arrays; ``kept``: the arguments jit kept."""
        arguments = list(expected.arguments)
        if kept is not None:
            arguments = [arguments[i] for i in kept if i < len(arguments)]
        return cls(
            name,
            tuple(_array(leaf) for leaf in arguments),
            tuple(_array(leaf) for leaf in expected.outputs),
            dict(versions),
        )

    def with_bytes(self, report: Any) -> CompiledProgram:
        """The same, each array with its bytes from hlomem's analysis
        ``report`` of the compiled module (left unknown where the module's
        parameters or outputs do not line up one to one, as with tupled
        parameters)."""
        params = [p.bytes for p in report.parameters]
        outs = [o.bytes for o in report.outputs]
        arguments = self.arguments
        if len(params) == len(arguments):
            arguments = tuple(replace(a, bytes=b) for a, b in zip(arguments, params))
        outputs = self.outputs
        if len(outs) == len(outputs):
            outputs = tuple(replace(o, bytes=b) for o, b in zip(outputs, outs))
        return replace(self, arguments=arguments, outputs=outputs)

    def __str__(self) -> str:
        """``compiled <lambda> with jax 0.10.2: 2 arguments (float64): a
        f64[42994,42994] 13.77 GiB, ...; 1 output (float64) ...``."""
        versions = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        head = f"compiled {self.name}" + (f" with {versions}" if versions else "")
        return f"{head}: {_arrays('argument', self.arguments)}; {_arrays('output', self.outputs)}"


def _array(leaf: Leaf) -> ProgramArray:
    from ._signature import _hlo_type

    shape = leaf.device_shape if leaf.device_shape is not None else leaf.shape
    text = f"{_hlo_type(leaf.dtype)}[{','.join(map(str, shape))}]"
    if leaf.device_shape is not None and leaf.device_shape != leaf.shape:
        text += f" of [{','.join(map(str, leaf.shape))}]"
    return ProgramArray(leaf.name, leaf.dtype, text)


def _arrays(kind: str, arrays: Sequence[ProgramArray]) -> str:
    """``2 arguments (float64): a f64[8] 64 B, b ...``, the largest first."""
    if not arrays:
        return f"no {kind}s"
    dtypes = ", ".join(dict.fromkeys(a.dtype for a in arrays))
    text = f"{len(arrays)} {kind}{'s' * (len(arrays) != 1)} ({dtypes})"
    biggest = sorted(arrays, key=lambda a: -(a.bytes or 0))[:_BIGGEST]
    shown = ", ".join(
        f"{a.name} {a.shape}" + (f" {gib(a.bytes)}" if a.bytes is not None else "") for a in biggest
    )
    more = len(arrays) - len(biggest)
    lead = "the biggest: " if more else ""
    return f"{text}, {lead}{shown}" + (f" and {more} more" if more else "")


@dataclass(frozen=True)
class Verdict:
    """Whether a program fits on one device of its target, in words
    (``str(verdict)``) and as data.

    ``str()`` starts with the decision, then the figures it was made from,
    each rounded once (two decimals)::

        does not fit: needs 41.32 GiB, JAX's share of an A100 40GB is 29.54 GiB, over by 11.78 GiB
          an A100 40GB has 39.39 GiB of memory; JAX's allocator takes ... of it; XLA's buffer ...
          compiled <lambda> with jax 0.10.2, ...: 2 arguments (float64), a f64[42994,42994] ...

    :attr:`headline` is the first line alone.
    """

    target: Target
    #: Device memory the program needs on one device (hlomem's ``check``;
    #: when :attr:`at_least`, a lower bound).
    needed_bytes: int
    #: XLA's own figure for the same memory (the buffer assignment's total of
    #: the device's memory space: HBM on TPU, "Total bytes used" on GPU), or
    #: ``None`` when XLA's report was not at hand.
    xla_bytes: int | None = None
    #: The target's compiler refused the program for memory: it needs at
    #: least :attr:`needed_bytes` (the compiler stops at the first refusal).
    at_least: bool = False
    #: What was compiled (``None`` when not known).
    program: CompiledProgram | None = None
    #: The compiler's error when the compile did not finish after XLA
    #: assigned buffers: the verdict is that module's.
    unfinished: str | None = None

    @property
    def deciding_bytes(self) -> int:
        """The figure the decision is made on: XLA's own buffer assignment's
        when the compile's dump has it (it is what the device's allocator
        will be asked for; hlomem's equals it unless hlomem's model misses
        one of XLA's rules, or says it is an estimate), else hlomem's. For a
        refused compile, the larger of the two lower bounds."""
        if self.xla_bytes is not None and not self.at_least:
            return self.xla_bytes
        return max(self.needed_bytes, self.xla_bytes or 0)

    @property
    def fits(self) -> bool:
        return not self.at_least and self.deciding_bytes <= self.target.usable_bytes

    @property
    def spare_bytes(self) -> int:
        """Usable memory left over; negative when it does not fit."""
        return self.target.usable_bytes - self.deciding_bytes

    def __bool__(self) -> bool:
        return self.fits

    @property
    def needs(self) -> str:
        """What the program needs, in words: ``"27.50 GiB"``, ``"at least 19.00 GiB"``."""
        return ("at least " if self.at_least else "") + gib(self.deciding_bytes)

    @property
    def headline(self) -> str:
        """The decision and the figures that make it, one line: ``"does not
        fit: needs 12.00 GiB, JAX's share of a V100 16GB is 11.82 GiB, over by 0.18 GiB"``."""
        t = self.target
        usable = f"{t.share} is {gib(t.usable_bytes)}"
        # A compile that did not finish is said in the decision, before any figure.
        unfinished = " (the compile did not finish)" if self.unfinished is not None else ""
        # Differences from the share are in its unit, GiB.
        if self.fits:
            spare = gib(self.spare_bytes, small_in_mib=False)
            return f"fits{unfinished}: needs {self.needs}, {usable}, {spare} to spare"
        decision = "does not fit" + (" (its compiler refused it)" if self.at_least else unfinished)
        over = -self.spare_bytes
        if over <= 0:  # refused, though what the refusal says is within the limit
            return f"{decision}: needs {self.needs}, {usable}"
        by = ("at least " if self.at_least else "") + gib(over, small_in_mib=False)
        return f"{decision}: needs {self.needs}, {usable}, over by {by}"

    @property
    def basis(self) -> str:
        """The device's memory, the share a program may use, and XLA's own figure."""
        t = self.target
        text = f"{t.article} {t.device} has {gib(t.memory_bytes)} of {t.memory_word}"
        if t.usable_note:
            text += f"; {t.usable_note}"
        if self.xla_bytes is not None and self.at_least:
            # needed_bytes is then the refusal's own figure or hlomem's, the larger.
            text += (
                f"; XLA's buffer assignment of the module it refused: {gib(self.xla_bytes)} "
                f"({self.xla_bytes} bytes)"
            )
        elif self.xla_bytes is not None:
            if self.xla_bytes == self.needed_bytes:
                text += f"; XLA's buffer assignment says the same ({gib(self.xla_bytes)})"
            else:
                # Said in bytes too: two figures that print alike may differ.
                text += (
                    f"; XLA's buffer assignment says {gib(self.xla_bytes)} ({self.xla_bytes} "
                    f"bytes), hlomem's analysis {gib(self.needed_bytes)} ({self.needed_bytes} "
                    "bytes): they differ, and XLA's decides (hlomem analyze --verify on a "
                    "kept dump shows where)"
                )
        return text

    def __str__(self) -> str:
        lines = [self.headline, f"  {self.basis}"]
        if self.unfinished is not None:
            lines.append(f"  {_unfinished(self.unfinished)}")
        if self.program is not None:
            lines.append(f"  {self.program}")
        return "\n".join(lines)


def _unfinished(error: str) -> str:
    first = error.strip().splitlines()[0] if error.strip() else error
    return (
        f"the compile did not finish ({first}); these are the figures of the module XLA "
        "had optimized and assigned buffers to before it stopped"
    )
