"""The devices :func:`hlomem.compile_for` compiles for, and how much of their
memory a program may use there.

A target is named like ``"tpu-v5e:2x2"`` (a TPU generation and, after the
colon, the topology libtpu is asked for) or ``"h100"`` (a GPU, described to
XLA by a target config shipped in ``targets/``). Each knows one device's
memory and what is usable of it:

- TPU: the chip's HBM. (libtpu itself keeps a little back: a v5e compile is
  refused above 15.75G; that refusal is raised by :func:`compile_for`.)
- GPU: JAX's allocator takes ``XLA_PYTHON_CLIENT_MEM_FRACTION`` of the memory
  (0.75 unless set), so a program fits when it fits in that share.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TARGET_NAMES", "Target", "gib", "resolve_target"]

_GIB = 1 << 30
_TARGETS_DIR = Path(__file__).resolve().parent / "targets"

#: JAX's GPU allocator default (``XLA_PYTHON_CLIENT_MEM_FRACTION``).
_DEFAULT_GPU_FRACTION = 0.75


@dataclass(frozen=True)
class _Tpu:
    hbm_gib: int
    default_topology: str  # one libtpu accepts (``v5e:1x1`` is refused)


@dataclass(frozen=True)
class _Gpu:
    device: str
    memory_gib: int
    config_file: str  # in targets/
    default_topology: str  # partitions x hosts x GPUs per host


# HBM per chip, from each generation's public specification.
_TPUS: dict[str, _Tpu] = {
    "v5e": _Tpu(16, "2x2"),
    "v6e": _Tpu(32, "2x2"),
    "v5p": _Tpu(95, "2x2x1"),
    "v4": _Tpu(32, "2x2x1"),
}

_GPUS: dict[str, _Gpu] = {
    "h100": _Gpu("H100", 80, "h100.txtpb", "1x1x4"),
}

#: The names :func:`compile_for` accepts (a TPU name may add ``:TOPOLOGY``).
TARGET_NAMES: tuple[str, ...] = tuple(
    [f"tpu-{g}:{t.default_topology}" for g, t in _TPUS.items()] + list(_GPUS)
)


def gib(n: int) -> str:
    """``n`` bytes for people: ``"11.3 GiB"``, ``"16 GiB"``; under 1 GiB in
    MiB (``"6.2 MiB"``), so that a small program does not read as 0.0 GiB."""
    if abs(n) < _GIB:
        value, unit = n / (1 << 20), "MiB"
    else:
        value, unit = n / _GIB, "GiB"
    return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"


@dataclass(frozen=True)
class Target:
    """A device to compile for without having it."""

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
    #: Why ``usable_bytes`` is less than ``memory_bytes``, or ``""``.
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


def resolve_target(name: str) -> Target:
    """The :class:`Target` called ``name`` (see :data:`TARGET_NAMES`)."""
    if not isinstance(name, str):
        raise TypeError(f"target is a name like 'tpu-v5e:2x2' or 'h100', not {name!r}")
    key = name.strip().lower()
    base, _, topology = key.partition(":")
    if base.startswith("tpu-") and base[4:] in _TPUS:
        generation = base[4:]
        tpu = _TPUS[generation]
        topology = topology or tpu.default_topology
        return Target(
            name=f"tpu-{generation}:{topology}",
            platform="tpu",
            device=f"{generation} chip",
            memory_bytes=tpu.hbm_gib * _GIB,
            usable_bytes=tpu.hbm_gib * _GIB,
            usable_note="",
            topology=f"{generation}:{topology}",
            extra="tpu",
            backend_module="libtpu",
        )
    if base in _GPUS:
        gpu = _GPUS[base]
        fraction = _gpu_fraction()
        memory = gpu.memory_gib * _GIB
        return Target(
            name=f"{base}:{topology}" if topology else base,
            platform="cuda",
            device=gpu.device,
            memory_bytes=memory,
            usable_bytes=int(memory * fraction),
            usable_note=f"JAX's allocator takes XLA_PYTHON_CLIENT_MEM_FRACTION={fraction:g} of it",
            topology=topology or gpu.default_topology,
            extra="cuda12",
            backend_module="jax_cuda12_plugin",
            target_config=str(_TARGETS_DIR / gpu.config_file),
        )
    raise ValueError(f"unknown target {name!r}; hlomem knows {', '.join(TARGET_NAMES)}")


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
