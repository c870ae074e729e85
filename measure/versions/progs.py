"""Programs for the version matrix (measure/versions/check.sh): a data-parallel
GPT step with Adam on 4 CPU devices, a scanned and rematerialized GPT step, a
ResNet-18 SGD-momentum step with and without donation, and an int8 serving
step, in plain JAX whose spelling every jax from 0.4.35 on accepts.

Usage: python progs.py CASE OUTDIR  (writes OUTDIR/CASE/dump and truth.json)
"""

import json
import os
import shutil
import sys
from pathlib import Path

case, out = sys.argv[1], sys.argv[2]
dump = os.path.join(out, case, "dump")
shutil.rmtree(dump, ignore_errors=True)
os.makedirs(dump)
ndev = 4 if case == "gpt_dp" else 1
os.environ["XLA_FLAGS"] = (
    f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_force_host_platform_device_count={ndev}"
)
os.environ["JAX_PLATFORMS"] = "cpu"
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def tm(f, *ts):
    return jax.tree_util.tree_map(f, *ts)


f32 = lambda *s: jax.ShapeDtypeStruct(s, jnp.float32)

if case == "gpt_dp":
    L, D, H, V, S, B = 2, 256, 4, 1024, 128, 8

    def loss_fn(p, tok):
        x = p["emb"][tok[:, :-1]]
        b, s, _ = x.shape
        causal = jnp.tril(jnp.ones((s, s), bool))
        for l in p["layers"]:
            h = (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + 1e-5)
            q, k, v = jnp.split(h @ l["qkv"], 3, -1)
            q, k, v = (t.reshape(b, s, H, D // H) for t in (q, k, v))
            a = jnp.einsum("bqhd,bkhd->bhqk", q, k) / (D // H) ** 0.5
            a = jax.nn.softmax(jnp.where(causal, a, -1e9), -1)
            x = x + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(x.shape) @ l["o"]
            h = (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + 1e-5)
            x = x + jax.nn.gelu(h @ l["up"]) @ l["down"]
        logits = x @ p["emb"].T
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tok[:, 1:, None], -1))

    def step(p, opt, tok):
        loss, g = jax.value_and_grad(loss_fn)(p, tok)
        m, v = opt
        m = tm(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = tm(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = tm(lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), p, m, v)
        return p, (m, v), loss

    layer = {"qkv": f32(D, 3 * D), "o": f32(D, D), "up": f32(D, 4 * D), "down": f32(4 * D, D)}
    params = {"emb": f32(V, D), "layers": [layer] * L}
    mesh = Mesh(np.array(jax.devices()), ("d",))
    rep = NamedSharding(mesh, P())
    dat = NamedSharding(mesh, P("d"))
    ps = tm(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=rep), params)
    tok = jax.ShapeDtypeStruct((B, S + 1), jnp.int32, sharding=dat)
    c = jax.jit(step, donate_argnums=(0, 1)).lower(ps, (ps, ps), tok).compile()
elif case == "gpt_scan":
    L, D, H, V, S, B = 4, 256, 4, 1024, 64, 8

    def layer_fn(x, l):
        b, s, _ = x.shape
        causal = jnp.tril(jnp.ones((s, s), bool))
        h = (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + 1e-5)
        q, k, v = jnp.split(h @ l["qkv"], 3, -1)
        q, k, v = (t.reshape(b, s, H, D // H) for t in (q, k, v))
        a = jnp.einsum("bqhd,bkhd->bhqk", q, k) / (D // H) ** 0.5
        a = jax.nn.softmax(jnp.where(causal, a, -1e9), -1)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(x.shape) @ l["o"]
        h = (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + 1e-5)
        return x + jax.nn.gelu(h @ l["up"]) @ l["down"], None

    def loss_fn(p, tok):
        x = p["emb"][tok[:, :-1]]
        x, _ = jax.lax.scan(jax.checkpoint(layer_fn), x, p["layers"])
        logits = x @ p["emb"].T
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tok[:, 1:, None], -1))

    def step(p, opt, tok):
        loss, g = jax.value_and_grad(loss_fn)(p, tok)
        m, v = opt
        m = tm(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = tm(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = tm(lambda p, m, v: p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), p, m, v)
        return p, (m, v), loss

    layers = {
        "qkv": f32(L, D, 3 * D),
        "o": f32(L, D, D),
        "up": f32(L, D, 4 * D),
        "down": f32(L, 4 * D, D),
    }
    params = {"emb": f32(V, D), "layers": layers}
    c = (
        jax.jit(step, donate_argnums=(0, 1))
        .lower(params, (params, params), jax.ShapeDtypeStruct((B, S + 1), jnp.int32))
        .compile()
    )
elif case in ("resnet18", "resnet18_nodonate"):
    B = 16

    def conv(x, w, s=1):
        return jax.lax.conv_general_dilated(
            x, w, (s, s), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )

    def bn(x, p):
        m = x.mean((0, 1, 2))
        v = x.var((0, 1, 2))
        return (x - m) / jnp.sqrt(v + 1e-5) * p["g"] + p["b"]

    def block(x, p, s):
        y = jax.nn.relu(bn(conv(x, p["c1"], s), p["n1"]))
        y = bn(conv(y, p["c2"]), p["n2"])
        if "sc" in p:
            x = bn(conv(x, p["sc"], s), p["ns"])
        return jax.nn.relu(x + y)

    def model(p, x):
        x = jax.nn.relu(bn(conv(x, p["stem"]), p["n0"]))
        for i, (bp, s) in enumerate(zip(p["blocks"], [1, 1, 2, 1, 2, 1, 2, 1])):
            x = block(x, bp, s)
        x = x.mean((1, 2))
        return x @ p["fc"]

    def loss_fn(p, x, y):
        lg = jax.nn.log_softmax(model(p, x))
        return -jnp.mean(jnp.take_along_axis(lg, y[:, None], -1))

    def step(p, mom, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        mom = tm(lambda m, g: 0.9 * m + g, mom, g)
        p = tm(lambda p, m: p - 0.1 * m, p, mom)
        return p, mom, loss

    nrm = lambda c: {"g": f32(c), "b": f32(c)}
    chans = [64, 64, 128, 128, 256, 256, 512, 512]
    blocks, cin = [], 64
    for c_, s in zip(chans, [1, 1, 2, 1, 2, 1, 2, 1]):
        b = {"c1": f32(3, 3, cin, c_), "n1": nrm(c_), "c2": f32(3, 3, c_, c_), "n2": nrm(c_)}
        if s != 1 or cin != c_:
            b["sc"] = f32(1, 1, cin, c_)
            b["ns"] = nrm(c_)
        blocks.append(b)
        cin = c_
    params = {"stem": f32(3, 3, 3, 64), "n0": nrm(64), "blocks": blocks, "fc": f32(512, 10)}
    donate = (0, 1) if case == "resnet18" else ()
    c = (
        jax.jit(step, donate_argnums=donate)
        .lower(params, params, f32(B, 32, 32, 3), jax.ShapeDtypeStruct((B,), jnp.int32))
        .compile()
    )
elif case == "int8_serve":
    D, F, B = 1024, 4096, 32

    def serve(w, x):
        h = x
        for wq, sc in w:
            h = jax.nn.relu((h @ wq.astype(jnp.float32)) * sc)
        return h

    w = [
        (jax.ShapeDtypeStruct((D, F), jnp.int8), f32(F)),
        (jax.ShapeDtypeStruct((F, D), jnp.int8), f32(D)),
    ]
    c = jax.jit(serve).lower(w, f32(B, D)).compile()
ma = c.memory_analysis()
truth = {k: getattr(ma, k) for k in dir(ma) if k.endswith("_in_bytes")}
Path(out, case, "truth.json").write_text(
    json.dumps({"jax": jax.__version__, "memory_analysis": truth}, indent=1)
)
print(case, jax.__version__, truth)
