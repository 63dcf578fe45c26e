"""Run SQLite queries in a child process whose memory and time the operating system bounds.

``SQLiteSandbox`` owns one child (``_sqlite_child.py``), started on first use
and restarted after it is killed. A query's answer must arrive within its time
limit plus ``GRACE_S``; otherwise the child is killed (SIGKILL: nothing in it
can hold the deadline back) and the query fails with ``QueryTimeout``. The
child's address space is capped, so a query that tries to build gigabytes ends
in the child with "result too large" while this process only ever receives a
result already cut to ``Limits.max_bytes``.

One sandbox serves any number of files (the child keeps a few connections
open); it is not thread-safe: use one per thread.
"""

from __future__ import annotations

import marshal
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from .base import SQLError

CHILD_SCRIPT = Path(__file__).with_name("_sqlite_child.py")
GRACE_S = 0.5
_START_TIMEOUT_S = 10.0


class SandboxFailed(SQLError):
    """The child process died or answered something unreadable."""


class SQLiteSandbox:
    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()

    def request(self, payload: dict[str, Any], *, timeout_s: float, max_answer: int) -> dict[str, Any] | None:
        """Send one request; the answer, or None when the deadline passed (the child was killed).

        ``max_answer`` bounds the answer's size in bytes: a larger one kills the child
        (it cannot happen unless the child misbehaves) rather than being read.
        """
        with self._lock:
            proc = self._ensure()
            data = marshal.dumps(payload)
            try:
                assert proc.stdin is not None
                proc.stdin.write(struct.pack(">I", len(data)) + data)
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                self._kill()
                raise SandboxFailed("The query process stopped unexpectedly; try again.") from None
            deadline = _now() + timeout_s + GRACE_S
            header = self._read(4, deadline)
            if header is None:
                self._kill()
                return None
            size = struct.unpack(">I", header)[0]
            if size > max_answer:
                self._kill()
                raise SandboxFailed(f"The query process sent {size} bytes, more than {max_answer}.")
            body = self._read(size, deadline + 5.0)  # the answer is on its way: allow for the copy
            if body is None:
                self._kill()
                return None
            try:
                answer = marshal.loads(body)
            except (ValueError, EOFError, TypeError):
                self._kill()
                raise SandboxFailed("The query process sent an unreadable answer.") from None
            if not isinstance(answer, dict):
                self._kill()
                raise SandboxFailed("The query process sent an unreadable answer.")
            return answer

    def start(self) -> None:
        """Start the child now without waiting for it: its interpreter boots (about 25 ms of CPU, in its own
        process) while the caller does other work, e.g. a session's first LLM call, instead of holding up the
        first query. 64 sessions starting at once paid up to 1.5 s for that boot at their first query."""
        with self._lock:
            self._ensure()

    def _read(self, n: int, deadline: float) -> bytes | None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        chunks: list[bytes] = []
        got = 0
        while got < n:
            remaining = deadline - _now()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, min(n - got, 1 << 20))
            if not chunk:
                raise SandboxFailed("The query process stopped unexpectedly (out of memory?); try again.")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        env = {"MALLOC_ARENA_MAX": "2", "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
        if "T2S_SQLITE_CHILD_BUDGET" in os.environ:
            env["T2S_SQLITE_CHILD_BUDGET"] = os.environ["T2S_SQLITE_CHILD_BUDGET"]
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(CHILD_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env=env, close_fds=True, bufsize=0)
        except OSError as exc:
            raise SandboxFailed(f"Cannot start the query process: {exc}") from exc
        self._finalizer = weakref.finalize(self, _stop, self._proc)
        return self._proc

    def _kill(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._proc is not None:
            _stop(self._proc, kill=True)
            self._proc = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def close(self) -> None:
        with self._lock:
            if self._finalizer is not None:
                self._finalizer.detach()
                self._finalizer = None
            if self._proc is not None:
                _stop(self._proc)
                self._proc = None


def _stop(proc: subprocess.Popen[bytes], kill: bool = False) -> None:
    try:
        if kill:
            proc.send_signal(signal.SIGKILL)
        elif proc.stdin is not None:
            proc.stdin.close()  # the child exits at end of input
        try:
            proc.wait(timeout=0.5 if not kill else 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    except (OSError, subprocess.SubprocessError):
        pass
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


def _now() -> float:
    return time.monotonic()
