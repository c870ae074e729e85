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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._binary import HlomemError
from ._targets import Target, TargetArg, resolve_target
from ._verdict import Verdict
from ._xla_dump import XlaTotals, read_dump

__all__ = [
    "BackendNotInstalled",
    "DevicelessCompiled",
    "MemoryAnalysis",
    "compile_for",
]

# What libtpu needs to compile without a TPU or its metadata server.
_CHILD_ENV = {"JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}

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
    """

    def __init__(
        self,
        target: Target,
        hlo_text: str,
        memory: MemoryAnalysis,
        versions: dict[str, str],
        xla_totals: XlaTotals | None = None,
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

    def as_text(self) -> str:
        """The optimized HLO module that XLA's buffer assignment ran on (the
        dump's ``after_optimizations.txt``), which hlomem reads. Off TPU it
        is ``jax.stages.Compiled.as_text()``; on TPU that text is a later
        stage, whose memory is not the buffer assignment's."""
        return self._hlo_text

    def memory_analysis(self) -> MemoryAnalysis:
        """XLA's ``memory_analysis()`` of the compile."""
        return self._memory

    def __repr__(self) -> str:
        m = self._memory
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
    ``fn`` must be picklable there. Prints a line on standard error when it
    starts and ends unless ``progress=False``: a large TPU compile takes
    minutes.

    The child also has XLA write its dump (``--xla_dump_to``, into a
    temporary folder): XLA's buffer assignment totals come from it
    (:attr:`DevicelessCompiled.xla_totals`), and, when the compiler refuses,
    the module it refused.

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
    request = {
        "target": resolved,
        "fn": fn,
        "args": _abstract(args),
        "mesh": dict(mesh) if mesh is not None else None,
        "in_shardings": in_shardings,
        "out_shardings": out_shardings,
        "donate_argnums": donate_argnums,
        "jit_kwargs": jit_kwargs,
    }
    name = getattr(fn, "__name__", type(fn).__name__)
    with tempfile.TemporaryDirectory(prefix="hlomem-compile-") as folder:
        request_file = Path(folder, "request.pkl")
        result_file = Path(folder, "result.json")
        request_file.write_bytes(_dumps(request))
        if progress:
            print(
                f"hlomem: compiling {name} for {resolved.name} (no device needed)...",
                file=sys.stderr,
            )
        dump = Path(folder, "dump")
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
        if "error" in result:
            # Read while the dump folder is still there.
            raise _compile_error(resolved, name, result["error"], dump)
        hlo_text = result["hlo_text"]
        dumped = read_dump(dump, _module_name(hlo_text)) if dump.is_dir() else None
    return DevicelessCompiled(
        resolved,
        # The module XLA's buffer assignment ran on. On TPU, jax's as_text()
        # is a later stage (async slices added, buffers placed anew) whose
        # memory is not the buffer assignment's: an MLP step's HBM reads
        # 6.2 MiB from it and 2.2 MiB, XLA's own figure, from the dump.
        dumped.hlo_text if dumped is not None else hlo_text,
        MemoryAnalysis(**result["memory"]),
        result["versions"],
        dumped.xla if dumped is not None else None,
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
    # XLA's dump of the compile, after the caller's own flags (the last of a
    # flag given twice wins): its buffer assignment reports, and on a refusal
    # for memory the module refused.
    flags = env.get("XLA_FLAGS", "")
    env["XLA_FLAGS"] = f"{flags} --xla_dump_to={dump} --xla_dump_hlo_as_text".strip()
    # The child imports what this process can: the caller's modules (the
    # function, when pickled by name) and hlomem itself.
    paths = [p for p in sys.path if p] + env.get("PYTHONPATH", "").split(os.pathsep)
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    return env


def _compile_error(target: Target, fn_name: str, message: str, dump: Path) -> Exception:
    """What to raise for the compiler's error ``message``: OutOfBudget when it
    is an out-of-memory refusal, with what the program needs at least,
    hlomem's check and analysis of the module XLA dumped before refusing
    (when it did) and the explanation of the message."""
    from . import OutOfBudget, _analyze_for, _check_for, explain

    if "RESOURCE_EXHAUSTED" not in message and "out of memory" not in message.lower():
        return HlomemError(f"the compile for {target.name} failed:\n{message}")
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
    verdict = Verdict(
        target,
        max((n for n in needed if n is not None), default=0),
        refused.xla.device_bytes if refused is not None and refused.xla is not None else None,
        at_least=True,
    )
    parts = [f"{target.name}'s compiler refused {fn_name} for memory: it {verdict}"]
    if check is not None:
        parts.append(
            "hlomem's check of the module XLA wrote before refusing "
            "(print(e.report) shows what holds its peak):\n" + str(check).strip()
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
    with open(request_file, "rb") as f:
        request = pickle.load(f)  # cloudpickle's output loads with pickle
    try:
        result = _child_compile(request)
    except Exception as e:  # noqa: BLE001 -- any refusal goes back to the parent as text
        result = {"error": f"{type(e).__name__}: {e}"}
    Path(result_file).write_text(json.dumps(result))


def _child_compile(request: dict[str, Any]) -> dict[str, Any]:
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

    args = jax.tree_util.tree_map(place, request["args"])
    jitted = jax.jit(request["fn"], donate_argnums=request["donate_argnums"], **jit_kwargs)
    compiled = jitted.lower(*args).compile()
    analysis = compiled.memory_analysis()
    versions = {"jax": jax.__version__}
    for package in ("jaxlib", "libtpu", "jax-cuda12-plugin"):
        try:
            versions[package] = md.version(package)
        except md.PackageNotFoundError:
            pass
    return {
        "hlo_text": compiled.as_text(),
        "memory": {f: int(getattr(analysis, f)) for f in _MEMORY_FIELDS},
        "versions": versions,
    }


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2])
