#!/usr/bin/env python3
"""Holdout corpus generator: XLA dumps of programs NOT in ../shared/accelerators/gen.py,
compiled deviceless for TPU / GPU targets (and plain CPU), with XLA's own numbers.

usage:
  python measure/holdout/gen_holdout.py --backend tpu  --topology v5e:2x2 --out target/holdout/tpu-v5e/cases [--programs a,b]
  python measure/holdout/gen_holdout.py --backend cuda --topology 1x1x4 --out target/holdout/gpu-h100/cases  (A100: --target-config measure/holdout/a100.txtpb)
  python measure/holdout/gen_holdout.py --backend cpu  --out target/holdout/cpu/cases      # 4 host devices (xla_force_host_platform_device_count=4)
  python measure/holdout/gen_holdout.py --list

The machinery (one subprocess per program, truth.json format, report parsing) is copied from
../shared/accelerators/gen.py; only the program list and the sharding plumbing differ:
sharded programs build their own NamedShardings on a 1-D mesh ("d",) over all devices of the
target (4 on v5e:2x2, v6e:2x2, v5p:2x2x1, 1x1x4 GPUs and the 4 forced CPU host devices;
8 on v4:2x2x1, whose topology lists one device per TensorCore), unsharded ones are put on device 0.
sharded_2d_mesh_mlp uses a (2, ndev/2) mesh ("x", "y") over the same devices.
"""

import argparse
import glob
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
MESH = None  # set by child() before a program's make() is called


# --------------------------------------------------------------------- programs
def programs():
    import math

    import jax
    import jax.numpy as jnp
    from jax import lax

    def S(shape, dtype=jnp.float32, spec=None, mesh=None):
        """ShapeDtypeStruct; spec (a PartitionSpec) is used only by sharded programs."""
        mesh = mesh if mesh is not None else MESH
        if spec is not None and mesh is not None:
            from jax.sharding import NamedSharding

            return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))
        return jax.ShapeDtypeStruct(shape, dtype)

    def Mesh2():
        """(2, n/2) mesh ('x','y') over the same 4 devices (None outside the child)."""
        if MESH is None:
            return None
        from jax.sharding import Mesh

        return Mesh(MESH.devices.reshape(2, -1), ("x", "y"))

    def PS(*a):
        from jax.sharding import PartitionSpec

        return PartitionSpec(*a)

    P = {}

    def prog(name, donate=(), sharded=False, note=""):
        def deco(make):
            P[name] = {"make": make, "donate": tuple(donate), "sharded": sharded, "note": note}
            return make

        return deco

    def xent(logits, labels, n):
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(labels, n), -1))

    # --- 1. small conv net training step (NHWC), SGD, params donated -------------------
    @prog(
        "convnet_train_donate",
        donate=(0,),
        note="2 convs (stride 1, stride 2) + avgpool + dense, xent, SGD",
    )
    def _():
        dn = ("NHWC", "HWIO", "NHWC")

        def loss(p, x, y):
            h = lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=dn) + p["b1"]
            h = jax.nn.relu(h)
            h = lax.conv_general_dilated(h, p["c2"], (2, 2), "SAME", dimension_numbers=dn) + p["b2"]
            h = jax.nn.relu(h).mean((1, 2))
            return xent(h @ p["w"] + p["b"], y, 10)

        def step(p, x, y):
            l, g = jax.value_and_grad(loss)(p, x, y)
            return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), l

        p = {
            "c1": S((3, 3, 3, 32)),
            "b1": S((32,)),
            "c2": S((3, 3, 32, 64)),
            "b2": S((64,)),
            "w": S((64, 10)),
            "b": S((10,)),
        }
        return step, (p, S((64, 32, 32, 3)), S((64,), jnp.int32))

    # --- 2. layernorm + softmax attention, inference only -------------------------------
    @prog("attn_ln_infer", note="pre-LN multi-head self-attention block + MLP, no grad, f32")
    def _():
        B, T, D, H = 4, 384, 384, 6

        def ln(x, g, b):
            mu = x.mean(-1, keepdims=True)
            var = ((x - mu) ** 2).mean(-1, keepdims=True)
            return (x - mu) * lax.rsqrt(var + 1e-5) * g + b

        def f(p, x):
            h = ln(x, p["g1"], p["b1"])
            q, k, v = (h @ p["wq"], h @ p["wk"], h @ p["wv"])
            sh = lambda t: t.reshape(B, T, H, D // H).transpose(0, 2, 1, 3)
            q, k, v = sh(q), sh(k), sh(v)
            a = jax.nn.softmax(jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(D // H), -1)
            o = jnp.einsum("bhqk,bhkd->bhqd", a, v).transpose(0, 2, 1, 3).reshape(B, T, D)
            x = x + o @ p["wo"]
            return x + jax.nn.relu(ln(x, p["g2"], p["b2"]) @ p["w1"]) @ p["w2"]

        p = {
            "g1": S((D,)),
            "b1": S((D,)),
            "wq": S((D, D)),
            "wk": S((D, D)),
            "wv": S((D, D)),
            "wo": S((D, D)),
            "g2": S((D,)),
            "b2": S((D,)),
            "w1": S((D, 4 * D)),
            "w2": S((4 * D, D)),
        }
        return f, (p, S((B, T, D)))

    # --- 3. embedding lookup + scatter-add update into a donated table ------------------
    @prog(
        "embed_scatter_donate",
        donate=(0,),
        note="gather rows, scatter-add updates into donated table",
    )
    def _():
        def f(table, ids, upd, ids2):
            new = table.at[ids].add(-0.1 * upd)
            return new, new[ids2].sum(-1)

        return f, (S((50000, 256)), S((4096,), jnp.int32), S((4096, 256)), S((1000,), jnp.int32))

    # --- 4. bf16 compute, f32 master weights, hand-written Adam, donated ----------------
    @prog(
        "bf16_mlp_adam_master_donate",
        donate=(0, 1, 2, 3),
        note="bf16 forward/backward, f32 master params + Adam moments + s32 step, all donated",
    )
    def _():
        sizes = [768, 3072, 768]
        pp = [{"w": S((a, b)), "b": S((b,))} for a, b in itertools.pairwise(sizes)]

        def loss(pb, x, y):
            h = x.astype(jnp.bfloat16)
            for i, p in enumerate(pb):
                h = h @ p["w"] + p["b"]
                if i < len(pb) - 1:
                    h = jax.nn.silu(h)
            return jnp.mean((h.astype(jnp.float32) - y) ** 2)

        def step(params, m, v, t, x, y):
            pb = jax.tree_util.tree_map(lambda a: a.astype(jnp.bfloat16), params)
            l, g = jax.value_and_grad(loss)(pb, x, y)
            g = jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), g)
            t = t + 1
            m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
            v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
            c1 = 1 - 0.9 ** t.astype(jnp.float32)
            c2 = 1 - 0.999 ** t.astype(jnp.float32)
            params = jax.tree_util.tree_map(
                lambda p, m, v: p - 1e-3 * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), params, m, v
            )
            return params, m, v, t, l

        return step, (pp, pp, pp, S((), jnp.int32), S((128, 768)), S((128, 768)))

    # --- 5. GRU over lax.scan, forward + backward ---------------------------------------
    @prog("gru_scan_grad", note="GRU cell in lax.scan (64 steps), grad w.r.t. all weights")
    def _():
        Tn, B, I, Hd = 64, 32, 128, 256

        def cell(p, h, x):
            z = jax.nn.sigmoid(x @ p["wz"] + h @ p["uz"])
            r = jax.nn.sigmoid(x @ p["wr"] + h @ p["ur"])
            n = jnp.tanh(x @ p["wh"] + (r * h) @ p["uh"])
            return (1 - z) * n + z * h

        def loss(p, xs, h0):
            def body(h, x):
                h = cell(p, h, x)
                return h, h.mean(-1)

            h, ys = lax.scan(body, h0, xs)
            return (h**2).sum() + ys.mean()

        p = {k: S((I, Hd)) for k in ("wz", "wr", "wh")}
        p.update({k: S((Hd, Hd)) for k in ("uz", "ur", "uh")})
        return jax.value_and_grad(loss), (p, S((Tn, B, I)), S((B, Hd)))

    # --- 6. fori_loop writing rows into a donated buffer --------------------------------
    @prog(
        "fori_dus_donate",
        donate=(0,),
        note="fori_loop(32) dynamic_update_slice into donated f32[32,512,512]",
    )
    def _():
        def f(buf, x, w):
            def body(i, c):
                buf, x = c
                x = jnp.tanh(x @ w)
                return lax.dynamic_update_slice(buf, x[None], (i, 0, 0)), x

            return lax.fori_loop(0, 32, body, (buf, x))

        return f, (S((32, 512, 512)), S((512, 512)), S((512, 512)))

    # --- 7. mixed dtypes, odd shapes ----------------------------------------------------
    @prog("odd_dtypes_outputs", note="f32[1000,77], bf16[3,5,129], s8, u8, s32, f16, pred outputs")
    def _():
        def f(a, b, c, d, e, g):
            return (
                a > 0,  # pred[1000,77]
                (a * 3).astype(jnp.int32).sum(0),  # s32[77]
                jnp.clip(c.astype(jnp.int32) * 2, -128, 127).astype(jnp.int8),  # s8[257,33]
                b.transpose(2, 0, 1) * 2,  # bf16[129,3,5]
                (d + 1).astype(jnp.uint8),  # u8[1001]
                e.astype(jnp.float16) + 1,  # f16[7,9,11]
                jnp.argmax(a, -1),  # s32[1000]
                g & 0x0F,  # u8[65,3]
                jnp.any(c > 3),
            )  # pred[]

        return f, (
            S((1000, 77)),
            S((3, 5, 129), jnp.bfloat16),
            S((257, 33), jnp.int8),
            S((1001,), jnp.int32),
            S((7, 9, 11)),
            S((65, 3), jnp.uint8),
        )

    # --- 8. lax.cond inside lax.scan -----------------------------------------------------
    @prog("cond_in_scan", note="scan of 16 steps, each a lax.cond on step parity")
    def _():
        def f(x, ws):
            def body(h, iw):
                i, w = iw
                h = lax.cond(i % 2 == 0, lambda h: jnp.tanh(h @ w), lambda h: h * 0.5 + w[:1], h)
                return h, h[0]

            return lax.scan(body, x, (jnp.arange(16), ws))

        return f, (S((256, 512)), S((16, 512, 512)))

    # --- 9. sort / top_k / argsort ------------------------------------------------------
    @prog("sort_topk", note="jnp.sort, lax.top_k(k=32), argsort of f32[512,4096]")
    def _():
        def f(x, y):
            v, i = lax.top_k(x, 32)
            return (
                jnp.sort(x, -1),
                v,
                i,
                jnp.argsort(y[:, 0]),
                lax.sort((y[:, 1], y[:, 0]), num_keys=1),
            )

        return f, (S((512, 4096)), S((8192, 2)))

    @prog(
        "sort_step",
        note="top_k, sort and argsort of a computed f32[4096,1000] (the sorts' operands are temporaries)",
    )
    def _():
        def f(x, w):
            h = jnp.tanh(x @ w)
            v, i = lax.top_k(h, 8)
            s = jnp.sort(h * 2.0, -1)
            return v.sum() + s[:, :4].sum(), i, jnp.argsort(h[:, 0])

        return f, (S((4096, 512)), S((512, 1000)))

    @prog(
        "grad_accum_scan",
        donate=(0,),
        note="gradients of an MLP accumulated over 8 microbatches in lax.scan, then SGD; on v5p its weights are split across VMEM (SC(0:256))",
    )
    def _():
        def loss(p, x, y):
            h = jnp.tanh(x @ p["w1"] + p["b1"])
            return jnp.mean((h @ p["w2"] - y) ** 2)

        def f(p, xs, ys):
            def body(g, xy):
                gi = jax.grad(loss)(p, *xy)
                return jax.tree_util.tree_map(jnp.add, g, gi), None

            g, _ = lax.scan(body, jax.tree_util.tree_map(jnp.zeros_like, p), (xs, ys))
            return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g)

        return f, (
            {"w1": S((512, 1024)), "b1": S((1024,)), "w2": S((1024, 256))},
            S((8, 64, 512)),
            S((8, 64, 256)),
        )

    # --- 10. cumsum / reduce_window ------------------------------------------------------
    @prog("cumsum_reduce_window", note="cumsum, cummax, 3x3/2 max pool, 2x2 avg pool")
    def _():
        def f(x, img):
            mp = lax.reduce_window(img, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
            ap = lax.reduce_window(img, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
            return jnp.cumsum(x, 1), lax.cummax(x, 0), mp, ap

        return f, (S((1024, 1000)), S((16, 112, 112, 64)))

    # --- 11. data-parallel step, psum via jit sharding, params donated -------------------
    @prog(
        "sharded_dp_conv_donate",
        donate=(0,),
        sharded=True,
        note="conv+dense classifier, params replicated, batch sharded over 4 devices (all-reduce of grads)",
    )
    def _():
        dn = ("NHWC", "HWIO", "NHWC")

        def loss(p, x, y):
            h = jax.nn.relu(
                lax.conv_general_dilated(x, p["c"], (1, 1), "SAME", dimension_numbers=dn)
            )
            h = h.reshape(h.shape[0], -1)
            return xent(h @ p["w"], y, 16)

        def step(p, x, y):
            l, g = jax.value_and_grad(loss)(p, x, y)
            return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), l

        p = {"c": S((3, 3, 8, 16), spec=PS()), "w": S((16 * 16 * 16, 16), spec=PS())}
        return step, (p, S((128, 16, 16, 8), spec=PS("d")), S((128,), jnp.int32, spec=PS("d")))

    # --- 12. tensor-parallel MLP (Megatron style): column then row sharded --------------
    @prog(
        "sharded_tp_mlp",
        sharded=True,
        note="x replicated, w1 sharded on columns, w2 on rows (all-reduce of partial sums), forward+grad",
    )
    def _():
        def loss(w1, w2, x):
            return jnp.mean(jax.nn.gelu(x @ w1) @ w2)

        return jax.value_and_grad(loss, argnums=(0, 1)), (
            S((1024, 4096), spec=PS(None, "d")),
            S((4096, 1024), spec=PS("d", None)),
            S((256, 1024), spec=PS()),
        )

    # --- 13. explicit shard_map with lax.psum -------------------------------------------
    @prog(
        "sharded_shardmap_psum_donate",
        donate=(0,),
        sharded=True,
        note="shard_map: per-shard linear-regression grad, lax.psum, SGD; params donated",
    )
    def _():
        def local(w, x, y):
            g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
            g = lax.psum(g, "d") / 4
            return w - 0.1 * g, lax.psum(jnp.sum(x), "d")

        def step(w, x, y):
            return jax.shard_map(
                local, mesh=MESH, in_specs=(PS(), PS("d"), PS("d")), out_specs=(PS(), PS())
            )(w, x, y)

        return step, (
            S((512, 256), spec=PS()),
            S((2048, 512), spec=PS("d")),
            S((2048, 256), spec=PS("d")),
        )

    # --- 14. donated input passed through to an output ----------------------------------
    @prog(
        "passthrough_donate",
        donate=(0,),
        note="returns donated a unchanged, non-donated b unchanged, and a reduction",
    )
    def _():
        def f(a, b, c):
            return a, b, (a * c).sum(0) + b[0]

        return f, (S((2048, 1024)), S((1024, 1024)), S((2048, 1024)))

    # --- 15. while_loop with data-dependent trip count ----------------------------------
    @prog(
        "while_dynamic_trip",
        note="while_loop until norm small, carry (s32, f32[1024,1024], f32[1024])",
    )
    def _():
        def f(a, v):
            def cond(c):
                i, _, v = c
                return (i < 100) & (jnp.linalg.norm(v) > 1e-3)

            def body(c):
                i, m, v = c
                m = m @ a * 0.5
                return i + 1, m, m @ v

            return lax.while_loop(cond, body, (jnp.int32(0), a, v))

        return f, (S((1024, 1024)), S((1024,)))

    # --- 16. random dropout with threefry, one-hot classifier grad ----------------------
    @prog(
        "dropout_classifier_grad",
        note="threefry dropout (uint32[2] key), dense + xent, grads, argmax accuracy",
    )
    def _():
        def f(w, x, y, key):
            def loss(w):
                keep = jax.random.bernoulli(key, 0.9, x.shape)
                h = jnp.where(keep, x / 0.9, 0.0)
                logits = h @ w
                return xent(logits, y, 1000), logits

            (l, logits), g = jax.value_and_grad(loss, has_aux=True)(w)
            return l, g, jnp.mean(jnp.argmax(logits, -1) == y)

        return f, (S((2048, 1000)), S((256, 2048)), S((256,), jnp.int32), S((2,), jnp.uint32))

    # --- 17. concat / pad / slice / transpose / reverse ---------------------------------
    @prog(
        "concat_pad_transpose",
        note="concatenate, pad (incl. interior), strided slice, transpose, rev",
    )
    def _():
        def f(a, b, c):
            x = jnp.concatenate([a, b], 0)  # [1536, 300]
            y = lax.pad(c, 0.0, ((1, 2, 1), (0, 3, 0)))  # interior padding
            return x.T[::-1], y, x[::3, 7:250:2], jnp.flip(c, 0) + y[: c.shape[0], : c.shape[1]]

        return f, (S((1024, 300)), S((512, 300)), S((200, 131)))

    # ================= batch 2 =========================================================
    # --- 18. depthwise + dilated conv, max-pool gradient (select-and-scatter) -----------
    @prog(
        "depthwise_pool_grad",
        note="depthwise conv (feature_group_count), dilated conv, maxpool, grad",
    )
    def _():
        dn = ("NHWC", "HWIO", "NHWC")

        def loss(k1, k2, x):
            h = lax.conv_general_dilated(
                x, k1, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=32
            )
            h = lax.conv_general_dilated(
                jax.nn.relu(h), k2, (1, 1), "SAME", rhs_dilation=(2, 2), dimension_numbers=dn
            )
            h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
            return (h**2).mean()

        return jax.grad(loss, argnums=(0, 1)), (
            S((3, 3, 1, 32)),
            S((3, 3, 32, 48)),
            S((16, 56, 56, 32)),
        )

    # --- 19. selective remat policy ------------------------------------------------------
    @prog(
        "remat_dots_saveable_mlp",
        donate=(0,),
        note="jax.checkpoint(policy=dots_with_no_batch_dims_saveable) per layer, 4 layers, SGD, donated",
    )
    def _():
        def layer(h, w):
            return jax.nn.gelu(h @ w) + h

        lay = jax.checkpoint(layer, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)

        def loss(ws, x):
            h = x
            for w in ws:
                h = lay(h, w)
            return (h**2).mean()

        def step(ws, x):
            g = jax.grad(loss)(ws, x)
            return [w - 0.01 * gw for w, gw in zip(ws, g)]

        return step, ([S((768, 768)) for _ in range(4)], S((512, 768)))

    # --- 20. int8 matmul with s32 accumulation, requantize --------------------------------
    @prog(
        "int8_matmul_requant",
        note="s8 x s8 -> s32 dot (preferred_element_type), scale, round back to s8",
    )
    def _():
        def f(a, b, scale):
            acc = lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32)
            y = jnp.round(acc.astype(jnp.float32) * scale[None, :])
            return jnp.clip(y, -128, 127).astype(jnp.int8), acc.max()

        return f, (S((1000, 1536), jnp.int8), S((1536, 700), jnp.int8), S((700,)))

    # --- 21. complex FFT ------------------------------------------------------------------
    @prog("fft_complex", note="rfft2 / irfft2 round trip with a complex64 filter, plus c64 output")
    def _():
        def f(x, k):
            X = jnp.fft.rfft2(x)
            return jnp.fft.irfft2(X * k, s=x.shape[-2:]), X[:, :4, :4]

        return f, (S((8, 256, 256)), S((256, 129), jnp.complex64))

    # --- 22. 2-D mesh: data x model sharding ------------------------------------------------
    @prog(
        "sharded_2d_mesh_mlp",
        donate=(0, 1),
        sharded=True,
        note="mesh (2, ndev/2) ('x','y'): batch on x, hidden on y; MLP grad + SGD, weights donated",
    )
    def _():
        m2 = Mesh2()

        def loss(w1, w2, x):
            return jnp.mean((jax.nn.relu(x @ w1) @ w2 - x) ** 2)

        def step(w1, w2, x):
            g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2, x)
            return w1 - 0.01 * g1, w2 - 0.01 * g2

        return step, (
            S((512, 2048), spec=PS(None, "y"), mesh=m2),
            S((2048, 512), spec=PS("y", None), mesh=m2),
            S((1024, 512), spec=PS("x", None), mesh=m2),
        )

    # --- 23. donation that cannot alias (shape mismatch), duplicate and constant outputs --
    @prog(
        "donate_unusable_dup_outputs",
        donate=(0, 1),
        note="a donated f32[1024,1024] unusable (no output of its shape), b donated and returned twice, constant output",
    )
    def _():
        def f(a, b):
            y = b * 2
            return a.sum(0), y, y, jnp.zeros((64, 64)), jnp.arange(1000)

        return f, (S((1024, 1024)), S((777, 129)))

    # --- 24. scan with unroll, nested pytree carry ---------------------------------------
    @prog(
        "scan_unroll_nested_carry",
        note="lax.scan(unroll=4) of 32 steps, carry {'h': f32, 'c': (bf16, s32)}",
    )
    def _():
        def f(xs, w, h0):
            def body(c, x):
                h = jnp.tanh(c["h"] @ w + x)
                cb, n = c["c"]
                return {"h": h, "c": ((cb + h.astype(jnp.bfloat16)) * 0.5, n + 1)}, h[:, :8]

            init = {"h": h0, "c": (h0.astype(jnp.bfloat16), jnp.int32(0))}
            return lax.scan(body, init, xs, unroll=4)

        return f, (S((32, 128, 512)), S((512, 512)), S((128, 512)))

    # --- 25. nested jit with custom_vjp ------------------------------------------------------
    @prog(
        "custom_vjp_nested_jit",
        note="custom_vjp clipped-gradient op inside an inner jax.jit, grad of outer",
    )
    def _():
        @jax.custom_vjp
        def clipg(x):
            return x

        def fwd(x):
            return x, None

        def bwd(_, g):
            return (jnp.clip(g, -1e-3, 1e-3),)

        clipg.defvjp(fwd, bwd)

        @jax.jit
        def inner(w, x):
            return jnp.tanh(clipg(x @ w))

        def loss(w1, w2, x):
            return (inner(w2, inner(w1, x)) ** 2).sum()

        return jax.grad(loss, argnums=(0, 1)), (S((640, 640)), S((640, 640)), S((300, 640)))

    # --- 26. batched einsum with odd dims and take_along_axis -------------------------------
    @prog(
        "einsum_batched_gather", note="einsum 'bij,bjk->bik' odd dims, take_along_axis, segment_sum"
    )
    def _():
        def f(a, b, idx, seg):
            c = jnp.einsum("bij,bjk->bik", a, b)  # [12, 100, 70]
            g = jnp.take_along_axis(c, idx, axis=2)  # [12, 100, 5]
            s = jax.ops.segment_sum(c.reshape(-1, 70), seg, num_segments=37)
            return g, s

        return f, (
            S((12, 100, 333)),
            S((12, 333, 70)),
            S((12, 100, 5), jnp.int32),
            S((1200,), jnp.int32),
        )

    # --- 27. cross-entropy over a large vocab in bf16 logits, loss only ---------------------
    @prog(
        "bf16_logits_xent_grad",
        donate=(0,),
        note="bf16 hidden @ bf16 vocab matrix (32000), f32 log_softmax, grad w.r.t. vocab matrix, donated",
    )
    def _():
        def loss(wv, h, y):
            logits = (h @ wv).astype(jnp.float32)
            return xent(logits, y, 32000)

        def step(wv, h, y):
            l, g = jax.value_and_grad(loss)(wv, h, y)
            return wv - (0.01 * g).astype(wv.dtype), l

        return step, (
            S((512, 32000), jnp.bfloat16),
            S((256, 512), jnp.bfloat16),
            S((256,), jnp.int32),
        )

    # --- 28. mixture of experts: top-2 routing, scatter dispatch, gather/scatter combine ---
    # On TPU v5p and v6e libtpu 0.0.42.1 offloads the top-k gradient's scatter to the
    # SparseCore (async-start on the "sparsecore" thread, nested in another; issue 38).
    @prog(
        "moe_topk_dispatch_train_donate",
        donate=(0,),
        note="MoE layer, 8 experts, top-2, capacity 320: scatter-add dispatch, gather + scatter-add "
        "combine, grad + SGD, params donated",
    )
    def _():
        T, D, E, F, K, C = 1024, 128, 8, 256, 2, 320

        def loss(p, x, y):
            top, expert = lax.top_k(jax.nn.softmax(x @ p["router"], -1), K)
            expert = expert.reshape(-1)
            onehot = jax.nn.one_hot(expert, E, dtype=jnp.int32)
            slot_in_expert = ((jnp.cumsum(onehot, 0) - 1) * onehot).sum(-1)
            slot = jnp.where(slot_in_expert < C, expert * C + slot_in_expert, E * C)  # E*C: dropped
            token = jnp.repeat(jnp.arange(T), K)
            routed = jnp.zeros((E * C + 1, D), x.dtype).at[slot].add(x[token])
            h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", routed[:-1].reshape(E, C, D), p["w1"]))
            h = jnp.einsum("ecf,efd->ecd", h, p["w2"]).reshape(E * C, D)
            h = jnp.concatenate([h, jnp.zeros((1, D), h.dtype)], 0)
            out = jnp.zeros((T, D), x.dtype).at[token].add(h[slot] * top.reshape(-1, 1))
            return jnp.mean((out - y) ** 2)

        def step(p, x, y):
            l, g = jax.value_and_grad(loss)(p, x, y)
            return jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b, p, g), l

        p = {"router": S((D, E)), "w1": S((E, D, F)), "w2": S((E, F, D))}
        return step, (p, S((T, D)), S((T, D)))

    # --- 29-32. gradient accumulation and KV-cache decode (issue 38's HBM misses) ----------
    def transformer_grad_accum(
        V=4096, D=512, H=8, T=128, L=2, nmb=4, mb=8, scan_layers=True, unroll=1
    ):
        """A causal transformer LM's step: gradients of 4 microbatches summed in a lax.scan
        over (tokens, labels, mask, key) (carry: grads, loss sum, correct count; per-step
        losses out), clipped by global norm, AdamW with (count, mu, nu) state; params and
        state donated."""
        Dh = D // H

        def ln(x, g):
            mu = x.mean(-1, keepdims=True)
            var = ((x - mu) ** 2).mean(-1, keepdims=True)
            return (x - mu) * lax.rsqrt(var + 1e-5) * g

        def block(x, w):
            h = ln(x, w["g1"])
            q, k, v = [(h @ w[n]).reshape(x.shape[0], T, H, Dh) for n in ("wq", "wk", "wv")]
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(Dh)
            s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -1e9)
            a = jax.nn.softmax(s, -1)
            x = x + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(x.shape[0], T, D) @ w["wo"]
            return x + jax.nn.gelu(ln(x, w["g2"]) @ w["w1"]) @ w["w2"]

        def loss(p, batch):
            toks, labels, m = batch
            x = p["emb"][toks]
            if scan_layers:
                x, _ = lax.scan(lambda x, w: (block(x, w), None), x, p["layers"])
            else:
                for i in range(L):
                    x = block(x, jax.tree_util.tree_map(lambda a, i=i: a[i], p["layers"]))
            logits = ln(x, p["gf"]) @ p["emb"].T
            ll = jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(labels, V), -1)
            return -jnp.sum(ll * m) / jnp.maximum(m.sum(), 1), jnp.sum(
                jnp.argmax(logits, -1) == labels
            )

        def step(p, opt, toks, labels, m, key):
            def body(c, xs):
                g, ls, acc = c
                (l, a), gi = jax.value_and_grad(loss, has_aux=True)(p, xs[:3])
                return (jax.tree_util.tree_map(jnp.add, g, gi), ls + l, acc + a), l

            zeros = jax.tree_util.tree_map(jnp.zeros_like, p)
            (g, ls, acc), losses = lax.scan(
                body,
                (zeros, jnp.float32(0), jnp.int32(0)),
                (toks, labels, m, jax.random.split(key, nmb)),
                unroll=unroll,
            )
            g = jax.tree_util.tree_map(lambda a: a / nmb, g)
            gn = jnp.sqrt(sum(jnp.sum(a * a) for a in jax.tree_util.tree_leaves(g)))
            g = jax.tree_util.tree_map(lambda a: a * jnp.minimum(1.0, 1.0 / (gn + 1e-6)), g)
            count, mu, nu = opt
            count = count + 1
            mu = jax.tree_util.tree_map(lambda a, b: 0.9 * a + 0.1 * b, mu, g)
            nu = jax.tree_util.tree_map(lambda a, b: 0.999 * a + 0.001 * b * b, nu, g)
            c1, c2 = 1 - 0.9 ** count.astype(jnp.float32), 1 - 0.999 ** count.astype(jnp.float32)
            p = jax.tree_util.tree_map(
                lambda w, a, b: w - 1e-3 * ((a / c1) / (jnp.sqrt(b / c2) + 1e-8) + 0.01 * w),
                p,
                mu,
                nu,
            )
            return p, (count, mu, nu), {"loss": ls / nmb, "acc": acc, "losses": losses}

        lw = {
            "g1": (D,),
            "wq": (D, D),
            "wk": (D, D),
            "wv": (D, D),
            "wo": (D, D),
            "g2": (D,),
            "w1": (D, 4 * D),
            "w2": (4 * D, D),
        }
        params = {
            "emb": S((V, D)),
            "gf": S((D,)),
            "layers": {k: S((L,) + s) for k, s in lw.items()},
        }
        return step, (
            params,
            (S((), jnp.int32), params, params),
            S((nmb, mb, T), jnp.int32),
            S((nmb, mb, T), jnp.int32),
            S((nmb, mb, T)),
            S((2,), jnp.uint32),
        )

    @prog(
        "ga_unrolled_big",
        donate=(0, 1),
        note="transformer grad accumulation (scan of 4 microbatches, unroll=2; 2 unrolled layers, D=1024, "
        "vocab 32000): a logits-sized carry whose chunk libtpu keeps through the loop's time holes",
    )
    def _():
        return transformer_grad_accum(V=32000, D=1024, T=256, mb=4, scan_layers=False, unroll=2)

    @prog(
        "ga_unrolled_layers",
        donate=(0, 1),
        note="transformer grad accumulation (scan of 4 microbatches, unroll=2; 2 unrolled layers, D=512): "
        "on v5e two 16 KiB slots scalars left take no async copy destination (libtpu's capped gaps)",
    )
    def _():
        return transformer_grad_accum(scan_layers=False, unroll=2)

    @prog(
        "ga_scan_layers_unroll2",
        donate=(0, 1),
        note="transformer grad accumulation (scan of 4 microbatches, unroll=2, over a scan of 2 layers): "
        "on v5e needs both of libtpu's start-order rules (loop span, capped gaps)",
    )
    def _():
        return transformer_grad_accum(scan_layers=True, unroll=2)

    @prog(
        "kv_decode_fori_donate",
        donate=(1,),
        note="KV-cache decode of 16 tokens in lax.fori_loop: 4 layers, bf16 stacked (k, v) cache "
        "dynamic_update_slice'd and donated, B=1; async copy-starts in HBM (all exact on v5p)",
    )
    def _():
        Lr, B, H, Tc, Dh, Vv = 4, 1, 8, 256, 64, 1024
        Dm = H * Dh
        bf = jnp.bfloat16

        def one(p, cache, tok, pos):
            kc, vc = cache
            x = p["emb"][tok]
            for i in range(Lr):
                w = jax.tree_util.tree_map(lambda a, i=i: a[i], p["layers"])
                q = (x @ w["wq"]).reshape(B, H, Dh)
                k1 = lax.dynamic_update_slice(
                    kc[i], (x @ w["wk"]).reshape(B, H, 1, Dh), (0, 0, pos, 0)
                )
                v1 = lax.dynamic_update_slice(
                    vc[i], (x @ w["wv"]).reshape(B, H, 1, Dh), (0, 0, pos, 0)
                )
                s = jnp.where(jnp.arange(Tc) <= pos, jnp.einsum("bhd,bhtd->bht", q, k1) / 8.0, -1e9)
                a = jax.nn.softmax(s.astype(jnp.float32), -1).astype(bf)
                x = x + jnp.einsum("bht,bhtd->bhd", a, v1).reshape(B, Dm) @ w["wo"]
                x = x + jax.nn.gelu(x @ w["w1"]) @ w["w2"]
                kc, vc = kc.at[i].set(k1), vc.at[i].set(v1)
            return jnp.argmax(x @ p["emb"].T, -1).astype(jnp.int32), (kc, vc)

        def decode(p, cache, tok, pos):
            return lax.fori_loop(0, 16, lambda i, c: one(p, c[1], c[0], pos + i), (tok, cache))

        lw = {
            "wq": (Dm, Dm),
            "wk": (Dm, Dm),
            "wv": (Dm, Dm),
            "wo": (Dm, Dm),
            "w1": (Dm, 4 * Dm),
            "w2": (4 * Dm, Dm),
        }
        p = {"emb": S((Vv, Dm), bf), "layers": {k: S((Lr,) + s, bf) for k, s in lw.items()}}
        cache = (S((Lr, B, H, Tc, Dh), bf), S((Lr, B, H, Tc, Dh), bf))
        return decode, (p, cache, S((B,), jnp.int32), S((), jnp.int32))

    return P


# The programs .ci/run compiles for every TPU generation and the H100 on each
# run and scores with score.py (--programs ci): each compiles in a few seconds
# on 2 cores, and together they reach what the four HBM rules of issue 38 were
# found on (tuple tables of a scan's accumulator, async copies, in-place
# sorts) and the other memory spaces: loops and conds with carries in VMEM,
# donation, scatter, mixed dtypes, and sharded modules; and a scatter libtpu
# offloads to the SparseCore on v5p and v6e (an async op nested in another).
CI_PROGRAMS = [
    "grad_accum_scan",
    "cond_in_scan",
    "fori_dus_donate",
    "gru_scan_grad",
    "scan_unroll_nested_carry",
    "odd_dtypes_outputs",
    "embed_scatter_donate",
    "bf16_mlp_adam_master_donate",
    "sort_step",
    "sharded_tp_mlp",
    "sharded_shardmap_psum_donate",
    "einsum_batched_gather",
    "moe_topk_dispatch_train_donate",
]


# --------------------------------------------------------------------- child
def child(args):
    global MESH
    import jax
    import numpy as np
    from jax.sharding import Mesh, SingleDeviceSharding

    if args.backend == "tpu":
        from jax.experimental import topologies

        devices = topologies.get_topology_desc(topology_name=args.topology, platform="tpu").devices
    elif args.backend == "cuda":
        from jax.experimental import topologies

        devices = topologies.get_topology_desc(
            platform="cuda",
            topology_name="",
            target_config=Path(args.target_config).read_text(),
            topology=args.topology,
        ).devices
    else:
        devices = jax.devices("cpu")
    print("DEVICES " + json.dumps([str(d) for d in devices]), flush=True)

    MESH = Mesh(np.array(devices), ("d",))
    spec = programs()[args.child]
    fn, sds = spec["make"]()
    if not spec["sharded"]:
        sh = SingleDeviceSharding(devices[0])
        sds = jax.tree_util.tree_map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), sds
        )

    compiled = jax.jit(fn, donate_argnums=spec["donate"]).lower(*sds).compile()
    ma = compiled.memory_analysis()
    keys = [
        "argument_size_in_bytes",
        "output_size_in_bytes",
        "alias_size_in_bytes",
        "temp_size_in_bytes",
        "generated_code_size_in_bytes",
        "host_argument_size_in_bytes",
        "host_output_size_in_bytes",
        "host_alias_size_in_bytes",
        "host_temp_size_in_bytes",
    ]
    out = {k: getattr(ma, k, None) for k in keys} if ma is not None else None
    print("MEMORY_ANALYSIS " + json.dumps(out))


# --------------------------------------------------------------------- reports (as gen.py)
def parse_reports(dump):
    res = {}
    for ba in sorted(glob.glob(os.path.join(dump, "*after_optimizations-buffer-assignment.txt"))):
        b = os.path.basename(ba)
        mod = b[: b.index("after_optimizations")].rstrip("._")
        r = {}
        txt = Path(ba).read_text()
        per_color = {}
        for m in re.finditer(r"^allocation \d+: size (\d+),(.*)$", txt, re.MULTILINE):
            c = re.search(r"color (\d+)", m.group(2))
            c = int(c.group(1)) if c else 0
            per_color[c] = per_color.get(c, 0) + int(m.group(1))
        r["allocation_bytes_by_color"] = per_color
        vals = ba.replace("-buffer-assignment.txt", "-buffer-assignment-values.txt")
        m = re.search(
            r"Total bytes used: (\d+)",
            txt + (Path(vals).read_text() if os.path.exists(vals) else ""),
        )
        r["total_bytes_used_line"] = int(m.group(1)) if m else None
        mu = ba.replace("-buffer-assignment.txt", "-memory-usage-report.txt")
        if os.path.exists(mu):
            r["memory_usage_report"] = {
                f"{n} (color={c})": int(t)
                for n, c, t in re.findall(
                    r"Memory Space: (\S+) \(color=(\d+)\)\nTotal bytes: (\d+)", Path(mu).read_text()
                )
            }
        lr = ba.replace("-buffer-assignment.txt", "-live-range.txt")
        if os.path.exists(lr):
            cum = re.findall(r"cumulative: (\d+) bytes", Path(lr).read_text())
            r["live_range_peak"] = int(cum[-1]) if cum else None
        res[mod] = r
    return res


GPU_DROP = re.compile(r"\.(ll|ptx)$|ir-(no-)?opt|\.llvm|\.cubin$")


def strip_gpu(dump):
    """Remove GPU LLVM IR / PTX / cubin files (large); keep every .txt report."""
    n = 0
    for f in glob.glob(os.path.join(dump, "*")):
        if os.path.isfile(f) and not f.endswith(".txt") and GPU_DROP.search(os.path.basename(f)):
            os.remove(f)
            n += 1
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="tpu", choices=["tpu", "cuda", "cpu"])
    ap.add_argument(
        "--topology",
        default=None,
        help="tpu: v5e:2x2, v4:2x2x1, v6e:2x2 ...; cuda: 1x1x4 (partitions x hosts x gpus)",
    )
    ap.add_argument(
        "--target-config", default=os.path.join(HERE, "..", "..", "samples", "h100.txtpb")
    )
    ap.add_argument("--out", required=False)
    ap.add_argument(
        "--programs",
        default="",
        help="comma-separated program names, or 'ci' for CI_PROGRAMS (default: all)",
    )
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--extra-xla-flags", default="")
    ap.add_argument(
        "--reparse", action="store_true", help="only re-read XLA's reports into truth.json"
    )
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.topology is None:
        args.topology = {"tpu": "v5e:2x2", "cuda": "1x1x4"}.get(args.backend, "")
    if args.child:
        return child(args)
    P = programs()
    names = list(P.keys())
    if args.list:
        for n in names:
            print(f"{n:32s} donate={P[n]['donate']} sharded={P[n]['sharded']}  {P[n]['note']}")
        return
    sel = (
        CI_PROGRAMS
        if args.programs == "ci"
        else args.programs.split(",")
        if args.programs
        else names
    )
    unknown = [n for n in sel if n not in P]
    if unknown:
        ap.error(f"unknown program(s): {', '.join(unknown)}")
    if args.reparse:
        for t in glob.glob(os.path.join(args.out, "*", "truth.json")):
            d = json.loads(Path(t).read_text())
            d["reports"] = parse_reports(os.path.join(os.path.dirname(t), "dump"))
            Path(t).write_text(json.dumps(d, indent=1))
        return
    import time

    failed = []
    for name in sel:
        case = os.path.join(os.path.abspath(args.out), name)
        dump = os.path.join(case, "dump")
        os.makedirs(dump, exist_ok=True)
        for f in glob.glob(os.path.join(dump, "*")):
            if os.path.isfile(f):
                os.remove(f)
        env = dict(os.environ)
        extra = args.extra_xla_flags
        if args.backend == "cpu":
            extra = ("--xla_force_host_platform_device_count=4 " + extra).strip()
        env["XLA_FLAGS"] = f"--xla_dump_to={dump} --xla_dump_hlo_as_text {extra}".strip()
        env.setdefault("TPU_SKIP_MDS_QUERY", "1")
        env.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
        env.setdefault("JAX_PLATFORMS", "cpu")
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--backend",
            args.backend,
            "--topology",
            args.topology,
            "--target-config",
            args.target_config,
            "--child",
            name,
        ]
        t0 = time.time()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        secs = round(time.time() - t0, 1)
        ma, devs = None, None
        for line in p.stdout.splitlines():
            if line.startswith("MEMORY_ANALYSIS "):
                ma = json.loads(line[len("MEMORY_ANALYSIS ") :])
            if line.startswith("DEVICES "):
                devs = json.loads(line[len("DEVICES ") :])
        removed = strip_gpu(dump) if args.backend == "cuda" else 0
        truth = {
            "case": name,
            "backend": args.backend,
            "topology": args.topology,
            "target_config": args.target_config if args.backend == "cuda" else None,
            "command": " ".join(cmd),
            "xla_flags": env["XLA_FLAGS"],
            "returncode": p.returncode,
            "donate_argnums": list(P[name]["donate"]),
            "sharded": P[name]["sharded"],
            "program_note": P[name]["note"],
            "devices": devs,
            "compile_seconds": secs,
            "gpu_files_removed": removed,
            "memory_analysis": ma,
            "reports": parse_reports(dump),
        }
        try:
            import importlib.metadata as md

            truth["versions"] = {k: md.version(k) for k in ("jax", "jaxlib")}
            for k in ("libtpu", "jax-cuda12-plugin", "jax-cuda12-pjrt"):
                try:
                    truth["versions"][k] = md.version(k)
                except md.PackageNotFoundError:
                    pass  # not installed: the chip's plugin is optional
        except ImportError:
            pass
        if p.returncode != 0:
            truth["stderr_tail"] = p.stderr[-3000:]
        Path(case, "truth.json").write_text(json.dumps(truth, indent=1))
        print(f"{name}: rc={p.returncode} {secs}s memory_analysis={ma}", flush=True)
        if p.returncode != 0:
            print(p.stderr[-1500:], flush=True)
            failed.append(name)
    if failed:
        sys.exit(f"{len(failed)} of {len(sel)} programs did not compile: {', '.join(failed)}")


if __name__ == "__main__":
    main()
