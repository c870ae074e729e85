"""The gate on what teams run: a flax transformer's training step with
optax's AdamW and donated parameters and optimizer state (issue #37). With
the default ``fail_on`` it fails only on the budget: the copies every
donated optimizer step makes (the backward pass reads a weight the update
writes) are findings of severity ``info``, never a failure. Over the budget,
the failure names the module and the groups that hold the peak. The budgets
are set around the module's "Total bytes used", whose parts are checked
against XLA's own ``memory_analysis()`` first (the total adds the constants'
allocations, which ``memory_analysis()`` leaves out)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

flax_linen = pytest.importorskip("flax.linen")
optax = pytest.importorskip("optax")

import jax
import jax.numpy as jnp

import hlomem
from hlomem._binary import find_binary

nn = flax_linen


class Block(nn.Module):
    d: int

    @nn.compact
    def __call__(self, x: Any) -> Any:
        x = x + nn.SelfAttention(num_heads=4, deterministic=True)(nn.LayerNorm()(x))
        h = nn.gelu(nn.Dense(4 * self.d)(nn.LayerNorm()(x)))
        return x + nn.Dense(self.d)(h)


class Gpt(nn.Module):
    vocab: int = 4096
    d: int = 128
    layers: int = 2

    @nn.compact
    def __call__(self, tokens: Any) -> Any:
        embed = nn.Embed(self.vocab, self.d)
        x = embed(tokens)
        for _ in range(self.layers):
            x = Block(self.d)(x)
        return embed.attend(nn.LayerNorm()(x))


@pytest.fixture(scope="module")
def step() -> Any:
    model, tx = Gpt(), optax.adamw(1e-3)
    tokens = jax.ShapeDtypeStruct((8, 129), jnp.int32)
    sample = jnp.zeros((8, 128), jnp.int32)
    params = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), sample))["params"]
    opt_state = jax.eval_shape(tx.init, params)

    def train_step(params: Any, opt_state: Any, tokens: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            logits = model.apply({"params": p}, tokens[:, :-1])
            return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return jax.jit(train_step, donate_argnums=(0, 1)).lower(params, opt_state, tokens).compile()


def xla_needs(compiled: Any) -> int:
    """What the module needs, its parts equal to XLA's."""
    xla = compiled.memory_analysis()
    memory = hlomem.analyze(compiled).memory
    assert memory.argument_bytes == xla.argument_size_in_bytes
    assert memory.output_bytes == xla.output_size_in_bytes
    assert memory.alias_bytes == xla.alias_size_in_bytes
    assert memory.temp_bytes == xla.temp_size_in_bytes
    return int(memory.total_bytes)


def test_a_donated_optax_step_within_its_budget_passes(step: Any) -> None:
    needs = xla_needs(step)
    result = hlomem.assert_fits(step, budget=needs + (1 << 20))  # the default fail_on
    assert result.passed
    assert result.modules[0].bytes == needs
    # The optimizer's copies are there, and said to be expected, not failures.
    findings = hlomem.analyze(step).findings
    copies = [f for f in findings if f.code == "HM003"]
    assert copies and all(f["severity"] == "info" for f in copies), [
        (f.code, f["severity"]) for f in findings
    ]
    # The command line says the same.
    process = subprocess.run(
        [find_binary(), "check", "-", "--budget", f"{needs + (1 << 20)}B"],
        input=step.as_text().encode(),
        capture_output=True,
        check=False,
    )
    assert process.returncode == 0, process.stdout.decode() + process.stderr.decode()


def test_the_same_step_over_its_budget_fails_naming_what_holds_the_peak(step: Any) -> None:
    needs = xla_needs(step)
    with pytest.raises(hlomem.OutOfBudget) as caught:
        hlomem.assert_fits(step, budget=needs - (1 << 20))
    message = str(caught.value)
    first, *rest = message.splitlines()
    assert first.startswith("jit_train_step needs "), first
    assert "over by 1.00MiB" in first, first
    assert rest[0].lstrip().startswith("what holds the live peak"), message
    # The top groups: the user's own lines (this file) and the arguments.
    top = "\n".join(rest[1:4])
    assert "test_gate_flax_optax.py:" in top or "argument `" in top, message
    process = subprocess.run(
        [find_binary(), "check", "-", "--budget", f"{needs - (1 << 20)}B"],
        input=step.as_text().encode(),
        capture_output=True,
        check=False,
    )
    assert process.returncode == 1, process.stdout.decode() + process.stderr.decode()
