"""The devices :func:`hlomem.compile_for` compiles for, and how much of their
memory a program may use there.

A target is named like ``"tpu-v5e:2x2"`` (a TPU generation and, after the
colon, the topology libtpu is asked for) or ``"h100"`` (a GPU, described to
XLA by one of the target configs from XLA's source shipped in ``targets/``),
or is the path of a GPU target config of your own (``"l40s.txtpb"``, or
:func:`gpu_target` to set its memory or name). Each knows one device's
memory and what is usable of it:

- TPU: the chip's HBM, of which libtpu lets a program use a little less (a
  v5e's 16.00GiB: 15.75GiB; it refuses a larger program while compiling,
  which :func:`compile_for` raises). On v4 the deviceless topology's
  devices are TensorCores, each with half the chip's HBM.
- GPU: the config's ``device_memory_size`` (what the driver reports, a
  little under the marketed size: an H100's is 79.11GiB), of which JAX's
  allocator takes ``XLA_PYTHON_CLIENT_MEM_FRACTION`` (0.75 unless set), so
  a program fits when it fits in that share.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from ._binary import failure, run

# GPU_TARGETS and TARGET_NAMES are read lazily (``__getattr__`` below).
__all__ = [
    "Target",
    "TargetArg",
    "device_kinds",
    "gib",
    "gpu_target",
    "resolve_target",
]

_GIB = 1 << 30
_TARGETS_DIR = Path(__file__).resolve().parent / "targets"


@functools.cache
def _catalog() -> dict[str, Any]:
    """The devices and their memory, as the binary lists them (``hlomem
    targets --format json``: Rust holds the one table), read once."""
    process = run(["targets", "--format", "json"])
    if process.returncode != 0:
        raise failure(process)
    catalog: dict[str, Any] = json.loads(process.stdout)
    return catalog


def device_kinds() -> dict[str, str]:
    """JAX's ``device_kind`` of each TPU generation hlomem tells apart
    (``"TPU v5 lite"``) -> the generation (``"v5e"``)."""
    return {kind: t["generation"] for t in _catalog()["tpu"] for kind in t["device_kinds"]}


def _gpu_targets() -> dict[str, tuple[str, str]]:
    return {g["name"]: (g["config"], g["device"]) for g in _catalog()["gpu"]}


def _target_names() -> tuple[str, ...]:
    return tuple([t["name"] for t in _catalog()["tpu"]] + [g["name"] for g in _catalog()["gpu"]])


def __getattr__(name: str) -> Any:
    # The tables are the binary's, read when first asked for, so that
    # importing hlomem does not run it.
    if name == "GPU_TARGETS":
        #: The GPU targets shipped in ``targets/`` (XLA's own target configs;
        #: see ``targets/README.md``): name -> (config file, the device in words).
        return _gpu_targets()
    if name == "TARGET_NAMES":
        #: The names :func:`compile_for` accepts (a name may add ``:TOPOLOGY``).
        return _target_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def gib(n: int, *, small_in_mib: bool = True) -> str:
    """``n`` bytes for people, always with two decimals, as a verdict
    prints its figures: ``"11.30GiB"``, ``"16.00GiB"``; under 1 GiB in MiB
    (``"6.20MiB"``), so that a small program does not read as 0.00GiB,
    unless ``small_in_mib`` is false (a difference of two sizes in GiB:
    ``"over by 0.20GiB"``).

    The binary's ``units::two_decimals`` is the one definition (a verdict's
    words come from it); this copy formats the Python-only views (what was
    compiled, curves, tables, charts) without a process per number, and
    ``tests/python/test_units.py`` holds it to the binary's output."""
    if abs(n) < _GIB and small_in_mib:
        return f"{n / (1 << 20):.2f}MiB"
    return f"{n / _GIB:.2f}GiB"


@dataclass(frozen=True)
class Target:
    """A device to compile for without having it (:func:`resolve_target`
    and :func:`gpu_target` make them, from the binary's ``hlomem targets
    TARGET``; :func:`compile_for` takes one)."""

    #: As given to :func:`compile_for`, topology included: ``"tpu-v5e:2x2"``.
    name: str
    #: JAX's platform name: ``"tpu"`` or ``"cuda"``.
    platform: str
    #: One device in words: ``"v5e chip"``, ``"H100"``.
    device: str
    #: One device's memory (HBM), in bytes.
    memory_bytes: int
    #: What a program may use of it, in bytes: the default budget of
    #: :func:`hlomem.assert_fits`.
    usable_bytes: int
    #: Why ``usable_bytes`` is less than ``memory_bytes``, and how much it is.
    usable_note: str
    #: The topology handed to ``jax.experimental.topologies.get_topology_desc``.
    topology: str
    #: The extra that installs this target's compiler: ``pip install "hlomem[EXTRA]"``.
    extra: str
    #: The module whose presence means that compiler is installed.
    backend_module: str
    #: GPU: the GpuTargetConfigProto text file describing the device.
    target_config: str | None = None
    #: GPU: the share of its memory JAX's allocator takes
    #: (``XLA_PYTHON_CLIENT_MEM_FRACTION`` when the target was made).
    memory_fraction: float | None = None

    @property
    def hlomem_options(self) -> tuple[str, ...]:
        """What tells the ``hlomem`` command this target: on TPU the chip
        (``--tpu v6e``), which sizes tuple tables, and the libtpu installed
        here, which compiled for it (``--libtpu 0.0.52``); the HLO text does
        not always say."""
        if self.platform == "tpu":
            from ._devices import libtpu_options

            return ("--tpu", self.topology.partition(":")[0], *libtpu_options())
        return ()

    @property
    def target_args(self) -> tuple[str, ...]:
        """What names this target to ``hlomem targets`` and ``hlomem fits``:
        the target (``tpu-v5e:2x2``, a config's path with its topology), and
        for a GPU its name, device, memory and allocator share as they are
        here."""
        if self.platform == "tpu":
            return (f"tpu-{self.topology}",)
        options = ["--name", self.name, "--device", self.device]
        options += ["--memory", f"{self.memory_bytes}B"]
        if self.memory_fraction is not None:
            options += ["--memory-fraction", repr(self.memory_fraction)]
        return (f"{self.target_config}:{self.topology}", *options)

    @functools.cached_property
    def _words(self) -> dict[str, str]:
        # The binary's words for this target (already there when it resolved it).
        words: dict[str, str] = _resolved(self.target_args)["words"]
        return words

    @property
    def memory_word(self) -> str:
        """What the device's memory is called: ``HBM`` on TPU, ``memory`` on GPU."""
        return self._words["memory_word"]

    @property
    def share(self) -> str:
        """What a program may use of one device, in words, before "is":
        ``"JAX's share of an H100"``, ``"what libtpu lets a program use of a v5e chip"``."""
        return self._words["share"]

    @property
    def article(self) -> str:
        """``"a"`` or ``"an"`` before :attr:`device` (``an H100``, ``a v5e chip``)."""
        return self._words["article"]


#: What :func:`compile_for` takes as a target: a name, a config's path, or a
#: :class:`Target`.
TargetArg = Union[str, "os.PathLike[str]", Target]

#: Each platform's extra and the module that shows it installed.
_EXTRAS = {"tpu": ("tpu", "libtpu"), "cuda": ("cuda12", "jax_cuda12_plugin")}
#: The binary's error for a config it cannot read (raised as FileNotFoundError).
_UNREADABLE = "cannot read the GPU target config"


def _resolved(args: Sequence[str]) -> dict[str, Any]:
    """``hlomem targets ARGS --format json``'s target; its refusal as
    ValueError (FileNotFoundError for a config it cannot read)."""
    process = run(["targets", *args, "--format", "json"])
    if process.returncode == 2 and process.stderr:
        message = process.stderr.decode("utf-8", "replace").strip().removeprefix("error: ")
        raise (FileNotFoundError if message.startswith(_UNREADABLE) else ValueError)(message)
    if process.returncode != 0:
        raise failure(process)
    target: dict[str, Any] = json.loads(process.stdout)["target"]
    return target


def _target(args: Sequence[str]) -> Target:
    """The :class:`Target` the binary resolves ``args`` to."""
    t = _resolved(args)
    extra, module = _EXTRAS[t["platform"]]
    config = t.get("config_path")
    if config is None and t.get("shipped_config"):
        config = str((_TARGETS_DIR / t["shipped_config"]).resolve())
    target = Target(
        name=t["name"],
        platform=t["platform"],
        device=t["device"],
        memory_bytes=t["memory_bytes"],
        usable_bytes=t["usable_bytes"],
        usable_note=t["usable_note"],
        topology=t["topology"],
        extra=extra,
        backend_module=module,
        target_config=config,
        memory_fraction=t["usable"].get("fraction"),
    )
    target.__dict__["_words"] = t["words"]  # the cached_property's value, known
    return target


def resolve_target(target: TargetArg) -> Target:
    """The :class:`Target` for ``target``: a :class:`Target` as it is; a name
    of :data:`TARGET_NAMES` (a TPU's or GPU's may add ``:TOPOLOGY``); or the
    path of a GPU target config (``str`` or ``pathlib.Path``; a ``str`` may
    add ``:PxHxG``), read by :func:`gpu_target`."""
    if isinstance(target, Target):
        return target
    if isinstance(target, os.PathLike):
        return gpu_target(target)
    if not isinstance(target, str):
        raise TypeError(
            "target is a name like 'tpu-v5e:2x2' or 'h100', the path of a GPU target config, "
            f"or a hlomem.Target, not {target!r}"
        )
    # The binary knows the names, reads the config, and applies
    # XLA_PYTHON_CLIENT_MEM_FRACTION (it runs with this process's environment).
    return _target([target])


def gpu_target(
    config: str | os.PathLike[str],
    *,
    memory_gib: float | None = None,
    name: str | None = None,
    device: str | None = None,
    topology: str | None = None,
) -> Target:
    """A GPU :class:`Target` described by a ``GpuTargetConfigProto`` text file
    (``stream_executor.GpuTargetConfigProto``: XLA's source has them under
    ``xla/backends/gpu/target_config/specs/``; hlomem ships the common ones,
    see :data:`TARGET_NAMES`).

    One device's memory is ``memory_gib`` when given, else the config's
    ``device_memory_size``; JAX's allocator takes
    ``XLA_PYTHON_CLIENT_MEM_FRACTION`` of it. ``name`` (default: the file's
    stem) names the target in messages, ``device`` the device in words
    (default: the config's ``device_description_str``). ``topology`` is
    partitions x hosts x GPUs per host (default ``1x1x4``).

    The binary reads the file (``hlomem targets CONFIG``) for its memory;
    whether the CUDA plugin accepts it shows when :func:`compile_for` compiles.
    """
    path = Path(config).expanduser()
    try:
        path.open("rb").close()
    except OSError as e:
        raise FileNotFoundError(f"cannot read the GPU target config {str(config)!r}: {e}") from e
    options: list[str] = []
    if memory_gib is not None:
        if memory_gib <= 0:
            raise ValueError(f"memory_gib must be positive, not {memory_gib}")
        options += ["--memory", f"{int(memory_gib * _GIB)}B"]
    for flag, value in (("--name", name), ("--device", device), ("--topology", topology)):
        if value is not None:
            options += [flag, value]
    return _target([str(path), *options])
