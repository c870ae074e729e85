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

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Union

__all__ = [
    "GPU_TARGETS",
    "TARGET_NAMES",
    "Target",
    "TargetArg",
    "gib",
    "gpu_target",
    "resolve_target",
]

_GIB = 1 << 30
_TARGETS_DIR = Path(__file__).resolve().parent / "targets"

#: JAX's GPU allocator default (``XLA_PYTHON_CLIENT_MEM_FRACTION``).
_DEFAULT_GPU_FRACTION = 0.75
#: Partitions x hosts x GPUs per host, when a GPU target does not say.
_DEFAULT_GPU_TOPOLOGY = "1x1x4"
_GPU_TOPOLOGY = re.compile(r"\d+x\d+x\d+")


@dataclass(frozen=True)
class _Tpu:
    device: str
    hbm_gib: int  # one device's
    available_gib: float  # what libtpu lets a program use of it
    default_topology: str  # one libtpu accepts (``v5e:1x1`` is refused)


# One device's HBM, and what libtpu 0.0.42 compiles a program into: the
# "available HBM" of its refusals ("... exceeds available HBM (15.75G)",
# G meaning GiB), seen compiling a too-large program for each topology. The
# deviceless v4 topology has a device per TensorCore (8 on 2x2x1), each
# with half the chip's 32 GiB; the others one per chip.
_TPUS: dict[str, _Tpu] = {
    "v5e": _Tpu("v5e chip", 16, 15.75, "2x2"),
    "v6e": _Tpu("v6e chip", 32, 31.25, "2x2"),
    "v5p": _Tpu("v5p chip", 96, 95.74, "2x2x1"),
    "v4": _Tpu("v4 TensorCore", 16, 15.25, "2x2x1"),
}

#: The GPU targets shipped in ``targets/`` (XLA's own target configs; see
#: ``targets/README.md``): name -> (config file, the device in words).
GPU_TARGETS: dict[str, tuple[str, str]] = {
    "v100": ("v100.txtpb", "V100 16GB"),
    "a100-40": ("a100_sxm_40.txtpb", "A100 40GB"),
    "a100-80": ("a100_sxm_80.txtpb", "A100 80GB"),
    "h100": ("h100.txtpb", "H100"),
    "h100-pcie": ("h100_pcie.txtpb", "H100 PCIe"),
    "h200": ("h200.txtpb", "H200"),
    "b200": ("b200.txtpb", "B200"),
    "gb200": ("gb200.txtpb", "GB200 GPU"),
    "b300": ("b300.txtpb", "B300"),
    "gb300": ("gb300.txtpb", "GB300 GPU"),
    "rtx-pro-6000": ("rtx6000pro.txtpb", "RTX PRO 6000"),
}

#: The names :func:`compile_for` accepts (a name may add ``:TOPOLOGY``).
TARGET_NAMES: tuple[str, ...] = tuple(
    [f"tpu-{g}:{t.default_topology}" for g, t in _TPUS.items()] + list(GPU_TARGETS)
)


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
    if base.startswith("tpu-") and base[4:] in _TPUS:
        generation = base[4:]
        tpu = _TPUS[generation]
        topology = topology or tpu.default_topology
        return Target(
            name=f"tpu-{generation}:{topology}",
            platform="tpu",
            device=tpu.device,
            memory_bytes=tpu.hbm_gib * _GIB,
            usable_bytes=int(tpu.available_gib * _GIB),
            usable_note=f"libtpu lets a program use {gib(int(tpu.available_gib * _GIB))} of it",
            topology=f"{generation}:{topology}",
            extra="tpu",
            backend_module="libtpu",
        )
    if base in GPU_TARGETS:
        config_file, device = GPU_TARGETS[base]
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
        f"unknown target {target!r}; hlomem knows {', '.join(TARGET_NAMES)}, "
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
    topology = topology or _DEFAULT_GPU_TOPOLOGY
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
        return _DEFAULT_GPU_FRACTION
    try:
        fraction = float(raw)
    except ValueError:
        raise ValueError(f"XLA_PYTHON_CLIENT_MEM_FRACTION={raw!r} is not a number") from None
    if not 0 < fraction <= 1:
        raise ValueError(f"XLA_PYTHON_CLIENT_MEM_FRACTION={raw!r} is not in (0, 1]")
    return fraction
