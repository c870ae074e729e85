"""Whether a program fits on one device of a target, in words and as data."""

from __future__ import annotations

from dataclasses import dataclass

from ._targets import Target, gib

__all__ = ["Verdict"]


@dataclass(frozen=True)
class Verdict:
    """Whether a program fits on one device of its target, in words
    (``str(verdict)``) and as data.

    ``str()`` reads ``"fits on one H100 with 11.3 GiB to spare (...)"`` or
    ``"needs 97 GiB of HBM, a v5e chip has 16 GiB"``; when XLA's own buffer
    assignment report is at hand (:func:`hlomem.compile_for` reads it from
    the compile's dump), its figure follows hlomem's.
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

    @property
    def fits(self) -> bool:
        return not self.at_least and self.needed_bytes <= self.target.usable_bytes

    @property
    def spare_bytes(self) -> int:
        """Usable memory left over; negative when it does not fit."""
        return self.target.usable_bytes - self.needed_bytes

    def __bool__(self) -> bool:
        return self.fits

    @property
    def needs(self) -> str:
        """What the program needs, in words: ``"27.5 GiB"``, ``"at least 19 GiB"``,
        with XLA's figure beside it when it is known and differs in print."""
        text = ("at least " if self.at_least else "") + gib(self.needed_bytes)
        if self.xla_bytes is not None:
            xla = gib(self.xla_bytes)
            same = xla == gib(self.needed_bytes)
            text += f" (XLA's buffer assignment: {'the same' if same else xla})"
        return text

    def __str__(self) -> str:
        t = self.target
        if self.fits:
            text = (
                f"fits on one {t.device} with {gib(self.spare_bytes)} to spare: needs {self.needs}"
            )
        else:
            text = (
                f"needs {self.needs} of {t.memory_word}, "
                f"{t.article} {t.device} has {gib(t.memory_bytes)}"
            )
        if t.usable_note:
            text += f" ({t.usable_note})"
        return text
