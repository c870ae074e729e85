"""Compiles ../shared/accelerators/gen.py's program PROG for TOPO with one more,
unused, f32[rows,128] parameter that brings HBM (color 0) to about TARGET bytes
(BASE: HBM without it), and dumps to OUT.

usage: JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 ALLOW_MULTIPLE_LIBTPU_LOAD=1 \
       python make.py tf_remat_donate v5e:2x2 TARGET OUT 224759808
(run from the repository; jax[tpu] 0.10.2, libtpu 0.0.42.1)"""

import json
import os
import sys

prog, topo, target, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
base = int(sys.argv[5])  # color-0 total without the pad
os.environ["XLA_FLAGS"] = f"--xla_dump_to={out} --xla_dump_hlo_as_text"
sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../shared/accelerators")
)
import gen
import jax
from jax.experimental import topologies
from jax.sharding import SingleDeviceSharding

spec = gen.programs()[prog]
fn, sds = spec["make"]()
dev = topologies.get_topology_desc(topology_name=topo, platform="tpu").devices[0]
sh = SingleDeviceSharding(dev)
rows = max(8, (target - base) // 512 // 8 * 8)
pad = jax.ShapeDtypeStruct((rows, 128), jax.numpy.float32)
sds = jax.tree_util.tree_map(
    lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), (*sds, pad)
)


def f(*a):
    return fn(*a[:-1])


c = jax.jit(f, donate_argnums=spec["donate"], keep_unused=True).lower(*sds).compile()
print(
    "rows",
    rows,
    "pad",
    rows * 512,
    json.dumps(
        {
            k: getattr(c.memory_analysis(), k)
            for k in ["argument_size_in_bytes", "temp_size_in_bytes"]
        }
    ),
)
