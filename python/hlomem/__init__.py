"""hlomem: the memory XLA will need for a compiled JAX program, from its HLO.

::

    import hlomem

    compiled = jax.jit(train_step, donate_argnums=0).lower(state, batch).compile()
    report = hlomem.analyze(compiled)
    report.memory.total_bytes        # == XLA's buffer assignment, byte for byte
    [f.code for f in report.findings]

    hlomem.assert_fits(compiled, budget="16GiB")   # in a pytest test

    # For a device this machine does not have (a child process compiles):
    tpu = hlomem.compile_for(train_step, state, batch, target="tpu-v5e:2x2")
    print(hlomem.fits(tpu))   # "fits: needs 3.41GiB, what libtpu lets a program use of a v5e chip is ..."
    hlomem.assert_fits(tpu)   # budget: the target's usable memory
    print(hlomem.compare_targets(train_step, state, batch, targets=["tpu-v5e", "h100"]))

The analysis is the ``hlomem`` command's (installed with this package): these
functions run it and read its JSON, whose fields the report objects expose as
attributes (``hlomem schema analyze`` prints the JSON Schema).
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, Union, overload

from . import _gate
from ._binary import BinaryNotFound, HlomemError, failure, find_binary, run
from ._compare import Comparison, compare_targets
from ._deviceless import (
    BackendNotInstalled,
    DevicelessCompiled,
    MemoryAnalysis,
    compile_for,
)
from ._devices import chip_options
from ._fit import LargestFit, NothingFits, largest_fit
from ._json import JsonObject
from ._measure import CompileCache, FitPoint
from ._model import (
    Advice,
    CheckedModule,
    CheckResult,
    Diagnosis,
    Explanation,
    Finding,
    FindingRef,
    Memory,
    Note,
    Report,
    Source,
    SpaceBytes,
)
from ._signature import SignatureMismatch
from ._targets import Target, TargetArg, gpu_target
from ._variants import Variant, VariantComparison, compare_variants
from ._verdict import CompiledProgram, ProgramArray, Verdict
from ._xla_dump import XlaTotals


def __getattr__(name: str) -> Any:
    # GPU_TARGETS and TARGET_NAMES are the binary's table (``hlomem
    # targets``), read when first asked for: importing hlomem runs nothing.
    if name in ("GPU_TARGETS", "TARGET_NAMES"):
        from . import _targets

        return getattr(_targets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hlomem")
    except PackageNotFoundError:  # imported from a checkout, not installed
        return "0+unknown"


__version__ = _version()

__all__ = [
    "GPU_TARGETS",
    "TARGET_NAMES",
    "Advice",
    "BackendNotInstalled",
    "BinaryNotFound",
    "CheckResult",
    "CheckedModule",
    "Comparison",
    "CompileCache",
    "CompiledProgram",
    "DevicelessCompiled",
    "Diagnosis",
    "Explanation",
    "Finding",
    "FindingRef",
    "FitPoint",
    "HlomemError",
    "HlomemWarning",
    "JsonObject",
    "LargestFit",
    "Memory",
    "MemoryAnalysis",
    "Note",
    "NothingFits",
    "OutOfBudget",
    "ProgramArray",
    "Report",
    "SignatureMismatch",
    "SpaceBytes",
    "Target",
    "TargetArg",
    "Variant",
    "VariantComparison",
    "Verdict",
    "XlaTotals",
    "__version__",
    "analyze",
    "assert_fits",
    "compare_targets",
    "compare_variants",
    "compile_for",
    "explain",
    "find_binary",
    "fits",
    "gpu_target",
    "largest_fit",
]


class HasText(Protocol):
    """Anything with ``as_text()``: a ``jax.stages.Compiled`` (whose text is
    the optimized HLO hlomem reads)."""

    def as_text(self) -> Any: ...


#: What :func:`analyze` and :func:`assert_fits` accept.
Input = Union[HasText, str, bytes, "os.PathLike[str]"]
#: A path: a ``str`` or a ``pathlib.Path``.
PathArg = Union[str, "os.PathLike[str]"]


class OutOfBudget(AssertionError):
    """A program does not fit.

    Raised by :func:`assert_fits` when a module needs more memory than the
    budget, or has a finding named in ``fail_on``: the message is hlomem's
    short text report, :attr:`result` the same as data.

    Raised by :func:`compile_for` when the target's compiler refused the
    program for memory: the message starts with :attr:`verdict` (what the
    program needs at least), then hlomem's check of the module XLA wrote
    before refusing (:attr:`result`; :attr:`report` is its full analysis;
    both ``None`` when XLA wrote none) and :attr:`explanation`, hlomem's
    explanation of the compiler's message, whose own words end it.
    """

    def __init__(
        self,
        message: str,
        result: CheckResult | None,
        explanation: Explanation | None = None,
        report: Report | None = None,
        verdict: Verdict | None = None,
    ) -> None:
        super().__init__(message)
        self.result = result
        self.explanation = explanation
        #: compile_for: hlomem's analysis of the module the compiler refused.
        self.report = report
        #: compile_for: the target, and what the program needs there at least.
        self.verdict = verdict


class HlomemWarning(UserWarning):
    """Some modules of a dump folder could not be analyzed; the others were."""


def _source(x: Input) -> tuple[Source, bool]:
    """The command-line input for ``x``, and whether it is a folder."""
    __tracebackhide__ = True
    if isinstance(x, os.PathLike):
        return _path_source(os.fspath(x))
    if isinstance(x, bytes):
        return Source("-", x), False
    if isinstance(x, str):
        # HLO text has lines; a path has none. Text that starts like a module
        # (HloModule, or StableHLO's `module @...`, which hlomem then refuses
        # with advice) is text even on one line.
        head = x.lstrip()
        if "\n" in x or head.startswith(("HloModule", "module ", "module@", "func.func")):
            return Source("-", x.encode("utf-8")), False
        return _path_source(x)
    as_text = getattr(x, "as_text", None)
    if callable(as_text):
        text = as_text()
        # The chip, which the text does not name: a compile_for program's
        # target, else the compiled object's devices.
        chip = x.target.hlomem_options if isinstance(x, DevicelessCompiled) else chip_options(x)
        if isinstance(text, bytes):
            return Source("-", text, chip), False
        if isinstance(text, str):
            return Source("-", text.encode("utf-8"), chip), False
        raise TypeError(
            f"{type(x).__name__}.as_text() returned {type(text).__name__}, not HLO text"
        )
    raise TypeError(
        "hlomem reads a jax.stages.Compiled (`jax.jit(f).lower(...).compile()`), HLO text, "
        f"or the path of an HLO file or dump folder; got {type(x).__name__}"
    )


def _path_source(path: str) -> tuple[Source, bool]:
    __tracebackhide__ = True
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{path!r} is not a file or folder (HLO text would start with `HloModule`)"
        )
    # Absolute, so a report can be rendered again after a change of directory.
    return Source(os.path.abspath(path)), os.path.isdir(path)


def _parse_json(process: Any) -> Any:
    __tracebackhide__ = True
    try:
        return json.loads(process.stdout)
    except ValueError:
        raise failure(process) from None


@overload
def analyze(x: HasText) -> Report: ...
@overload
def analyze(x: PathArg | bytes) -> Report | list[Report]: ...


def analyze(x: Input) -> Report | list[Report]:
    """Analyzes a compiled program's memory as XLA's buffer assignment does.

    ``x`` is a ``jax.stages.Compiled``, HLO text (``compiled.as_text()``), or
    the path of an HLO file or of a dump folder
    (``XLA_FLAGS=--xla_dump_to=DIR``). Returns one :class:`Report`, or for a
    folder a list with one per module (modules that could not be read are
    left out with a :class:`HlomemWarning`).

    Raises :class:`HlomemError` when nothing could be analyzed (not HLO text:
    ``lowered.as_text()`` is StableHLO; pass ``lowered.compile()``).
    """
    source, is_folder = _source(x)
    if isinstance(x, DevicelessCompiled):
        # Its chart draws the target's usable memory.
        source = dataclasses.replace(source, budget=x.target.usable_bytes)
    process = run(["analyze", source.arg, *source.options, "--format", "json"], source.stdin)
    if process.returncode not in (0, 2):
        raise failure(process)
    document = _parse_json(process)
    modules = document.get("modules", [])
    if not modules:
        raise failure(process)
    if process.returncode == 2:
        warnings.warn(
            "hlomem could not analyze every module:\n" + process.stderr.decode("utf-8", "replace"),
            HlomemWarning,
            stacklevel=2,
        )
    if not is_folder:
        return Report(modules[0], source)
    # Each module renders again from its own file (its dump folder still
    # beside it, for a TPU's target_arguments.txt).
    return [Report(module, Source(module["file"])) for module in modules]


def _budget_for(
    x: Any, budget: str | int | None
) -> tuple[str | int | None, str | None, str | None]:
    """The budget :func:`assert_fits` compares ``x`` with: ``budget`` when
    given, else a :func:`compile_for` program's target's usable memory, else
    its devices' ``bytes_limit``; then where that limit came from, and why
    there is none when there is none (``hlomem.largest_fit``'s too)."""
    __tracebackhide__ = True
    if budget is not None:
        return budget, None, None
    if isinstance(x, DevicelessCompiled):
        return x.target.usable_bytes, None, None
    limit, why = _gate.device_budget(x)
    if limit is not None:
        return limit, why, None
    return None, None, why


def _budget_arg(budget: str | int) -> str:
    __tracebackhide__ = True
    if isinstance(budget, bool) or not isinstance(budget, (str, int)):
        raise TypeError(f"budget is a size like '16GiB' or a number of bytes, not {budget!r}")
    if isinstance(budget, int) and budget < 1:
        raise ValueError(f"budget must be at least 1 byte, not {budget}")
    # An int is bytes, said so: the command refuses a bare number under
    # 1 MiB as a slip for GiB, which a program's own count is not.
    return f"{budget}B" if isinstance(budget, int) else budget


#: assert_fits's default fail_on; told apart from one the caller gives.
_DEFAULT_FAIL_ON: tuple[str, ...] = ("HM003",)


def assert_fits(
    x: Input,
    budget: str | int | None = None,
    fail_on: Iterable[str] = _DEFAULT_FAIL_ON,
    *,
    whole_program: bool = False,
) -> CheckResult:
    """Fails (raises :class:`OutOfBudget`, an ``AssertionError``) when ``x``
    needs more device memory than ``budget``, or has a finding in ``fail_on``.

    ``x`` is what :func:`analyze` takes. ``budget`` is one device's memory:
    ``"16GiB"`` (``"16G"``: powers of 1024), ``"80GB"`` (powers of 1000) or
    bytes as an ``int``; SPMD modules are compared per device unless
    ``whole_program``. ``fail_on`` names findings that must not appear: the
    default, ``HM003``, is a donation XLA had to copy because of your code (a
    read after an in-place update); the copy every donated training step
    makes (the backward pass reads a weight while the optimizer writes it) is
    reported as ``info``, "expected", and fails nothing. The semantics are
    ``hlomem check``'s, which this runs. Returns the check's result when it
    passes.

    Without a budget: for a program from :func:`compile_for`, its target's
    usable memory (:attr:`Target.usable_bytes`; a failure's message then
    starts with the :class:`Verdict`); for a ``jax.stages.Compiled`` on an
    accelerator, the smallest ``device.memory_stats()["bytes_limit"]`` of
    its devices; otherwise (a CPU, HLO text, a file) a ``ValueError`` asking
    for one, unless ``fail_on`` is given, which is then checked alone.

    The failure's message is for pytest: its first line, which pytest's
    short test summary shows, is the verdict (``jit_train_step needs
    13.77GiB of 12.00GiB, over by 1.77GiB``, or the first failing finding's
    code and message), then the three source lines that hold most of the
    live peak, then ``hlomem check``'s text. The module is named by its
    ``HloModule`` name, not ``<stdin>``; hlomem's own frames are hidden from
    pytest's traceback (``__tracebackhide__``).
    """
    __tracebackhide__ = True
    source, _ = _source(x)
    # A compile_for program's target is the budget unless one is given; its
    # verdict then heads a failure's message.
    target = x.target if isinstance(x, DevicelessCompiled) and budget is None else None
    budget, budget_from, why = _budget_for(x, budget)
    codes = [fail_on] if isinstance(fail_on, str) else list(fail_on)
    if budget is None and (fail_on is _DEFAULT_FAIL_ON or not codes):
        raise ValueError(
            f"assert_fits needs a budget: {why}. Give one device's memory, "
            'assert_fits(compiled, budget="16GiB") (or bytes as an int), or compile for a '
            'device this machine lacks with hlomem.compile_for(f, *args, target="h100"), '
            "whose budget is the target's; fail_on=[...] alone checks findings only"
        )
    options: list[str] = list(source.options)  # the chip, when known
    analyze_options = list(options)
    if budget is not None:
        options += ["--budget", _budget_arg(budget)]
    if codes:
        options += ["--fail-on", *codes]
    if whole_program:
        options.append("--whole-program")
    source = Source(source.arg, source.stdin, tuple(options))
    process = run(["check", source.arg, *options, "--format", "json"], source.stdin)
    if process.returncode not in (0, 1):
        raise failure(process)
    result = CheckResult(_parse_json(process), source)
    failed = process.returncode == 1
    verdict = None
    if target is not None and isinstance(x, DevicelessCompiled) and result.modules:
        # The target's budget is decided on XLA's own figure when the
        # compile's dump has it (the verdict's); findings still fail.
        verdict = _verdict(x, result)
        failed = not verdict.fits or any(m.failing_findings for m in result.modules)
    if failed:
        reports = _reports_for(Source(source.arg, source.stdin, tuple(analyze_options)))
        message = _gate.failure_message(
            result,
            reports,
            headline=str(verdict) if verdict is not None else None,
            budget_from=budget_from,
        )
        raise OutOfBudget(message, result, verdict=verdict)
    return result


def _reports_for(source: Source) -> dict[str, Report]:
    """hlomem's analysis of what a check failed on, by module key (for the
    groups that hold the peak); empty when it cannot be had."""
    __tracebackhide__ = True
    process = run(["analyze", source.arg, *source.options, "--format", "json"], source.stdin)
    if process.returncode not in (0, 2):
        return {}
    try:
        modules = json.loads(process.stdout).get("modules", [])
    except ValueError:
        return {}
    return {m["key"]: Report(m, Source(m.get("file", source.arg))) for m in modules if "key" in m}


def fits(compiled: DevicelessCompiled) -> Verdict:
    """Whether a program from :func:`compile_for` fits on one device of its
    target. ``str(hlomem.fits(c))`` starts with the decision (``"does not
    fit: needs 41.32GiB, JAX's share of an A100 40GB is 29.54GiB, over by
    11.78GiB"``), then the device's memory and XLA's own figure, then what
    was compiled (the function, its arguments' dtypes, the biggest ones);
    ``bool()`` of it and ``.fits`` say the same as data. What it needs is
    the device memory ``hlomem check`` compares with a budget (per device);
    ``.xla_bytes`` is XLA's own figure for it, from the compile's buffer
    assignment report."""
    if not isinstance(compiled, DevicelessCompiled):
        raise TypeError(
            "fits() needs a program from hlomem.compile_for (it knows its target); "
            f"for others use assert_fits(x, budget=...), got {type(compiled).__name__}"
        )
    result = _check_for(compiled.as_text(), compiled.target, compiled.target.usable_bytes)
    return _verdict(compiled, result)


def _verdict(compiled: DevicelessCompiled, result: CheckResult) -> Verdict:
    __tracebackhide__ = True
    xla = compiled.xla_totals
    program = compiled.program
    if program is not None:
        # Each argument's bytes, as the module holds them on one device.
        program = program.with_bytes(_analyze_for(compiled.as_text(), compiled.target))
    return Verdict(
        compiled.target,
        result.modules[0].bytes,
        xla.device_bytes if xla is not None else None,
        program=program,
        unfinished=compiled.unfinished,
    )


def _analyze_for(hlo_text: str, target: Target) -> Report:
    """hlomem's analysis of a module compiled for ``target``."""
    __tracebackhide__ = True
    source = Source("-", hlo_text.encode("utf-8"), target.hlomem_options)
    process = run(["analyze", "-", *source.options, "--format", "json"], source.stdin)
    if process.returncode != 0:
        raise failure(process)
    return Report(_parse_json(process)["modules"][0], source)


def _check_for(hlo_text: str, target: Target, budget: int) -> CheckResult:
    """``hlomem check`` of a module compiled for ``target`` against ``budget`` bytes."""
    options = (*target.hlomem_options, "--budget", str(budget))
    source = Source("-", hlo_text.encode("utf-8"), options)
    process = run(["check", "-", *options, "--format", "json"], source.stdin)
    if process.returncode not in (0, 1):
        raise failure(process)
    return CheckResult(_parse_json(process), source)


def _message_bytes(x: object) -> bytes:
    """The text ``explain`` reads: what :func:`analyze` takes, less
    compiled programs. A ``str`` is the message itself (a message has one
    line as often as not, so it is never taken for a path); a path is a log
    file."""
    if isinstance(x, BaseException):
        return str(x).encode("utf-8")
    if isinstance(x, str):
        return x.encode("utf-8")
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    if isinstance(x, os.PathLike):
        with open(os.fspath(x), "rb") as log:
            return log.read()
    raise TypeError(
        "explain reads an out-of-memory message: an exception, its text (str or bytes), "
        f"or the path of a log file (pathlib.Path); got {type(x).__name__}"
    )


def explain(
    message_text: str | bytes | BaseException | os.PathLike[str],
    dump: PathArg | None = None,
    *,
    also_on: Sequence[TargetArg] = (),
    fn: Callable[..., Any] | None = None,
    args: Sequence[Any] = (),
    compile_kwargs: dict[str, Any] | None = None,
) -> Explanation:
    """Explains an out-of-memory message (``str(e)`` of the
    ``XlaRuntimeError``; a whole traceback or log is fine) in plain words,
    with ranked advice. With ``dump``, the XLA dump folder of the program that
    failed, its buffers are linked to instructions and source lines.

    With ``also_on`` (targets, as :func:`compile_for` takes them), ``fn`` and
    its ``args`` (and ``compile_kwargs`` such as ``{"donate_argnums": 0}``),
    the step is also compiled for those targets, no device needed, and the
    explanation ends with what it would need on each
    (:attr:`Explanation.comparison`, a :class:`Comparison`: this is
    :func:`compare_targets` with ``failed=message_text``)::

        except Exception as e:
            print(hlomem.explain(e, also_on=["tpu-v5p:2x2x1"], fn=step, args=(state, batch)))

    ``message_text`` may also be bytes, or a ``pathlib.Path`` of a log file;
    anything else is a ``TypeError``. Raises :class:`HlomemError` when the
    text holds no out-of-memory message.
    """
    message = _message_bytes(message_text)
    if also_on and fn is None:
        raise TypeError("also_on compiles the step for those targets: give fn= and args=")
    options: tuple[str, ...] = ()
    if dump is not None:
        options = ("--dump", os.path.abspath(os.fspath(dump)))
    source = Source("-", message, options)
    process = run(["explain", "-", *options, "--format", "json"], source.stdin)
    if process.returncode != 0:
        raise failure(process)
    explanation = Explanation(_parse_json(process), source)
    if also_on:
        assert fn is not None
        explanation._comparison = compare_targets(
            fn,
            *args,
            targets=also_on,
            failed=message.decode("utf-8", "replace"),
            **(compile_kwargs or {}),
        )
    return explanation
