"""XLA's own parser (jaxlib's `hlo_module_from_text`) in a worker process.

Not in the caller's process: on some inputs (a parameter number out of
range) XLA aborts on a failed CHECK, which counts as a refusal, and forking a
process that runs JAX (multithreaded) may deadlock. The worker is started
fresh (`subprocess`, no fork of the caller) and started again after each
abort.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from typing import IO

_WORKER = r"""
import os, struct, sys
os.dup2(os.open(os.devnull, os.O_WRONLY), 2)   # XLA's CHECK messages are noise here
from jax._src.lib import xla_client
read, write = sys.stdin.buffer, sys.stdout.buffer
while True:
    head = read.read(8)
    if len(head) < 8:
        break
    text = read.read(struct.unpack("<Q", head)[0]).decode("utf-8", "replace")
    try:
        xla_client.hlo.hlo_module_from_text(text)
        write.write(b"0")
    except Exception:
        write.write(b"1")
    write.flush()
"""


class XlaParser:
    """`refuses(text)`: does XLA's parser refuse this module?"""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _WORKER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        return self._process

    def refuses(self, text: str) -> bool:
        process = self._start()
        data = text.encode("utf-8")
        stdin: IO[bytes] = process.stdin  # type: ignore[assignment]
        stdout: IO[bytes] = process.stdout  # type: ignore[assignment]
        try:
            stdin.write(struct.pack("<Q", len(data)) + data)
            stdin.flush()
            answer = stdout.read(1)
        except BrokenPipeError:
            answer = b""
        if answer == b"0":
            return False
        if answer != b"1":
            # The worker died on this module (XLA aborted): a refusal.
            process.wait()
            self._process = None
        return True

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.stdin.close()  # type: ignore[union-attr]
            self._process.wait()
        self._process = None
