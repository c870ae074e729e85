"""Fixtures of the Python tests: real JAX compiles of one MLP training step
(``mlp.py``), in this process and, for a dump folder, in a child process with
``XLA_FLAGS=--xla_dump_to``. Nothing is mocked: the package runs the hlomem
binary installed with it (or ``HLOMEM_BIN``).

Run from a checkout: ``pytest tests/python`` (``.ci/run`` does, in a fresh
virtual environment with the wheel and ``jax[cpu]`` installed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# `import mlp` from the tests, whatever the working directory.
sys.path.insert(0, str(HERE))

import mlp


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def step_nodonate() -> Any:
    """The training step compiled without donation: a jax.stages.Compiled."""
    return mlp.compile_step(donate=False)


@pytest.fixture(scope="session")
def step_donate() -> Any:
    """The training step compiled with its parameters donated."""
    return mlp.compile_step(donate=True)


@pytest.fixture(scope="session")
def dump_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dump folder XLA writes while compiling both steps (in a child
    process: XLA reads XLA_FLAGS once, when it starts)."""
    folder = tmp_path_factory.mktemp("dump")
    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={folder} --xla_dump_hlo_as_text")
    subprocess.run([sys.executable, str(HERE / "mlp.py")], env=env, check=True)
    return folder
