"""The reference the compile_for tests compare with: the MLP step of
``mlp.py`` compiled deviceless for a target by the recipe of
``samples/gen_samples.py`` (written out here, not through hlomem), printing
``memory_analysis()`` as JSON.

Run in a child process (libtpu and XLA flags stay out of the test process)::

    JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 ALLOW_MULTIPLE_LIBTPU_LOAD=1 \\
        python direct_compile.py tpu v5e:2x2
    ... python direct_compile.py cuda 1x1x4 CONFIG.txtpb
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
from jax.experimental import topologies
from jax.sharding import SingleDeviceSharding

import mlp

FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "alias_size_in_bytes",
    "temp_size_in_bytes",
)


def main(platform: str, topology: str, config: str | None = None) -> None:
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
    args = jax.tree_util.tree_map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=on_device), mlp._shapes()
    )
    compiled = jax.jit(mlp.step_donated, donate_argnums=0).lower(*args).compile()
    analysis = compiled.memory_analysis()
    print(json.dumps({f: int(getattr(analysis, f)) for f in FIELDS}))


if __name__ == "__main__":
    main(*sys.argv[1:])
