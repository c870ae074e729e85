"""Compiling a JAX function for a TPU or GPU this machine does not have.

XLA compiles "deviceless" for a TPU topology (libtpu) or for a GPU described
by a target config (the CUDA plugin) on any Linux machine, and the compile
makes the same buffer assignment the real device would.

Design: each compile runs in a **child Python process** (this interpreter,
``python -m hlomem._deviceless``), because loading libtpu or the CUDA plugin
and the environment they need (``JAX_PLATFORMS=cpu``, ``TPU_SKIP_MDS_QUERY``,
``ALLOW_MULTIPLE_LIBTPU_LOAD``; ``XLA_FLAGS`` is read once per process) must
not leak into the caller's JAX. The parent pickles the request (the function,
the arguments as ``jax.ShapeDtypeStruct``s, the jit options) into a temporary
folder; the child compiles and writes back the optimized HLO text and
``memory_analysis()``'s numbers as JSON, or the compiler's error. The
function travels with ``cloudpickle`` when it is installed (the ``tpu`` and
``cuda12`` extras install it: lambdas and functions of ``__main__`` work),
else with ``pickle``, which needs a function the child can import by name (a
module-level function of an importable module; the child gets this
process's ``sys.path``).

The child compiles what the caller would: JAX's settings travel in the
request and are set before the function is unpickled (``_forward.py`` says
which), XLA's flags in the environment. Then the check of ``_signature.py``
compares the compiled module's entry parameters and results with the
function traced here: a compile that is not the caller's program is an
error, never a verdict.
"""

from __future__ import annotations

import importlib.util
import io
import json
import math
import os
import pickle
import subprocess
import sys
import tempfile
import time
import types
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _signature
from ._binary import HlomemError
from ._forward import config_to_send, flags_with_dump
from ._signature import Expected
from ._targets import Target, TargetArg, gib, resolve_target
from ._verdict import CompiledProgram, Verdict
from ._xla_dump import XlaTotals, read_dump

__all__ = [
    "BackendNotInstalled",
    "DevicelessCompiled",
    "MemoryAnalysis",
    "compile_for",
]

# What libtpu needs to compile without a TPU or its metadata server.
_CHILD_ENV = {"JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}

# Tests only: JAX settings the child sets after the caller's, to make a
# child that compiles another program than the caller's (the signature
# check must catch it).
_CHILD_CONFIG_FOR_TESTS: dict[str, Any] = {}

# compiled.memory_analysis()'s fields that the child reports.
_MEMORY_FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "alias_size_in_bytes",
    "temp_size_in_bytes",
    "generated_code_size_in_bytes",
)


class BackendNotInstalled(HlomemError, ImportError):
    """The compiler for the target is not installed in this environment; the
    message names the extra that installs it."""


@dataclass(frozen=True)
class MemoryAnalysis:
    """``compiled.memory_analysis()`` of the compile, as the child read it
    (the same field names, in bytes)."""

    argument_size_in_bytes: int
    output_size_in_bytes: int
    alias_size_in_bytes: int
    temp_size_in_bytes: int
    generated_code_size_in_bytes: int


class DevicelessCompiled:
    """A program compiled for a :class:`~hlomem.Target` by :func:`compile_for`.

    It stands in for ``jax.stages.Compiled`` where hlomem reads one:
    ``as_text()`` is the optimized HLO, ``memory_analysis()`` XLA's numbers,
    :attr:`xla_totals` the buffer assignment's totals from XLA's dump.
    :func:`hlomem.analyze`, :func:`hlomem.assert_fits` (whose budget is then
    the target's usable memory by default) and :func:`hlomem.fits` take it.
    It cannot run: there is no device.

    When the compile failed after XLA wrote its buffer assignment (a GPU's
    CUB sort cannot finish deviceless), :attr:`unfinished` is the
    compiler's error and the program is the module XLA had optimized and
    assigned buffers to; ``memory_analysis()`` then raises (jax had no
    executable to ask), and hlomem's analysis reads the module as it reads
    any other.
    """

    def __init__(
        self,
        target: Target,
        hlo_text: str,
        memory: MemoryAnalysis | None,
        versions: dict[str, str],
        xla_totals: XlaTotals | None = None,
        *,
        program: CompiledProgram | None = None,
        unfinished: str | None = None,
        dump: Path | None = None,
        config_sent: dict[str, Any] | None = None,
    ) -> None:
        self.target = target
        self._hlo_text = hlo_text
        self._memory = memory
        #: Versions of jax, jaxlib and the target's compiler that compiled it.
        self.versions = versions
        #: XLA's own buffer assignment totals ("Total bytes used", each
        #: memory space's), read from the compile's dump; ``None`` if XLA
        #: wrote none. :func:`hlomem.fits` shows them beside hlomem's.
        self.xla_totals = xla_totals
        #: What was compiled (the function, its arguments' names, shapes and
        #: dtypes), checked against the compiled module's entry.
        self.program = program
        #: The compiler's error when the compile did not finish after XLA
        #: wrote its buffer assignment; ``None`` for a finished compile.
        self.unfinished = unfinished
        #: XLA's dump folder of the compile, when ``keep_dump`` kept it (for
        #: ``hlomem analyze --verify``); else ``None``: it was removed.
        self.dump = dump
        #: The JAX settings the compiling process took from this one
        #: because its own differed (name -> value).
        self.config_sent = dict(config_sent or {})

    def as_text(self) -> str:
        """The optimized HLO module that XLA's buffer assignment ran on (the
        dump's ``after_optimizations.txt``), which hlomem reads. Off TPU it
        is ``jax.stages.Compiled.as_text()``; on TPU that text is a later
        stage, whose memory is not the buffer assignment's."""
        return self._hlo_text

    def memory_analysis(self) -> MemoryAnalysis:
        """XLA's ``memory_analysis()`` of the compile."""
        if self._memory is None:
            raise HlomemError(
                f"the compile for {self.target.name} did not finish ({self.unfinished}), so "
                "jax has no memory_analysis(); hlomem.analyze(compiled).memory has the numbers "
                "of the module XLA assigned buffers to"
            )
        return self._memory

    def __repr__(self) -> str:
        m = self._memory
        if m is None:
            return (
                f"DevicelessCompiled(target={self.target.name!r}, unfinished={self.unfinished!r})"
            )
        return (
            f"DevicelessCompiled(target={self.target.name!r}, "
            f"argument={m.argument_size_in_bytes}, output={m.output_size_in_bytes}, "
            f"alias={m.alias_size_in_bytes}, temp={m.temp_size_in_bytes})"
        )


def compile_for(
    fn: Callable[..., Any],
    *args: Any,
    target: TargetArg,
    mesh: dict[str, int] | None = None,
    in_shardings: Any = None,
    out_shardings: Any = None,
    donate_argnums: int | Sequence[int] = (),
    progress: bool = True,
    keep_dump: bool | str | os.PathLike[str] = False,
    **jit_kwargs: Any,
) -> DevicelessCompiled:
    """Compiles ``jax.jit(fn)`` for ``args`` on ``target`` without the device.

    ``target`` is ``"tpu-v5e:2x2"``, ``"tpu-v6e:2x2"``, ``"tpu-v5p:2x2x1"``,
    ``"tpu-v4:2x2x1"`` (any topology libtpu accepts after the colon), a GPU
    of :data:`hlomem.TARGET_NAMES` (``"h100"``, ``"a100-80"``, ``"b200"``...,
    optionally ``":1x1x8"``), the path of a GPU target config of your own,
    or a :class:`hlomem.Target` (:func:`hlomem.gpu_target`). ``args`` are ``jax.ShapeDtypeStruct``s or arrays (only their
    shapes and dtypes are used). Without ``mesh`` every argument is placed on
    the target's first device. With ``mesh`` (axis name -> size, e.g.
    ``{"data": 4}``, built over the topology's first devices),
    ``in_shardings`` and ``out_shardings`` are ``PartitionSpec``s (or pytrees
    of them) on that mesh. Other keywords go to ``jax.jit``.

    The compile runs in a child process (see the module's documentation);
    ``fn`` must be picklable there. This process's JAX settings (all of
    ``jax.config`` but where and how a process runs: ``_forward.py``) and
    its ``XLA_FLAGS`` and ``LIBTPU_INIT_ARGS`` go with it. The compiled
    module's entry parameters and results are then checked against ``fn``
    traced here: :class:`hlomem.SignatureMismatch` if they differ (another
    program than yours was compiled). Prints a line on standard error when
    it starts and ends unless ``progress=False``: a large TPU compile takes
    minutes.

    The child also has XLA write its dump (``--xla_dump_to``, into a
    temporary folder, or into ``keep_dump``'s folder, which must be new or
    empty; ``keep_dump=True`` keeps a temporary one):
    XLA's buffer assignment totals come from it
    (:attr:`DevicelessCompiled.xla_totals`), and, when the compiler refuses
    or fails after assigning buffers, the module it had optimized. A
    compile that fails after XLA wrote its buffer assignment is returned,
    with :attr:`DevicelessCompiled.unfinished` saying why.

    Raises :class:`hlomem.OutOfBudget` when the target's compiler refuses the
    program for memory (TPU checks HBM while compiling): its message starts
    with what the program needs at least, then hlomem's check of the module
    XLA wrote before refusing (:attr:`~hlomem.OutOfBudget.report` is its
    analysis) and the explanation of the compiler's message; :class:`BackendNotInstalled` when the
    target's compiler is not installed; :class:`HlomemError` for any other
    compile failure, with the compiler's message.
    """
    resolved = resolve_target(target)
    _require_backend(resolved)
    if (in_shardings is not None or out_shardings is not None) and mesh is None:
        raise ValueError("in_shardings and out_shardings are PartitionSpecs on `mesh`: give mesh")
    name = getattr(fn, "__name__", type(fn).__name__)
    abstract = _abstract(args)
    # What the compiled module must take and return: fn traced here, in
    # this process's configuration.
    expected = _signature.expected(
        fn,
        abstract,
        mesh=mesh,
        in_shardings=in_shardings,
        out_shardings=out_shardings,
        static_argnums=jit_kwargs.get("static_argnums"),
        static_argnames=jit_kwargs.get("static_argnames"),
    )
    config, unsent = config_to_send()
    if unsent:
        warnings.warn(
            f"these JAX settings cannot be sent to the compiling process (their values do not "
            f"pickle) and keep its defaults there: {', '.join(unsent)}",
            stacklevel=2,
        )
    request = {
        "target": resolved,
        "fn": fn,
        "args": abstract,
        "mesh": dict(mesh) if mesh is not None else None,
        "in_shardings": in_shardings,
        "out_shardings": out_shardings,
        "donate_argnums": donate_argnums,
        "jit_kwargs": jit_kwargs,
    }
    settings = {"config": config, "test_config": dict(_CHILD_CONFIG_FOR_TESTS)}
    with tempfile.TemporaryDirectory(prefix="hlomem-compile-") as folder:
        request_file = Path(folder, "request.pkl")
        result_file = Path(folder, "result.json")
        # The settings first, in a pickle of their own: the child sets them
        # before it unpickles the function (whose modules may read them on import).
        request_file.write_bytes(pickle.dumps(settings) + _dumps(request))
        dump = _dump_folder(keep_dump, Path(folder, "dump"))
        if progress:
            print(
                f"hlomem: compiling {name} for {resolved.name} (no device needed)...",
                file=sys.stderr,
            )
        started = time.monotonic()
        process = subprocess.run(
            [sys.executable, "-m", "hlomem._deviceless", str(request_file), str(result_file)],
            env=_child_env(dump),
            capture_output=True,
            check=False,
        )
        if not result_file.exists():
            stderr = process.stderr.decode("utf-8", "replace").strip()
            raise HlomemError(
                f"the compile for {resolved.name} ended without a result "
                f"(exit code {process.returncode}):\n{stderr[-4000:]}",
                process.returncode,
            )
        result = json.loads(result_file.read_text())
        if progress:
            print(
                f"hlomem: the compile of {name} for {resolved.name} took "
                f"{time.monotonic() - started:.0f} s",
                file=sys.stderr,
            )
        return _compiled(resolved, name, expected, result, dump, keep_dump is not False)


def _dump_folder(keep_dump: bool | str | os.PathLike[str], temporary: Path) -> Path:
    """Where XLA writes the compile's dump: ``temporary`` (removed with the
    compile), a kept temporary folder, or the caller's new or empty folder."""
    if keep_dump is False:
        return temporary
    if keep_dump is True:
        return Path(tempfile.mkdtemp(prefix="hlomem-dump-"))
    folder = Path(keep_dump).expanduser().resolve()
    if folder.exists() and any(folder.iterdir()):
        # Another compile's modules would be read as this one's.
        raise ValueError(f"keep_dump={str(keep_dump)!r} is not empty: give a new or empty folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _compiled(
    target: Target,
    name: str,
    expected: Expected,
    result: dict[str, Any],
    dump: Path,
    kept: bool,
) -> DevicelessCompiled:
    """The child's result as a DevicelessCompiled (the dump folder still
    there), after the check that it is the caller's program; the errors to
    raise otherwise."""
    unfinished = None
    kept_args = result.get("kept")
    program = CompiledProgram.of(name, expected, kept_args, result.get("versions", {}))
    if "error" in result:
        message = result["error"]
        dumped = read_dump(dump) if dump.is_dir() else None
        if _is_out_of_memory(message):
            if dumped is not None:
                _signature.check(expected, dumped.hlo_text, kept_args)
            raise _compile_error(target, name, message, dump, program)
        if dumped is None or dumped.xla is None:
            raise HlomemError(f"the compile for {target.name} failed:\n{message}")
        # XLA assigned buffers before the compile failed: that module is the
        # program, whose memory the dump says in full.
        unfinished = message.strip()
        hlo_text = dumped.hlo_text
    else:
        dumped = read_dump(dump, _module_name(result["hlo_text"])) if dump.is_dir() else None
        # The module XLA's buffer assignment ran on. On TPU, jax's as_text()
        # is a later stage (async slices added, buffers placed anew) whose
        # memory is not the buffer assignment's: an MLP step's HBM reads
        # 6.2 MiB from it and 2.2 MiB, XLA's own figure, from the dump.
        hlo_text = dumped.hlo_text if dumped is not None else result["hlo_text"]
    _signature.check(expected, hlo_text, kept_args)
    return DevicelessCompiled(
        target,
        hlo_text,
        MemoryAnalysis(**result["memory"]) if "memory" in result else None,
        result.get("versions", {}),
        dumped.xla if dumped is not None else None,
        program=program,
        unfinished=unfinished,
        dump=dump if kept else None,
        config_sent=result.get("config_applied"),
    )


def _module_name(hlo_text: str) -> str | None:
    words = hlo_text.lstrip().split(maxsplit=2)
    return words[1].rstrip(",") if len(words) > 1 and words[0] == "HloModule" else None


def _require_backend(target: Target) -> None:
    missing = [m for m in ("jax", target.backend_module) if importlib.util.find_spec(m) is None]
    if missing:
        raise BackendNotInstalled(
            f"compiling for {target.name} needs {' and '.join(missing)}, which this Python "
            f'({sys.executable}) does not have: pip install "hlomem[{target.extra}]"'
        )


def _abstract(tree: Any) -> Any:
    """``tree`` with each array replaced by a ``jax.ShapeDtypeStruct`` of
    its shape and dtype: its data and its (local) sharding stay here."""
    import jax

    shape_dtype: Any = jax.ShapeDtypeStruct  # untyped in some jax versions

    def leaf(x: Any) -> Any:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return shape_dtype(x.shape, x.dtype)
        return x

    return jax.tree_util.tree_map(leaf, tree)


def _dumps(request: dict[str, Any]) -> bytes:
    cloudpickle: Any  # optional, and without type information
    try:
        cloudpickle = importlib.import_module("cloudpickle")
    except ImportError:
        cloudpickle = None
    try:
        if cloudpickle is not None:
            buffer = io.BytesIO()
            _pickler(cloudpickle)(buffer).dump(request)
            return buffer.getvalue()
        if getattr(request["fn"], "__module__", None) == "__main__":
            # pickle names the function; a child's __main__ is not the caller's.
            raise pickle.PicklingError("a function of __main__ cannot be imported by a child")
        return pickle.dumps(request)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise TypeError(
            f"compile_for sends the function to a child process and could not pickle it ({e}). "
            "Install cloudpickle (the hlomem[tpu] and hlomem[cuda12] extras do), or define the "
            "function at the top level of an importable module."
        ) from e


def _pickler(cloudpickle: Any) -> Any:
    """cloudpickle's Pickler, keeping the file name of the code it sends by
    value (cloudpickle writes ``<dynamic-code>``): XLA's stack frames, and
    so hlomem's source lines, name the caller's file, not ``<dynamic-code>``."""
    reduce_code = getattr(getattr(cloudpickle, "cloudpickle", None), "_code_reduce", None)

    class Pickler(cloudpickle.Pickler):  # type: ignore[misc]  # untyped
        def reducer_override(self, obj: Any) -> Any:
            if reduce_code is not None and type(obj) is types.CodeType:
                make, args = reduce_code(obj)
                return _named_code, (make, args, obj.co_filename)
            return super().reducer_override(obj)

    return Pickler


def _named_code(make: Any, args: Any, filename: str) -> types.CodeType:
    """A code object cloudpickle sent, with its own file name back (in the child)."""
    code: types.CodeType = make(*args)
    return code.replace(co_filename=filename)


def _child_env(dump: Path) -> dict[str, str]:
    env = dict(os.environ, **_CHILD_ENV)
    # The caller's flags reach the child's compiler; XLA's dump of the
    # compile replaces their own dump flags (which choose what is written,
    # not what is compiled): its buffer assignment reports, and on a refusal
    # for memory the module refused.
    dump_flags = [f"--xla_dump_to={dump}", "--xla_dump_hlo_as_text"]
    env["XLA_FLAGS"] = flags_with_dump(env.get("XLA_FLAGS", ""), dump_flags)
    if "LIBTPU_INIT_ARGS" in env:
        env["LIBTPU_INIT_ARGS"] = flags_with_dump(env["LIBTPU_INIT_ARGS"], [])
    # The child imports what this process can: the caller's modules (the
    # function, when pickled by name) and hlomem itself.
    paths = [p for p in sys.path if p] + env.get("PYTHONPATH", "").split(os.pathsep)
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    return env


def _is_out_of_memory(message: str) -> bool:
    return "RESOURCE_EXHAUSTED" in message or "out of memory" in message.lower()


def _compile_error(
    target: Target, fn_name: str, message: str, dump: Path, program: CompiledProgram
) -> Exception:
    """What to raise for the compiler's out-of-memory ``message``:
    OutOfBudget, with what the program needs at least, hlomem's check and
    analysis of the module XLA dumped before refusing (when it did) and the
    explanation of the message."""
    from . import OutOfBudget, _analyze_for, _check_for, explain

    refused = read_dump(dump) if dump.is_dir() else None
    try:
        explanation = explain(message, dump=dump if refused is not None else None)
        str(explanation)  # rendered now: the dump folder goes with the compile
    except HlomemError:
        explanation = None
    if explanation is None and refused is None:
        return HlomemError(f"the compile for {target.name} failed:\n{message}")

    # What the compiler refused: its own figure (libtpu: "HLO temporaries",
    # XLA stops at the first refusal) and the dumped module's, the larger,
    # is what the program needs at least.
    needed = [_needs_from(explanation)] if explanation is not None else []
    report = check = None
    if refused is not None:
        report = _analyze_for(refused.hlo_text, target)
        check = _check_for(refused.hlo_text, target, target.usable_bytes)
        str(check)
        needed.append(report.memory.device_bytes)
        program = program.with_bytes(report)
    verdict = Verdict(
        target,
        max((n for n in needed if n is not None), default=0),
        refused.xla.device_bytes if refused is not None and refused.xla is not None else None,
        at_least=True,
        program=program,
    )
    parts = [f"{target.name}'s compiler refused {fn_name} for memory: {verdict}"]
    if check is not None and report is not None:
        # One figure of what the program needs, the verdict's: the check's
        # own count of the module is one of the two it took the larger of,
        # so it is named as a count here, with where to read the rest.
        parts.append(
            "hlomem's check of the module XLA wrote before refusing counts "
            f"{gib(report.memory.device_bytes)} for it (the verdict above takes the larger of "
            "that and the compiler's own figure); print(e.result) for the check, "
            "print(e.report) for what holds its peak"
        )
    if explanation is not None:
        # Its dump folder is gone with the compile: the file's name says enough.
        parts.append(str(explanation).strip().replace(f"{dump}{os.sep}", ""))
    # The compiler's own words last.
    parts.append(f"The compiler said: {message.strip()}")
    return OutOfBudget(
        "\n\n".join(parts), check, explanation=explanation, report=report, verdict=verdict
    )


def _needs_from(explanation: Any) -> int | None:
    """What the out-of-memory message says the program needs, in bytes."""
    verdict = explanation.explanation.to_json().get("verdict", {})
    needs = verdict.get("needs") if isinstance(verdict, dict) else None
    return int(needs["bytes"]) if isinstance(needs, dict) and "bytes" in needs else None


# ---------------------------------------------------------------------------
# The child: python -m hlomem._deviceless REQUEST RESULT


def _child(request_file: str, result_file: str) -> None:
    # What is known before an error (the arguments jit kept, the versions,
    # the settings taken) goes back with it: a compile that fails after XLA
    # assigned buffers is still read.
    result: dict[str, Any] = {}
    try:
        with open(request_file, "rb") as f:
            settings = pickle.load(f)
            result["config_applied"] = _child_settings(settings)
            request = pickle.load(f)  # cloudpickle's output loads with pickle
        _child_compile(request, result)
    except Exception as e:  # noqa: BLE001 -- any refusal goes back to the parent as text
        result["error"] = f"{type(e).__name__}: {e}"
    Path(result_file).write_text(json.dumps(result, default=repr))


def _child_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The caller's JAX settings, then the tests' overrides; those set."""
    from ._forward import apply_config

    applied = apply_config(settings["config"])
    if settings["test_config"]:
        import jax

        for name, value in settings["test_config"].items():
            jax.config.update(name, value)
    return applied


def _child_compile(request: dict[str, Any], result: dict[str, Any]) -> None:
    import importlib.metadata as md

    import jax
    import numpy as np
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding
    from jax.sharding import PartitionSpec as _PartitionSpec

    # Untyped in some jax versions.
    PartitionSpec: Any = _PartitionSpec
    shape_dtype: Any = jax.ShapeDtypeStruct

    target: Target = request["target"]
    if target.platform == "tpu":
        devices = topologies.get_topology_desc(
            topology_name=target.topology, platform="tpu"
        ).devices
    else:
        assert target.target_config is not None
        devices = topologies.get_topology_desc(
            platform="cuda",
            topology_name="",
            target_config=Path(target.target_config).read_text(),
            topology=target.topology,
        ).devices

    jit_kwargs = dict(request["jit_kwargs"])
    mesh_axes = request["mesh"]
    if mesh_axes is None:
        placement: Any = SingleDeviceSharding(devices[0])
    else:
        shape = tuple(mesh_axes.values())
        count = math.prod(shape)
        if count > len(devices):
            raise ValueError(
                f"mesh {mesh_axes} needs {count} devices; {target.name} has {len(devices)}"
            )
        mesh = Mesh(np.array(devices[:count]).reshape(shape), tuple(mesh_axes))
        placement = NamedSharding(mesh, PartitionSpec())  # replicated, unless in_shardings say

        def on_mesh(tree: Any) -> Any:
            return jax.tree_util.tree_map(
                lambda spec: NamedSharding(mesh, spec),
                tree,
                is_leaf=lambda x: isinstance(x, PartitionSpec),
            )

        for key in ("in_shardings", "out_shardings"):
            if request[key] is not None:
                jit_kwargs[key] = on_mesh(request[key])

    def place(x: Any) -> Any:
        # Arguments follow in_shardings when given (a sharding on the
        # argument too would have to agree with it).
        if isinstance(x, jax.ShapeDtypeStruct) and "in_shardings" not in jit_kwargs:
            return shape_dtype(x.shape, x.dtype, sharding=placement)
        return x

    versions = {"jax": jax.__version__}
    for package in ("jaxlib", "libtpu", "jax-cuda12-plugin"):
        try:
            versions[package] = md.version(package)
        except md.PackageNotFoundError:
            pass
    result["versions"] = versions
    args = jax.tree_util.tree_map(place, request["args"])
    jitted = jax.jit(request["fn"], donate_argnums=request["donate_argnums"], **jit_kwargs)
    lowered = jitted.lower(*args)
    result["kept"] = _kept_arguments(lowered)
    compiled = lowered.compile()
    analysis = compiled.memory_analysis()
    result["hlo_text"] = compiled.as_text()
    result["memory"] = {f: int(getattr(analysis, f)) for f in _MEMORY_FIELDS}


def _kept_arguments(lowered: Any) -> list[int] | None:
    """The flat arguments jit kept as the module's parameters (it drops
    those the function does not use), from jax's lowering; ``None`` where
    this jax does not say."""
    compile_args = getattr(getattr(lowered, "_lowering", None), "compile_args", None)
    kept = compile_args.get("kept_var_idx") if isinstance(compile_args, dict) else None
    return sorted(int(i) for i in kept) if kept is not None else None


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
