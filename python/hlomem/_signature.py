"""The check that a deviceless compile is the caller's program: the compiled
module's entry parameters and results against the arguments given and the
function's abstract result, both as the caller's JAX sees them.

:func:`expected` traces the function here, in the caller's process and
configuration (``jax.jit(fn).trace(*args)``: the avals of ``jax.eval_shape``,
static arguments left out), and :func:`check` compares them with the
``entry_computation_layout`` of the module XLA compiled: element type,
shape, and under a mesh the shape of one device's shard. A difference is
:class:`SignatureMismatch`, never a verdict: the numbers would be another
program's (a child that lost ``jax_enable_x64`` compiles ``f32`` for ``f64``
and needs half the memory).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._binary import HlomemError

__all__ = ["Expected", "Leaf", "SignatureMismatch", "check", "entry_layout", "expected"]


class SignatureMismatch(HlomemError):
    """The module XLA compiled does not take or return what the caller's
    function does with these arguments in the caller's configuration: it is
    not the caller's program, so hlomem gives no verdict on it."""


@dataclass(frozen=True)
class Leaf:
    """One array the compiled module should take or return."""

    #: Where it is, for messages: ``argument 0 (params['w'])``, ``output 1 (result[1])``.
    label: str
    #: JAX's name for it: ``params['w']``, ``result[1]``.
    name: str
    #: numpy's name of its element type: ``float64``, ``bfloat16``, ``uint32``.
    dtype: str
    #: Its shape in the caller's program.
    shape: tuple[int, ...]
    #: The shape one device holds: ``shape`` unless sharded; ``None`` when
    #: the compiler chooses the sharding (an output without
    #: ``out_shardings`` under a mesh).
    device_shape: tuple[int, ...] | None


@dataclass(frozen=True)
class Expected:
    """What the compiled module should take and return."""

    #: The arguments' arrays, flattened as jit flattens them (static arguments left out).
    arguments: tuple[Leaf, ...]
    outputs: tuple[Leaf, ...]
    #: The function's parameter names where Python knows them (``a``, ``b``).
    argument_names: tuple[str, ...] = ()


# XLA's element types by numpy's names, for those whose names do not follow
# the rule in _hlo_type (bool, bfloat16).
_NUMPY_TO_HLO = {"bool": "pred", "bfloat16": "bf16"}


def _hlo_type(dtype: str) -> str:
    """XLA's name of numpy's ``dtype``: ``float64`` -> ``f64``, ``int4`` ->
    ``s4``, ``float8_e4m3fn`` -> ``f8e4m3fn``."""
    if dtype in _NUMPY_TO_HLO:
        return _NUMPY_TO_HLO[dtype]
    for numpy, hlo in (("uint", "u"), ("int", "s"), ("complex", "c"), ("float", "f")):
        if dtype.startswith(numpy):
            return hlo + dtype[len(numpy) :].replace("_", "")
    return dtype


def _numpy_type(hlo: str) -> str:
    """numpy's name of XLA's element type ``hlo`` (the inverse of _hlo_type)."""
    for numpy, short in _NUMPY_TO_HLO.items():
        if hlo == short:
            return numpy
    match = re.fullmatch(r"([usfc])(\d+)(.*)", hlo)
    if match is None:
        return hlo
    kind, bits, rest = match.groups()
    name = {"u": "uint", "s": "int", "f": "float", "c": "complex"}[kind] + bits
    return f"{name}_{rest}" if rest else name


def expected(
    fn: Any,
    args: Sequence[Any],
    *,
    mesh: dict[str, int] | None,
    in_shardings: Any,
    out_shardings: Any,
    static_argnums: Any = None,
    static_argnames: Any = None,
) -> Expected:
    """What ``jax.jit(fn)`` takes and returns for ``args`` in this process's
    configuration, with each array's per-device shape under ``mesh``."""
    import jax
    from jax._src import core  # physical_aval: a PRNG key's u32 array

    options: dict[str, Any] = {}
    if static_argnums is not None:
        options["static_argnums"] = static_argnums
    if static_argnames is not None:
        options["static_argnames"] = static_argnames
    traced = jax.jit(fn, **options).trace(*args)
    arg_infos = traced.args_info[0]  # the positional arguments; static ones are not there
    leaves = jax.tree_util.tree_flatten_with_path(arg_infos)[0]
    debug = getattr(traced.jaxpr.jaxpr, "debug_info", None)
    names = list(getattr(debug, "arg_names", None) or [])
    in_specs = _specs_per_leaf(in_shardings, arg_infos) if mesh is not None else None
    arguments = []
    for i, (path, info) in enumerate(leaves):
        name = names[i] if i < len(names) and names[i] else jax.tree_util.keystr(path)
        position = getattr(path[0], "idx", i)
        aval = core.physical_aval(info._aval)
        spec = in_specs[i] if in_specs is not None else _REPLICATED
        arguments.append(_leaf(f"argument {position} ({name})", name, aval, mesh, spec))

    out_leaves = jax.tree_util.tree_leaves(traced.out_info)
    results = list(getattr(debug, "result_paths", None) or [])
    out_specs = (
        _specs_per_leaf(out_shardings, traced.out_info)
        if mesh is not None and out_shardings is not None
        else None
    )
    outputs = []
    for i, out in enumerate(out_leaves):
        result = results[i] if i < len(results) else f"result[{i}]"
        label = f"output {i} ({result})"
        aval = core.physical_aval(core.ShapedArray(out.shape, out.dtype))
        if mesh is None:
            spec: Any = _REPLICATED
        else:
            spec = out_specs[i] if out_specs is not None else _UNKNOWN
        outputs.append(_leaf(label, result, aval, mesh, spec))
    return Expected(tuple(arguments), tuple(outputs), _parameter_names(fn))


# Sentinels for a leaf's sharding: whole on every device, or the compiler's choice.
_REPLICATED = ()
_UNKNOWN = object()


def _specs_per_leaf(shardings: Any, tree: Any) -> list[Any]:
    """The PartitionSpec of each leaf of ``tree``, from ``shardings`` (a
    pytree prefix of it, as jit takes; ``None`` where unspecified)."""
    import jax
    from jax.sharding import PartitionSpec

    if shardings is None:
        return [_REPLICATED] * len(jax.tree_util.tree_leaves(tree))
    is_spec = lambda x: isinstance(x, PartitionSpec) or x is None
    if is_spec(shardings):
        return [_spec(shardings)] * len(jax.tree_util.tree_leaves(tree))
    per_leaf: list[Any] = []

    def expand(spec: Any, subtree: Any) -> None:
        per_leaf.extend([_spec(spec)] * len(jax.tree_util.tree_leaves(subtree)))

    # jit reads a list of the positional arguments' shardings as a tuple.
    prefix = tuple(shardings) if isinstance(shardings, list) else shardings
    # tree_map over the prefix calls expand once per spec, in leaf order.
    jax.tree_util.tree_map(expand, prefix, tree, is_leaf=is_spec)
    return per_leaf


def _spec(spec: Any) -> Any:
    # None in in_shardings/out_shardings: the compiler chooses.
    return _UNKNOWN if spec is None else tuple(spec)


def _leaf(label: str, name: str, aval: Any, mesh: dict[str, int] | None, spec: Any) -> Leaf:
    shape = tuple(int(d) for d in aval.shape)
    dtype = str(aval.dtype)
    if spec is _UNKNOWN:
        return Leaf(label, name, dtype, shape, None)
    device = list(shape)
    for dim, axes in enumerate(spec):
        if axes is None or dim >= len(device):
            continue
        names = axes if isinstance(axes, tuple) else (axes,)
        if any(not isinstance(n, str) for n in names):
            return Leaf(label, name, dtype, shape, None)  # P.UNCONSTRAINED: the compiler's choice
        parts = math.prod((mesh or {}).get(n, 1) for n in names)
        device[dim] = -(-device[dim] // parts)
    return Leaf(label, name, dtype, shape, tuple(device))


def _parameter_names(fn: Any) -> tuple[str, ...]:
    import inspect

    try:
        return tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return ()


# ---------------------------------------------------------------------------
# The compiled module's side.

_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")


def entry_layout(
    hlo_text: str,
) -> tuple[list[tuple[str, tuple[int, ...]]], list[tuple[str, tuple[int, ...]]]]:
    """The module's entry parameters and results, each array as (XLA's
    element type, shape), tuples flattened, from its header's
    ``entry_computation_layout={(PARAMS)->RESULT}``. Tokens are left out:
    jit adds them for effects, they hold no memory."""
    header = hlo_text.lstrip().split("\n", 1)[0]
    start = header.find("entry_computation_layout={")
    if start < 0:
        raise SignatureMismatch(
            "the compiled module's header has no entry_computation_layout: hlomem cannot "
            "check that it is your program"
        )
    text = header[start + len("entry_computation_layout={") :]
    depth = 0
    arrow = end = -1
    for i, c in enumerate(text):
        if c in "({[":
            depth += 1
        elif c in ")}]":
            if depth == 0:
                end = i
                break
            depth -= 1
        elif c == "-" and text.startswith("->", i) and depth == 0:
            arrow = i
    if arrow < 0 or end < 0:
        raise SignatureMismatch(f"cannot read the compiled module's entry layout: {header[:300]}")
    return _arrays(text[:arrow]), _arrays(text[arrow + 2 : end])


def _arrays(text: str) -> list[tuple[str, tuple[int, ...]]]:
    found = []
    for kind, dims in _ARRAY.findall(text):
        if kind == "token":
            continue
        # A bounded dynamic dimension (<=8) is its bound in memory.
        found.append((kind, tuple(int(d.strip().lstrip("<=")) for d in dims.split(",") if d)))
    return found


def check(expected: Expected, hlo_text: str, kept: Sequence[int] | None) -> None:
    """Raises :class:`SignatureMismatch` naming every difference between
    ``expected`` and the compiled module ``hlo_text``. ``kept`` are the
    arguments jit kept (it drops those the function does not use), by their
    index among ``expected.arguments``; ``None`` when the child could not say."""
    params, results = entry_layout(hlo_text)
    arguments = list(expected.arguments)
    if kept is not None:
        arguments = [arguments[i] for i in kept if i < len(arguments)]
    problems: list[str] = []
    if len(params) != len(arguments):
        problems.append(
            f"the compiled module takes {len(params)} arrays, the function "
            f"{len(arguments)} (after jit drops unused arguments)"
        )
    else:
        problems += [_differs(leaf, got) for leaf, got in zip(arguments, params)]
    if len(results) != len(expected.outputs):
        problems.append(
            f"the compiled module returns {len(results)} arrays, the function "
            f"{len(expected.outputs)} (jax.eval_shape here)"
        )
    else:
        problems += [_differs(leaf, got) for leaf, got in zip(expected.outputs, results)]
    problems = [p for p in problems if p]
    if problems:
        shown = problems[:8] + ([f"... and {len(problems) - 8} more"] if len(problems) > 8 else [])
        raise SignatureMismatch(
            "the compiled program is not yours, so hlomem gives no verdict on it: "
            + "; ".join(shown)
            + _hint(problems)
        )


def _differs(leaf: Leaf, got: tuple[str, tuple[int, ...]]) -> str:
    kind, shape = got
    compiled = _numpy_type(kind)
    text = f"{kind}[{','.join(map(str, shape))}]"
    if compiled != leaf.dtype:
        return f"{leaf.label} is {leaf.dtype} here but was compiled as {compiled} ({text})"
    if leaf.device_shape is not None:
        if shape != leaf.device_shape:
            whole = "" if leaf.device_shape == leaf.shape else f" (of {list(leaf.shape)})"
            return (
                f"{leaf.label} is {list(leaf.device_shape)} per device{whole} here "
                f"but was compiled as {list(shape)}"
            )
        return ""
    # The compiler chose the sharding: a shard has the rank, and each
    # dimension is at most the whole (and empty only where the whole is).
    if len(shape) != len(leaf.shape) or any(
        s > w or (s == 0) != (w == 0) for s, w in zip(shape, leaf.shape)
    ):
        return (
            f"{leaf.label} is {list(leaf.shape)} here but was compiled as {list(shape)}, "
            "not a shard of it"
        )
    return ""


def _hint(problems: list[str]) -> str:
    if any(
        "is float64 here but was compiled as float32" in p
        or "is int64 here but was compiled as int32" in p
        for p in problems
    ):
        return (
            ". The compiling process did not have jax_enable_x64 on; hlomem sends it your JAX "
            "settings, so this is a bug: please report it."
        )
    return ""
