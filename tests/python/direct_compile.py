"""The reference the compile_for tests compare with: a program of
``mlp.py`` compiled deviceless for a target by the recipe of
``samples/gen_samples.py`` (written out here, not through hlomem), with
XLA's dump, printing XLA's own numbers as JSON: ``memory_analysis()`` and,
from the dump's reports, "Total bytes used" and each memory space's total
(or, when the compiler refuses, its error and the refused module's totals).

Run in a child process (libtpu and XLA flags stay out of the test process).
The configuration is the environment's, as JAX and XLA read it: ``JAX_*``
variables (``JAX_ENABLE_X64=1``) and ``XLA_FLAGS``, to which the dump's
flags are added::

    JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 ALLOW_MULTIPLE_LIBTPU_LOAD=1 \\
        python direct_compile.py DUMP_DIR step tpu v5e:2x2
    ... python direct_compile.py DUMP_DIR step cuda 1x1x4 CONFIG.txtpb
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import mlp

FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "alias_size_in_bytes",
    "temp_size_in_bytes",
)


def xla_reports(dump: Path) -> dict[str, Any]:
    """XLA's totals from the buffer assignment reports of the dump's one
    entry module (the last ``*after_optimizations-memory-usage-report.txt``)."""
    usage = max(dump.glob("*after_optimizations-memory-usage-report.txt"))
    spaces = {
        m.group(1): int(m.group(2))
        for m in re.finditer(
            r"^Memory Space: (\S+) \(color=\d+\)\nTotal bytes: (\d+)",
            usage.read_text(),
            re.MULTILINE,
        )
    }
    values = Path(str(usage).replace("-memory-usage-report.txt", "-buffer-assignment-values.txt"))
    total = re.search(r"^Total bytes used: (\d+)", values.read_text(), re.MULTILINE)
    assert total is not None
    return {"total_bytes_used": int(total.group(1)), "spaces": spaces}


def main(dump: str, program: str, platform: str, topology: str, config: str | None = None) -> None:
    # XLA reads its flags once, when it starts: before jax is imported.
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{flags} --xla_dump_to={dump} --xla_dump_hlo_as_text"
    import jax
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    if platform == "tpu":
        devices = topologies.get_topology_desc(topology_name=topology, platform="tpu").devices
    else:
        devices = topologies.get_topology_desc(
            platform="cuda",
            topology_name="",
            target_config=Path(config or "").read_text(),
            topology=topology,
        ).devices
    on_device = SingleDeviceSharding(devices[0])
    fn, shapes, donate = mlp.PROGRAMS[program]
    args = jax.tree_util.tree_map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=on_device), shapes()
    )
    out: dict[str, Any] = {}
    try:
        compiled = jax.jit(fn, donate_argnums=donate).lower(*args).compile()
        analysis = compiled.memory_analysis()
        out["memory_analysis"] = {f: int(getattr(analysis, f)) for f in FIELDS}
    except Exception as e:  # noqa: BLE001 -- a refusal is a result here
        out["error"] = str(e)
    out.update(xla_reports(Path(dump)))
    # The dot precisions of the optimized module (jax_default_matmul_precision
    # shows there).
    module = max(Path(dump).glob("*after_optimizations.txt")).read_text()
    out["precisions"] = sorted(set(re.findall(r"operand_precision=\{[^}]*\}", module)))
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:])
