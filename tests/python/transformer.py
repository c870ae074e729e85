"""A small GPT training step with Adam, its state donated: the program
``test_largest_fit_targets.py`` searches the largest batch of. Only
shapes: nothing is allocated, nothing runs."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

LAYERS, D, HEADS, VOCAB, SEQ = 1, 128, 8, 1024, 512


def loss_fn(params: Any, tokens: Any) -> Any:
    x = params["embed"][tokens[:, :-1]]
    batch, seq, _ = x.shape
    causal = jnp.tril(jnp.ones((seq, seq), bool))
    for p in params["layers"]:
        q, k, v = jnp.split(jax.nn.standardize(x) @ p["qkv"], 3, axis=-1)
        q, k, v = (t.reshape(batch, seq, HEADS, D // HEADS) for t in (q, k, v))
        att = jnp.einsum("bqhd,bkhd->bhqk", q, k) / (D // HEADS) ** 0.5
        att = jax.nn.softmax(jnp.where(causal, att, -1e9), axis=-1)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(x.shape) @ p["out"]
        x = x + jax.nn.gelu(jax.nn.standardize(x) @ p["up"]) @ p["down"]
    logits = jax.nn.standardize(x) @ params["embed"].T
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tokens[:, 1:, None], -1))


def train_step(params: Any, opt_state: Any, tokens: Any) -> Any:
    """One Adam step: new parameters, new moments, the loss."""
    loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
    m, v = opt_state
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, grads)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, grads)
    params = jax.tree_util.tree_map(
        lambda p, m, v: p - 1e-4 * m / (jnp.sqrt(v) + 1e-8), params, m, v
    )
    return params, (m, v), loss


def _f32(*shape: int) -> Any:
    return jax.ShapeDtypeStruct(shape, jnp.float32)


LAYER = {"qkv": _f32(D, 3 * D), "out": _f32(D, D), "up": _f32(D, 4 * D), "down": _f32(4 * D, D)}
PARAMS = {"embed": _f32(VOCAB, D), "layers": [LAYER] * LAYERS}


def make_args(batch: int) -> tuple[Any, Any, Any]:
    """The step's arguments for ``batch`` sequences."""
    return PARAMS, (PARAMS, PARAMS), jax.ShapeDtypeStruct((batch, SEQ + 1), jnp.int32)
