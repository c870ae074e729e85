"""The program the Python tests analyze: an MLP's SGD training step, compiled
(never run) with and without donating the parameters.

Imported by the tests for the compiled objects; run as a script with
``XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text`` it compiles the same
two steps so that XLA writes their dump folder, with the buffer assignment's
"Total bytes used" beside each module.
"""

from __future__ import annotations

import itertools
import math
import sys
from typing import Any

import jax
import jax.numpy as jnp

SIZES = (256, 512, 512, 128)
BATCH = 64


def _shapes() -> tuple[Any, Any, Any]:
    f32 = jnp.float32
    params = [
        {
            "w": jax.ShapeDtypeStruct((a, b), f32),
            "b": jax.ShapeDtypeStruct((b,), f32),
        }
        for a, b in itertools.pairwise(SIZES)
    ]
    x = jax.ShapeDtypeStruct((BATCH, SIZES[0]), f32)
    y = jax.ShapeDtypeStruct((BATCH, SIZES[-1]), f32)
    return params, x, y


def _loss(params: Any, x: Any, y: Any) -> Any:
    for i, p in enumerate(params):
        x = x @ p["w"] + p["b"]
        if i < len(params) - 1:
            x = jax.nn.gelu(x)
    return jnp.mean((x - y) ** 2) / math.sqrt(SIZES[-1])


def step(params: Any, x: Any, y: Any) -> Any:
    """One SGD step: the new parameters (the same shapes) and the loss."""
    loss, grads = jax.value_and_grad(_loss)(params, x, y)
    new = jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads)
    return new, loss


def step_donated(params: Any, x: Any, y: Any) -> Any:
    """The same step, compiled with the parameters donated (its own name, so
    that its module is told apart in a dump folder)."""
    return step(params, x, y)


def too_big(x: Any) -> Any:
    """A 40 GB temporary (``x @ x.T`` for ``x`` f32[100000, 1000]): a v5e chip
    (16 GiB) refuses it at compile time; a v5p chip (95 GiB) takes it."""
    return jnp.sin(x @ x.T) @ x


def too_big_shapes() -> tuple[Any]:
    return (jax.ShapeDtypeStruct((100_000, 1000), jnp.float32),)


def add(a: Any, b: Any) -> Any:
    """``a + b``: three arrays of the arguments' dtype, which x64 decides."""
    return a + b


def add_shapes() -> tuple[Any, Any]:
    """Two f64[2048,2048] (32 MiB each), or f32 when x64 is off."""
    a = jax.ShapeDtypeStruct((2048, 2048), jnp.float64)
    return a, a


def sort_flat(x: Any) -> Any:
    """A sort of 16M floats: on the GPU targets XLA makes it a CUB sort,
    which a deviceless compile cannot finish (it asks the device for its
    scratch size after assigning buffers)."""
    return jnp.sort(x.reshape(-1))


def sort_shapes() -> tuple[Any]:
    return (jax.ShapeDtypeStruct((4096, 4096), jnp.float32),)


#: The programs ``direct_compile.py`` compiles by name: (function, its
#: argument shapes, donate_argnums).
PROGRAMS: dict[str, tuple[Any, Any, tuple[int, ...]]] = {
    "step": (step_donated, _shapes, (0,)),
    "too_big": (too_big, too_big_shapes, ()),
    "add": (add, add_shapes, ()),
    "sort": (sort_flat, sort_shapes, ()),
}


def compile_step(donate: bool) -> Any:
    """The step compiled for the CPU: a ``jax.stages.Compiled``."""
    if donate:
        jitted = jax.jit(step_donated, donate_argnums=0)
    else:
        jitted = jax.jit(step)
    return jitted.lower(*_shapes()).compile()


def lower_step() -> Any:
    """The step lowered but not compiled: its text is StableHLO."""
    return jax.jit(step).lower(*_shapes())


if __name__ == "__main__":
    for donate in (False, True):
        compile_step(donate)
    print("compiled", file=sys.stderr)
