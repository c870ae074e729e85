"""The reference of the largest_fit tests on TPU and GPU: a function compiled
deviceless for a target at several sizes, directly (not through hlomem),
printing XLA's own numbers for each size as JSON: ``memory_analysis()`` and
the device's memory space total from the buffer assignment report of XLA's
dump, or the compiler's refusal.

Run in a child process (libtpu, the CUDA plugin and XLA's flags stay out of
the test process)::

    JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 ALLOW_MULTIPLE_LIBTPU_LOAD=1 \\
        python direct_fit.py DUMP_DIR MODULE:FN MODULE:MAKE_ARGS tpu v5e:2x2 "" DONATE N...
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any


def _load(spec: str) -> Any:
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def _hbm(report: Path) -> int:
    match = re.search(
        r"^Memory Space: default \(color=\d+\)\nTotal bytes: (\d+)",
        report.read_text(),
        re.MULTILINE,
    )
    assert match is not None, report
    return int(match.group(1))


def main(
    dump: str,
    fn: str,
    make_args: str,
    platform: str,
    topology: str,
    config: str,
    donate: str,
    *sizes: str,
) -> None:
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={dump} --xla_dump_hlo_as_text"
    )
    import jax
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    if platform == "tpu":
        devices = topologies.get_topology_desc(topology_name=topology, platform="tpu").devices
    else:
        devices = topologies.get_topology_desc(
            platform="cuda",
            topology_name="",
            target_config=Path(config).read_text(),
            topology=topology,
        ).devices
    on_device = SingleDeviceSharding(devices[0])
    function, arguments = _load(fn), _load(make_args)
    out = {}
    for size in sizes:
        n = int(size)
        before = set(Path(dump).glob("*after_optimizations-memory-usage-report.txt"))
        args = jax.tree_util.tree_map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=on_device), arguments(n)
        )
        result: dict[str, Any] = {}
        try:
            compiled = (
                jax.jit(function, donate_argnums=tuple(json.loads(donate))).lower(*args).compile()
            )
            analysis = compiled.memory_analysis()
            result["memory_analysis"] = {
                f: int(getattr(analysis, f))
                for f in (
                    "argument_size_in_bytes",
                    "output_size_in_bytes",
                    "alias_size_in_bytes",
                    "temp_size_in_bytes",
                )
            }
        except Exception as e:  # noqa: BLE001 -- a refusal is a result here
            result["error"] = str(e)
        new = set(Path(dump).glob("*after_optimizations-memory-usage-report.txt")) - before
        if new:
            result["hbm"] = _hbm(max(new))
        out[n] = result
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
