"""What a ``jax.stages.Compiled`` knows of the devices it was compiled for,
which its HLO text does not say: the devices themselves (for their memory
limit, :func:`hlomem.assert_fits`'s default budget) and the TPU chip (which
sizes tuple tables: 512 bytes on v5e, 32 on v6e and v5p).
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from ._targets import device_kinds

__all__ = ["chip_options", "devices_of", "libtpu_options"]


def devices_of(compiled: Any) -> list[Any]:
    """The devices a ``jax.stages.Compiled`` runs on, from its shardings
    (or its executable's devices when it has no arguments or outputs)."""
    found: dict[Any, None] = {}
    for attribute in ("input_shardings", "output_shardings"):
        try:
            shardings = getattr(compiled, attribute)
        except Exception:  # noqa: BLE001, S112 - not a jax Compiled, or one that cannot say
            continue
        stack = [shardings]
        while stack:
            item = stack.pop()
            if isinstance(item, (list, tuple)):
                stack.extend(item)
            elif isinstance(item, dict):
                stack.extend(item.values())
            else:
                for device in getattr(item, "device_set", ()) or ():
                    found[device] = None
    if not found:
        try:
            for device in compiled.runtime_executable().local_devices():
                found[device] = None
        except Exception:  # noqa: BLE001, S110 - an executable that cannot say: no devices
            pass
    return list(found)


def chip_options(compiled: Any) -> tuple[str, ...]:
    """What tells the ``hlomem`` command the TPU chip ``compiled`` was
    compiled for (``--tpu v6e``), from its devices' ``device_kind``. Empty
    when it is not a TPU program, or its chip is not one hlomem tells apart:
    hlomem then assumes one and marks what depends on it "about"."""
    devices = devices_of(compiled)
    if not devices:
        return ()
    # JAX's device_kind of each generation is the binary's (hlomem targets).
    kinds = device_kinds()
    chips = {kinds.get(getattr(d, "device_kind", "")) for d in devices}
    if len(chips) == 1 and None not in chips:
        return ("--tpu", str(chips.pop()), *libtpu_options())
    return ()


def libtpu_options() -> tuple[str, ...]:
    """What tells the ``hlomem`` command the libtpu release that compiled a
    TPU program of this process: the one installed here (``--libtpu
    0.0.52``). The same HLO text may take other HBM under libtpu 0.0.42 and
    0.0.52, and a text does not always show which; empty without libtpu."""
    for distribution in ("libtpu", "libtpu-nightly"):
        try:
            return ("--libtpu", importlib.metadata.version(distribution))
        except importlib.metadata.PackageNotFoundError:
            continue
    return ()
