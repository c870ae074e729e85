"""Compiles a donated three-layer MLP training step (f32, widths
WIDTH, 4*WIDTH, 4*WIDTH, WIDTH; x and y f32[BATCH, WIDTH]; SGD) deviceless for
TOPO and dumps it to OUT, then prints XLA's allocation bytes per memory space
(color) from the dump's `-buffer-assignment.txt`. LIBTPU flags after OUT are
passed to libtpu (e.g. --xla_tpu_scoped_vmem_limit_kib=32768).

usage: JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 ALLOW_MULTIPLE_LIBTPU_LOAD=1 \
       python make.py v5e:2x2 1024 256 OUT [LIBTPU flags...]
(jax[tpu] 0.10.2, libtpu 0.0.42.1)"""

import glob
import json
import os
import re
import sys
from pathlib import Path

topo, width, batch, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
os.environ["XLA_FLAGS"] = f"--xla_dump_to={out} --xla_dump_hlo_as_text"
if sys.argv[5:]:
    os.environ["LIBTPU_INIT_ARGS"] = " ".join(sys.argv[5:])
import itertools

import jax
import jax.numpy as jnp
from jax.experimental import topologies
from jax.sharding import SingleDeviceSharding

device = topologies.get_topology_desc(topology_name=topo, platform="tpu").devices[0]
sharding = SingleDeviceSharding(device)


def spec(shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=sharding)


widths = [width, 4 * width, 4 * width, width]
params = [{"w": spec((a, b)), "b": spec((b,))} for a, b in itertools.pairwise(widths)]


def step(params, x, y):
    def loss(ps):
        h = x
        for i, p in enumerate(ps):
            h = h @ p["w"] + p["b"]
            if i < len(ps) - 1:
                h = jax.nn.gelu(h)
        return jnp.mean((h - y) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads), value


jax.jit(step, donate_argnums=(0,)).lower(
    params, spec((batch, width)), spec((batch, width))
).compile()
for report in sorted(glob.glob(f"{out}/*after_optimizations-buffer-assignment.txt")):
    by_color = {}
    # XLA writes no color for the default space (0).
    for m in re.finditer(
        r"^allocation \d+: size (\d+)(?:, color (\d+))?", Path(report).read_text(), re.MULTILINE
    ):
        color = m.group(2) or "0"
        by_color[color] = by_color.get(color, 0) + int(m.group(1))
    print(json.dumps(by_color))
