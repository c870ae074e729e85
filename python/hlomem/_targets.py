"""The devices :func:`hlomem.compile_for` compiles for, and how much of their
memory a program may use there.

A target is named like ``"tpu-v5e:2x2"`` (a TPU generation and, after the
colon, the topology libtpu is asked for) or ``"h100"`` (a GPU, described to
XLA by one of the target configs from XLA's source shipped in ``targets/``),
or is the path of a GPU target config of your own (``"l40s.txtpb"``, or
:func:`gpu_target` to set its memory or name). Each knows one device's
memory and what is usable of it:

- TPU: the chip's HBM, of which libtpu lets a program use a little less (a
  v5e's 16 GiB: 15.75 GiB; it refuses a larger program while compiling,
  which :func:`compile_for` raises). On v4 the deviceless topology's
  devices are TensorCores, each with half the chip's HBM.
- GPU: the config's ``device_memory_size`` (what the driver reports, a
  little under the marketed size: an H100's is 79.1 GiB), of which JAX's
  allocator takes ``XLA_PYTHON_CLIENT_MEM_FRACTION`` (0.75 unless set), so
  a program fits when it fits in that share.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from ._binary import failure, run

# GPU_TARGETS and TARGET_NAMES are read lazily (``__getattr__`` below).
__all__ = [
    "Target",
    "TargetArg",
    "gib",
    "gpu_target",
    "resolve_target",
]

_GIB = 1 << 30
_TARGETS_DIR = Path(__file__).resolve().parent / "targets"
_GPU_TOPOLOGY = re.compile(r"\d+x\d+x\d+")


@functools.cache
def _catalog() -> dict[str, Any]:
    """The devices and their memory, as the binary lists them (``hlomem
    targets --format json``: Rust holds the one table), read once."""
    process = run(["targets", "--format", "json"])
    if process.returncode != 0:
        raise failure(process)
    catalog: dict[str, Any] = json.loads(process.stdout)
    return catalog


def _tpus() -> dict[str, dict[str, Any]]:
    """The TPU generations by name (``v5e``)."""
    return {t["generation"]: t for t in _catalog()["tpu"]}


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
    """``n`` bytes for people, always with two decimals, as XLA prints
    sizes: ``"11.30 GiB"``, ``"16.00 GiB"``; under 1 GiB in MiB
    (``"6.20 MiB"``), so that a small program does not read as 0.00 GiB,
    unless ``small_in_mib`` is false (a difference of two sizes in GiB:
    ``"over by 0.20 GiB"``). Every figure of a verdict goes through this
    one rounding."""
    if abs(n) < _GIB and small_in_mib:
        return f"{n / (1 << 20):.2f} MiB"
    return f"{n / _GIB:.2f} GiB"


@dataclass(frozen=True)
class Target:
    """A device to compile for without having it (:func:`resolve_target`
    and :func:`gpu_target` make them; :func:`compile_for` takes one)."""

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

    @property
    def hlomem_options(self) -> tuple[str, ...]:
        """What tells the ``hlomem`` command this target: on TPU the chip
        (``--tpu v6e``), which sizes tuple tables; the HLO text does not say."""
        if self.platform == "tpu":
            return ("--tpu", self.topology.partition(":")[0])
        return ()

    @property
    def memory_word(self) -> str:
        """What the device's memory is called: ``HBM`` on TPU, ``memory`` on GPU."""
        return "HBM" if self.platform == "tpu" else "memory"

    @property
    def share(self) -> str:
        """What a program may use of one device, in words, before "is":
        ``"JAX's share of an H100"``, ``"what libtpu lets a program use of a v5e chip"``."""
        if self.platform == "tpu":
            return f"what libtpu lets a program use of {self.article} {self.device}"
        return f"JAX's share of {self.article} {self.device}"

    @property
    def article(self) -> str:
        """``"a"`` or ``"an"`` before :attr:`device` (``an H100``, ``a v5e chip``)."""
        return "an" if self.device[:1] in "AEFHILMNORSX" else "a"


#: What :func:`compile_for` takes as a target: a name, a config's path, or a
#: :class:`Target`.
TargetArg = Union[str, "os.PathLike[str]", Target]

_CONFIG_SUFFIXES = (".txtpb", ".pbtxt", ".textproto", ".txt")


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
    key = target.strip().lower()
    base, _, topology = key.partition(":")
    tpus = _tpus()
    if base.startswith("tpu-") and base[4:] in tpus:
        generation = base[4:]
        tpu = tpus[generation]
        topology = topology or tpu["default_topology"]
        return Target(
            name=f"tpu-{generation}:{topology}",
            platform="tpu",
            device=tpu["device"],
            memory_bytes=tpu["memory_bytes"],
            usable_bytes=tpu["usable_bytes"],
            usable_note=tpu["usable_note"],
            topology=f"{generation}:{topology}",
            extra="tpu",
            backend_module="libtpu",
        )
    gpus = _gpu_targets()
    if base in gpus:
        config_file, device = gpus[base]
        return gpu_target(
            _TARGETS_DIR / config_file,
            name=f"{base}:{topology}" if topology else base,
            device=device,
            topology=topology or None,
        )
    path, _, topology = target.rpartition(":")
    if not (path and _GPU_TOPOLOGY.fullmatch(topology)):
        path, topology = target, ""
    if path.endswith(_CONFIG_SUFFIXES) or os.sep in path or os.path.isfile(path):
        return gpu_target(path, topology=topology or None)
    raise ValueError(
        f"unknown target {target!r}; hlomem knows {', '.join(_target_names())}, "
        "or give the path of a GPU target config (.txtpb)"
    )


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

    The file is read here for its memory; whether the CUDA plugin accepts it
    shows when :func:`compile_for` compiles.
    """
    path = Path(config).expanduser()
    try:
        text = path.read_text()
    except OSError as e:
        raise FileNotFoundError(f"cannot read the GPU target config {str(config)!r}: {e}") from e
    if "gpu_device_info" not in text:
        raise ValueError(f"{str(config)!r} is not a GpuTargetConfigProto (no gpu_device_info)")
    if topology is not None and not _GPU_TOPOLOGY.fullmatch(topology):
        raise ValueError(f"a GPU topology is PARTITIONSxHOSTSxGPUS, like 1x1x8, not {topology!r}")
    if memory_gib is not None:
        if memory_gib <= 0:
            raise ValueError(f"memory_gib must be positive, not {memory_gib}")
        memory = int(memory_gib * _GIB)
    else:
        found = re.search(r"^\s*device_memory_size:\s*(\d+)", text, re.MULTILINE)
        if found is None:
            raise ValueError(
                f"{str(config)!r} has no device_memory_size: give memory_gib= (one device's memory)"
            )
        memory = int(found.group(1))
    if device is None:
        described = re.search(r'^device_description_str:\s*"([^"]*)"', text, re.MULTILINE)
        device = described.group(1).removeprefix("NVIDIA ") if described else path.stem
    fraction = _gpu_fraction()
    topology = topology or _catalog()["gpu_default_topology"]
    usable = int(memory * fraction)
    return Target(
        name=name or path.stem,
        platform="cuda",
        device=device,
        memory_bytes=memory,
        usable_bytes=usable,
        usable_note=(f"JAX's allocator takes XLA_PYTHON_CLIENT_MEM_FRACTION={fraction:g} of it"),
        topology=topology,
        extra="cuda12",
        backend_module="jax_cuda12_plugin",
        target_config=str(path.resolve()),
    )


def _gpu_fraction() -> float:
    """The share of a GPU's memory JAX's allocator will use in this environment."""
    raw = os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION")
    if not raw:
        return float(_catalog()["gpu_default_fraction"])
    try:
        fraction = float(raw)
    except ValueError:
        raise ValueError(f"XLA_PYTHON_CLIENT_MEM_FRACTION={raw!r} is not a number") from None
    if not 0 < fraction <= 1:
        raise ValueError(f"XLA_PYTHON_CLIENT_MEM_FRACTION={raw!r} is not in (0, 1]")
    return fraction
