"""What travels from the caller's process to the child that compiles
(:func:`hlomem.compile_for`), so that the child compiles what the caller
would: JAX's configuration and XLA's flags.

**JAX's configuration.** Every value of ``jax.config`` travels (as the
caller sees it at the call: a ``with jax.default_matmul_precision(...)``
block counts), except the settings of :data:`_PROCESS_LOCAL`, which say how
and where a process runs rather than what is compiled. The child sets each
value that differs from its own. Why all and not a list of the ones known
to matter: the settings that change a compile are spread over JAX's source
and grow with each release. JAX's own jit cache key names 46 of them
(``jax_enable_x64``, ``jax_default_matmul_precision``,
``jax_threefry_partitionable``...), but settings outside it change the
program too (``jax_default_prng_impl`` the shape of a key,
``jax_compiler_enable_remat_pass``, ``jax_memory_fitting_effort`` and
``jax_optimization_level`` XLA's compile options). A setting added by a
later JAX travels unless it is named here as process-local.

**XLA's flags.** The child's environment is the caller's, so ``XLA_FLAGS``
and ``LIBTPU_INIT_ARGS`` reach its compiler as they are when
:func:`compile_for` is called, with their ``--xla_dump_*`` flags replaced
by the child's own (they choose what XLA writes, not what it compiles, and
hlomem reads the dump they write).
"""

from __future__ import annotations

import pickle
import shlex
from collections.abc import Mapping
from typing import Any

__all__ = ["apply_config", "config_to_send", "flags_with_dump"]

# Settings of where and how a process runs, not of what it compiles: the
# platform and devices (the child compiles deviceless on the CPU platform),
# the persistent compilation cache (a cache hit would skip the compile and
# its dump; the child never uses it), logging, IR dumps, runtime guards and
# multi-host transfers.
_PROCESS_LOCAL = frozenset(
    {
        "jax_platforms",
        "jax_platform_name",
        "jax_xla_backend",
        "jax_backend_target",
        "jax_pjrt_client_create_options",
        "jax_cuda_visible_devices",
        "jax_rocm_visible_devices",
        "jax_oneapi_visible_devices",
        "mock_num_gpu_processes",
        "jax_mock_gpu_topology",
        "jax_num_cpu_devices",
        "jax_cpu_enable_async_dispatch",
        "jax_cpu_collectives_implementation",
        "jax_cpu_get_local_topology_timeout_minutes",
        "jax_cpu_get_global_topology_timeout_minutes",
        "jax_default_device",
        "jax_sort_devices_by_process_index",
        "jax_force_dcn_cross_host_transfers",
        "jax_distributed_debug",
        "jax_enable_recoverability",
        "jax_enable_preemption_service",
        "jax_check_proxy_envs",
        "jax_enable_compilation_cache",
        "jax_raise_persistent_cache_errors",
        "jax_log_compiles",
        "jax_explain_cache_misses",
        "jax_logging_level",
        "jax_debug_log_modules",
        "jax_debug_leaked_clients_on_clear_backends",
        "jax_dump_ir_to",
        "jax_dump_ir_modes",
        "jax_pprint_use_color",
        "jax_traceback_filtering",
        "jax_tracer_error_num_traceback_frames",
        "jax_compiler_detailed_logging_min_ops",
        "jax_array_garbage_collection_guard",
        "jax_thread_guard",
    }
)
_PROCESS_LOCAL_PREFIXES = (
    "jax_compilation_cache",
    "jax_persistent_cache",
    "jax_share_binary_between_hosts",
    "jax_cross_host",
    "jax_transfer_guard",
)


def is_process_local(name: str) -> bool:
    """Whether the setting ``name`` is about the process, not the program."""
    return name in _PROCESS_LOCAL or name.startswith(_PROCESS_LOCAL_PREFIXES)


def config_to_send() -> tuple[dict[str, Any], list[str]]:
    """This process's JAX settings for the child (name -> value), and the
    names of those that cannot travel (their value does not pickle)."""
    import jax

    sent: dict[str, Any] = {}
    unsent: list[str] = []
    for name, value in jax.config.values.items():
        if is_process_local(name):
            continue
        try:
            pickle.dumps(value)
        except Exception:  # noqa: BLE001 -- any value that does not pickle stays here
            unsent.append(name)
            continue
        sent[name] = value
    return sent, unsent


def apply_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """In the child, before anything is traced: sets each of ``config``'s
    values that differs from the child's own, and returns those it set.

    Raises ``RuntimeError`` naming the settings the child does not know or
    refused: their compile would not be the caller's. The persistent
    compilation cache is turned off: a cached executable has no dump."""
    import jax

    own = jax.config.values
    applied: dict[str, Any] = {}
    failed: list[str] = []
    for name, value in config.items():
        if name not in own:
            failed.append(f"{name} (unknown to the compiling process's jax)")
            continue
        if _same(own[name], value):
            continue
        try:
            jax.config.update(name, value)
        except Exception as e:  # noqa: BLE001 -- reported by name below
            failed.append(f"{name}={value!r} ({type(e).__name__}: {e})")
            continue
        applied[name] = value
    if failed:
        raise RuntimeError(
            "the compiling process could not take this process's JAX settings, so its "
            "compile would not be yours: " + "; ".join(failed)
        )
    jax.config.update("jax_enable_compilation_cache", False)
    return applied


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 -- a value without a plain == is set again
        return False


def flags_with_dump(flags: str, dump_flags: list[str]) -> str:
    """``flags`` (``XLA_FLAGS`` or ``LIBTPU_INIT_ARGS``) with its
    ``--xla_dump_*`` flags replaced by ``dump_flags``."""
    kept = [f for f in shlex.split(flags) if not f.startswith("--xla_dump_")]
    return " ".join([shlex.quote(f) for f in kept] + dump_flags)
