"""Compiles a take_along_axis gather (x f32[ROWS, 128], idx s32[ROWS, 4]) deviceless
for TOPO and dumps it to OUT, then prints XLA's allocation bytes per memory space
(color) from the dump's `-buffer-assignment.txt`. libtpu 0.0.52 offloads the
gather to the SparseCore as an operand-less `async-start` whose `async-update`
hands it the operands.

usage: JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 ALLOW_MULTIPLE_LIBTPU_LOAD=1 \
       python make.py v6e:2x2 ROWS OUT
(jax[tpu] 0.10.2 with libtpu 0.0.52)"""

import glob
import json
import os
import re
import sys
from pathlib import Path

topo, rows, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.environ["XLA_FLAGS"] = f"--xla_dump_to={out} --xla_dump_hlo_as_text"
import jax
import jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import SingleDeviceSharding

device = topologies.get_topology_desc(topology_name=topo, platform="tpu").devices[0]
sharding = SingleDeviceSharding(device)


def f(x, idx):
    return jnp.take_along_axis(x, idx, axis=1) * 2.0


args = (
    jax.ShapeDtypeStruct((rows, 128), jnp.float32, sharding=sharding),
    jax.ShapeDtypeStruct((rows, 4), jnp.int32, sharding=sharding),
)
jax.jit(f).lower(*args).compile()
for report in sorted(glob.glob(f"{out}/*after_optimizations-buffer-assignment.txt")):
    by_color = {}
    # XLA writes no color for the default space (0).
    for m in re.finditer(
        r"^allocation \d+: size (\d+)(?:, color (\d+))?", Path(report).read_text(), re.MULTILINE
    ):
        color = m.group(2) or "0"
        by_color[color] = by_color.get(color, 0) + int(m.group(1))
    print(json.dumps(by_color))
