"""Whether a program fits on one device of a target, in words and as data,
and what was compiled, so that a reader can see it is their program."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ._binary import failure, run
from ._targets import Target, gib

if TYPE_CHECKING:
    from ._signature import Expected, Leaf

__all__ = ["CompiledProgram", "ProgramArray", "Verdict", "fits_within"]

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
        f64[42994,42994] 13.77GiB, ...; 1 output (float64) ...``."""
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

        does not fit: needs 41.32GiB, JAX's share of an A100 40GB is 29.54GiB, over by 11.78GiB
          an A100 40GB has 39.39GiB of memory; JAX's allocator takes ... of it; XLA's buffer ...
          compiled <lambda> with jax 0.10.2, ...: 2 arguments (float64), a f64[42994,42994] ...

    :attr:`headline` is the first line alone. The decision and its words are
    the binary's (``hlomem fits``, run once when first asked); what was
    compiled is said here, where the pytree's names are known.
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

    @functools.cached_property
    def _decided(self) -> dict[str, Any]:
        """``hlomem fits --format json`` of these figures (exit 1: it does not fit)."""
        args = ["fits", "--target", *self.target.target_args, "--needs", str(self.needed_bytes)]
        if self.xla_bytes is not None:
            args += ["--xla-needs", str(self.xla_bytes)]
        if self.at_least:
            args.append("--refused")
        if self.unfinished is not None:
            args += ["--unfinished", self.unfinished]
        process = run([*args, "--format", "json"])
        if process.returncode not in (0, 1):
            raise failure(process)
        decided: dict[str, Any] = json.loads(process.stdout)
        return decided

    @property
    def _words(self) -> dict[str, str | None]:
        words: dict[str, str | None] = self._decided["words"]
        return words

    def _said(self, key: str) -> str:
        text = self._words[key]
        assert text is not None, key
        return text

    @property
    def deciding_bytes(self) -> int:
        """The figure the decision is made on: XLA's own buffer assignment's
        when the compile's dump has it (it is what the device's allocator
        will be asked for; hlomem's equals it unless hlomem's model misses
        one of XLA's rules, or says it is an estimate), else hlomem's. For a
        refused compile, the larger of the two lower bounds."""
        return int(self._decided["deciding_bytes"])

    @property
    def fits(self) -> bool:
        return bool(self._decided["fits"])

    @property
    def spare_bytes(self) -> int:
        """Usable memory left over; negative when it does not fit."""
        return int(self._decided["spare_bytes"])

    def __bool__(self) -> bool:
        return self.fits

    @property
    def needs(self) -> str:
        """What the program needs, in words: ``"27.50GiB"``, ``"at least 19.00GiB"``."""
        return self._said("needs")

    @property
    def headline(self) -> str:
        """The decision and the figures that make it, one line: ``"does not
        fit: needs 12.00GiB, JAX's share of a V100 16GB is 11.82GiB, over by 0.18GiB"``."""
        return self._said("headline")

    @property
    def basis(self) -> str:
        """The device's memory, the share a program may use, and XLA's own figure."""
        return self._said("basis")

    @property
    def unfinished_line(self) -> str | None:
        """Why the figures are an unfinished compile's (``None`` when it finished)."""
        return self._words["unfinished"]

    @property
    def disagreement(self) -> str | None:
        """XLA's figure and hlomem's in one line, when they differ (not for a refusal)."""
        return self._words["disagreement"]

    def __str__(self) -> str:
        lines = [self.headline, f"  {self.basis}"]
        if self.unfinished_line is not None:
            lines.append(f"  {self.unfinished_line}")
        if self.program is not None:
            lines.append(f"  {self.program}")
        return "\n".join(lines)


def fits_within(
    budget: str | int,
    *,
    file: str | None = None,
    needs: int | None = None,
    xla_needs: int | None = None,
) -> dict[str, Any]:
    """``hlomem fits --budget --format json``: whether a program fits within
    one device's ``budget`` (``"16GiB"`` or bytes, as :func:`hlomem.assert_fits`
    takes it), on the figures of the dumped module ``file`` (hlomem's count,
    and XLA's own from the buffer-assignment report beside it) or on
    ``needs`` (hlomem's count) and ``xla_needs`` (XLA's). The binary decides
    (XLA's figure where there is one, else hlomem's): its JSON has ``fits``,
    ``deciding_bytes``, ``budget_bytes``, and with ``file`` the ``module``'s
    figures."""
    from . import _budget_arg

    args = ["fits", *([file] if file is not None else []), "--budget", _budget_arg(budget)]
    if needs is not None:
        args += ["--needs", str(needs)]
    if xla_needs is not None:
        args += ["--xla-needs", str(xla_needs)]
    process = run([*args, "--format", "json"])
    if process.returncode not in (0, 1):  # 1: it does not fit
        raise failure(process)
    decided: dict[str, Any] = json.loads(process.stdout)
    return decided
