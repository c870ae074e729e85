"""The report objects: typed views of hlomem's JSON documents.

Each class declares the fields most code reads, with the JSON Schema
definition it mirrors in ``_schema``; every other field of the JSON is
reachable the same way (see :class:`hlomem.JsonObject`). The declarations are
checked against ``hlomem schema analyze|check|explain`` by the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ._binary import failure, run
from ._json import JsonObject

__all__ = [
    "Advice",
    "CheckResult",
    "CheckedModule",
    "Diagnosis",
    "Explanation",
    "Finding",
    "FindingRef",
    "Memory",
    "Note",
    "Report",
    "Source",
    "SpaceBytes",
]


@dataclass(frozen=True)
class Source:
    """How to run the command that made a document again, to render it for
    people: its input (a path, or ``-`` with the text on standard input) and
    its other options (``--budget 16GiB``, ``--dump DIR``)."""

    arg: str
    stdin: bytes | None = None
    options: tuple[str, ...] = ()
    #: One device's memory, drawn on an HTML report's chart when no budget
    #: is given: a ``compile_for`` target's usable memory.
    budget: int | None = None


class _Rendered(JsonObject):
    """A JSON document that the binary can also render for people: ``str()``
    gives its text form, computed once when first asked."""

    __slots__ = ("_source", "_texts")

    def __init__(self, data: dict[str, object], source: Source | None = None) -> None:
        super().__init__(data)
        self._source = source
        self._texts: dict[tuple[str, ...], str] = {}

    #: The hlomem command that writes this document.
    _command: ClassVar[str] = ""

    def _render(self, fmt: str, options: tuple[str, ...] = ()) -> str:
        __tracebackhide__ = True  # pytest: a failing assert_fits shows its verdict, not this
        key = (fmt, *options)
        if key not in self._texts:
            source = self._source
            if source is None:
                raise ValueError(
                    f"this {type(self).__name__} was not made by hlomem; it has no {fmt} form"
                )
            args = [self._command, source.arg, *source.options, *options, "--format", fmt]
            process = run(args, source.stdin)
            # `analyze` and `explain` exit 0; `check` exits 1 when it fails,
            # which is what it is asked to describe.
            if process.returncode not in (0, 1):
                raise failure(process)
            self._texts[key] = process.stdout.decode("utf-8", "replace")
        return self._texts[key]

    def __str__(self) -> str:
        __tracebackhide__ = True
        # One built from plain data has no command to run again.
        return repr(self) if self._source is None else self._render("text")


class SpaceBytes(JsonObject):
    """One memory space's share of the allocations (TPU: HBM, VMEM, ...)."""

    _schema = ("analyze", "SpaceBytes")
    __slots__ = ()

    color: int
    #: As XLA names the space: ``default`` (device memory), ``vmem``, ``smem``...
    name: str
    bytes: int
    #: XLA's own number (``True``), or hlomem's packing of the same buffers.
    exact: bool


class Memory(JsonObject):
    """XLA's memory figures for one module, in bytes.

    ``argument_bytes``, ``output_bytes``, ``alias_bytes`` and ``temp_bytes``
    are ``compiled.memory_analysis()``'s ``argument_size_in_bytes``,
    ``output_size_in_bytes``, ``alias_size_in_bytes`` and
    ``temp_size_in_bytes``; ``total_bytes`` is the buffer assignment's "Total
    bytes used" (every allocation, constants included).

    When device memory is hlomem's estimate, ``device_estimates`` says why
    (``kind``): ``chip-assumed`` (a TPU module whose chip nothing named: the
    figures are the ``assumed`` chips', ``other_figures`` the ``other``
    chips'), ``libtpu-assumed`` (a TPU text that does not show which libtpu
    compiled it: 0.0.42's figures, ``other_figures`` 0.0.52's),
    ``packing-order``, ``piece-order`` (a newer libtpu joins the HBM
    scratch block's pieces in an order not known, which alone moves it
    between ``smallest`` and ``largest``), or ``operands-at-update`` (an ``async-update``
    that hands its async operation operands: libtpu's SparseCore offloads).
    """

    _schema = ("analyze", "Totals")
    __slots__ = ()

    argument_bytes: int
    output_bytes: int
    #: Donated parameters reused as outputs (counted in both of the above).
    alias_bytes: int
    temp_bytes: int
    total_bytes: int
    #: Most bytes of device memory live at one moment.
    live_peak_bytes: int
    #: What must fit in the device's memory (HBM on TPU); ``total_bytes`` off TPU.
    device_bytes: int
    by_space: list[SpaceBytes]
    #: ``False`` when on-chip spaces placed outside the buffer assignment
    #: (TPU VMEM) add to ``total_bytes``, which is then an estimate.
    total_exact: bool


class Finding(JsonObject):
    """What in a module costs memory, and how to fix it (``hlomem explain-code CODE``)."""

    _schema = ("analyze", "FindingReport")
    __slots__ = ()

    #: ``HM001`` ... ``HM006``.
    code: str
    #: The code's name: ``not-donated``, ``donation-copied``...
    name: str
    severity: str
    #: Bytes at stake (``FindingReport.bytes`` in the schema): what the fix
    #: saves where that is known beforehand (HM001-HM004, HM006), else what
    #: the finding is about (HM005: the temporaries, by an amount the module
    #: does not say).
    bytes: int
    message: str
    fix: str
    details: list[str]
    #: The same facts as data, per rule (``evidence.rule``).
    evidence: JsonObject


class Note(JsonObject):
    """A caveat about a module's numbers: ``code`` (``tpu_chip_assumed``,
    ``backend_overridden``, ``tpu_chip_ignored``, ``not_optimized``) with its
    facts as fields, and :attr:`message`, the words (which name what to do in
    Python, not a command-line flag); ``str(note)`` is the message."""

    _schema = ("analyze", "NoteReport")
    __slots__ = ()

    message: str

    def __str__(self) -> str:
        return self.message


class Report(_Rendered):
    """One module's analysis: ``hlomem analyze --format json``'s ``modules[i]``.

    ``str(report)`` is the text report, ``report.html()`` (and Jupyter's
    display) the HTML report with its chart of memory over the schedule; each
    runs the analysis again in that format the first time it is asked for.
    """

    _schema = ("analyze", "ModuleReport")
    __slots__ = ()

    #: The module's name (``jit_train_step``).
    name: str
    #: Its name in the dump folder (``module_0000.jit_train_step``), or ``<stdin>``.
    key: str
    file: str
    memory: Memory
    #: The moment the most bytes are live and the buffers live then.
    peak: JsonObject
    #: What wastes memory, most bytes first.
    findings: list[Finding]
    parameters: list[JsonObject]
    outputs: list[JsonObject]
    #: The backend whose rules were applied, and the text that said so.
    target: JsonObject
    #: Caveats about the numbers.
    notes: list[Note]

    _command = "analyze"

    def html(self, budget: str | int | None = None) -> str:
        """The self-contained HTML page (inline SVG, CSS and script, no
        network). ``budget``, one device's memory (``"16GiB"``, or bytes as
        an ``int``), is drawn as a line on the chart; for a program from
        :func:`hlomem.compile_for` it is its target's usable memory unless
        given."""
        __tracebackhide__ = True
        if budget is None and self._source is not None:
            budget = self._source.budget
        if budget is None:
            return self._render("html")
        if isinstance(budget, bool) or not isinstance(budget, (str, int)):
            raise TypeError(f"budget is a size like '16GiB' or a number of bytes, not {budget!r}")
        # An int is bytes, said so (a bare number under 1 MiB reads as a slip for GiB).
        return self._render(
            "html", ("--budget", f"{budget}B" if isinstance(budget, int) else budget)
        )

    def _repr_html_(self) -> str:
        # Notebooks show a fragment: the page's body, one element holding
        # the report with its own (scoped) style and script.
        page = self.html()
        start, end = page.find("<body>"), page.rfind("</body>")
        return page[start + len("<body>") : end].strip() if 0 <= start < end else page

    def __repr__(self) -> str:
        codes = [f.code for f in self.findings]
        return (
            f"Report(name={self.name!r}, total_bytes={self.memory.total_bytes}, findings={codes})"
        )


class FindingRef(JsonObject):
    """A finding as ``check`` lists it."""

    _schema = ("check", "FindingRef")
    __slots__ = ()

    code: str
    name: str
    bytes: int
    message: str


class CheckedModule(JsonObject):
    """One module as ``check`` compared it with the budget."""

    _schema = ("check", "CheckedModule")
    __slots__ = ()

    name: str
    key: str
    #: What was compared with the budget (device memory, per device).
    bytes: int
    #: Whether ``bytes`` is XLA's figure to the byte (not when a TPU module's
    #: chip had to be assumed): the messages then say "about".
    exact: bool
    #: How far over the budget, or ``None``.
    over_by: int | None
    failing_findings: list[FindingRef]
    other_findings: list[FindingRef]


class CheckResult(_Rendered):
    """``hlomem check --format json``: a budget and forbidden findings applied
    to each module. ``str(result)`` is the short text report."""

    _schema = ("check", "")
    __slots__ = ()

    passed: bool
    budget_bytes: int | None
    modules: list[CheckedModule]

    _command = "check"

    def __str__(self) -> str:
        __tracebackhide__ = True
        text = super().__str__()
        # HLO text on standard input is `<stdin>` to the command; the text
        # names it by its module instead (`jit_train_step`), as people know it.
        source = self._source
        if source is not None and source.arg == "-" and len(self.modules) == 1:
            module = self.modules[0]
            if module.key == "<stdin>" and module.name:
                text = text.replace("<stdin>", module.name)
        return text


class Advice(JsonObject):
    """One thing to try, in words, with what it would save when hlomem can
    tell (``saves_bytes`` is ``None`` when it cannot be measured)."""

    _schema = ("explain", "AdviceWords")
    __slots__ = ()

    action: str
    why: str
    saves_bytes: int | None
    links: list[str]


class Diagnosis(JsonObject):
    """The message as data: what failed, the checks of its numbers, the
    situation and the ranked advice, each a typed object (``kind`` names it;
    ``hlomem schema explain`` describes them all)."""

    _schema = ("explain", "Explanation")
    __slots__ = ()

    #: What failed, one object per fact (``kind``: ``allocation``, ``is-buffer``...).
    what_failed: list[JsonObject]
    #: Ranked advice as data; ``Explanation.advice`` has the same in words.
    advice: list[JsonObject]
    #: Training or inference, rematerialization on, ... as the message shows.
    situation: JsonObject


class Explanation(_Rendered):
    """``hlomem explain --format json``: an out-of-memory message read and
    explained. ``str(explanation)`` is the text form."""

    _schema = ("explain", "")
    __slots__ = ("_comparison",)

    #: The one-line verdict (``needs 41.32GiB; ...``).
    verdict: str
    #: The message's format (CPU, GPU's BFC allocator, TPU...).
    format: str
    #: The allocation that failed, in bytes, when the message says.
    requested_bytes: int | None
    #: The buffers the message lists as live at the failure.
    peak_buffers: list[JsonObject]
    #: Ranked advice in words, most bytes saved first.
    advice: list[Advice]
    #: The same facts as typed data.
    explanation: Diagnosis

    _command = "explain"

    def __init__(self, data: dict[str, object], source: Source | None = None) -> None:
        super().__init__(data, source)
        self._comparison: Any = None

    @property
    def comparison(self) -> Any:
        """``explain(..., also_on=...)``: the step compiled for those targets
        (a :class:`hlomem.Comparison`), which ``str()`` adds at the end;
        ``None`` otherwise."""
        return self._comparison

    def __str__(self) -> str:
        text = super().__str__()
        if self._comparison is None:
            return text
        return f"{text.rstrip()}\n\n{self._comparison}\n"
