"""PostgreSQL and Redis servers of a test's own, on free ports and temporary directories.

Fault tests stop, kill and restart these; the shared services (5432, 6379) are never touched. PostgreSQL
comes from Debian's /usr/lib/postgresql/*/bin (initdb + pg_ctl), run as the ``postgres`` account when the
tests run as root (initdb refuses root); Redis is ``redis-server`` without persistence, so killing it
loses every queued message, as a broker restart without persistence does.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_port(port: int, timeout: float, *, up: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.1)
    raise RuntimeError(f"port {port} still {'closed' if up else 'open'} after {timeout} s")


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def redis_bin() -> str | None:
    return shutil.which("redis-server")


class PrivatePostgres:
    def __init__(self) -> None:
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
        self.bin = bin_dir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="t2s-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                   "--no-sync"])

    def _run(self, cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120, **kwargs)

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def start(self) -> PrivatePostgres:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off " \
                  f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=100"
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.log), "-w",
                   "start"])
        _wait_port(self.port, 30)
        return self

    def stop(self, mode: str = "fast") -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def restart(self) -> None:
        """A fast restart: every connection is terminated ("terminating connection due to administrator
        command"), then new ones meet "the database system is starting up" for a moment."""
        self.stop("fast")
        self.start()

    def close(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def execute(self, sql: str, dbname: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}", autocommit=True) as conn:
            conn.execute(sql)


class PrivateRedis:
    def __init__(self) -> None:
        binary = redis_bin()
        if binary is None:
            raise RuntimeError("redis-server not found")
        self.binary = binary
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="t2s-redis-"))
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.root)], stdout=(self.root / "redis.log").open("a"), stderr=subprocess.STDOUT)
        _wait_port(self.port, 20)
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """SIGKILL (or a clean shutdown with SIGTERM): without persistence, the queued messages are gone."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait()
        _wait_port(self.port, 10, up=False)

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)
