"""Finding and running the ``hlomem`` binary that the wheel installs.

The Python package holds no analysis of its own: every answer comes from the
Rust binary (``[tool.maturin] bindings = "bin"`` puts it in the environment's
scripts folder, beside ``python``), so the command line and the API always
agree, and the JSON it prints is the one contract.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sysconfig
from collections.abc import Sequence

__all__ = ["BinaryNotFound", "HlomemError", "failure", "find_binary", "run"]

_EXE = "hlomem.exe" if os.name == "nt" else "hlomem"


class HlomemError(Exception):
    """hlomem refused its input (exit code 2): a file it could not read, text
    that is not HLO, a message with no out-of-memory error in it.

    The message is what the command printed on standard error, positions and
    hints included.
    """

    def __init__(self, message: str, returncode: int | None = None) -> None:
        super().__init__(message)
        self.returncode = returncode


class BinaryNotFound(HlomemError, FileNotFoundError):
    """The ``hlomem`` executable is not installed where the package looks."""


def _candidates() -> list[str]:
    """Where a pip install puts the binary: the scripts folder of this
    interpreter's environment, then the user scheme's (``pip install --user``)."""
    folders = [sysconfig.get_path("scripts")]
    try:
        folders.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:  # no user scheme on this platform
        pass
    return [os.path.join(folder, _EXE) for folder in folders if folder]


def find_binary() -> str:
    """The path of the ``hlomem`` executable to run.

    ``HLOMEM_BIN`` when set (a build from a checkout:
    ``HLOMEM_BIN=target/release/hlomem``), else the one pip installed beside
    this Python, else the first on ``PATH``.
    """
    __tracebackhide__ = True  # pytest: hlomem's frames are not the test's
    override = os.environ.get("HLOMEM_BIN")
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override
        raise BinaryNotFound(f"HLOMEM_BIN={override} is not an executable file")
    for candidate in _candidates():
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which(_EXE)
    if on_path:
        return on_path
    looked = ", ".join(_candidates())
    raise BinaryNotFound(
        f"the hlomem executable was not found (looked in {looked} and on PATH). "
        "`pip install hlomem` (or `pip install .` in a checkout) installs it beside python; "
        "or set HLOMEM_BIN to a binary built with `cargo build --release`."
    )


def run(args: Sequence[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """Runs ``hlomem ARGS`` without colors, ``stdin`` on its standard input,
    and returns it finished, whatever its exit code (the callers give the
    codes their meaning: 0 ok, 1 a check failed, 2 input error)."""
    __tracebackhide__ = True
    # `--interface python`: notes name what to do in Python, not a flag.
    command = [find_binary(), "--color", "never", "--interface", "python", *args]
    return subprocess.run(
        command,
        input=stdin if stdin is not None else b"",
        capture_output=True,
        check=False,
    )


def failure(process: subprocess.CompletedProcess[bytes]) -> HlomemError:
    """The error for a run that exited 2 (or crashed), with what it printed."""
    stderr = process.stderr.decode("utf-8", "replace").strip()
    if process.returncode < 0:
        # Killed by a signal: say which, and what it usually means, rather
        # than "exited with code -9".
        number = -process.returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        why = {
            "SIGKILL": " (the kernel's out-of-memory killer, or a container's memory limit, kills with it)",
            "SIGABRT": " (an abort: please report it with the input)",
            "SIGSEGV": " (a crash: please report it with the input)",
        }.get(name, "")
        killed = f"hlomem was killed by {name}{why}"
        stderr = f"{killed}\n{stderr}" if stderr else killed
    elif not stderr:
        stderr = f"hlomem exited with code {process.returncode} and printed no error"
    return HlomemError(stderr, process.returncode)
