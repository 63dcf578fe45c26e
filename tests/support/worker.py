"""A real Celery worker process for end-to-end tests, on the same broker and test database as the test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

from agent.conf import agent_settings

ROOT = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    cfg = connection.settings_dict
    if cfg["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{cfg['NAME']}"
    auth = cfg["USER"] + (f":{cfg['PASSWORD']}" if cfg.get("PASSWORD") else "")
    return f"postgres://{auth}@{cfg['HOST'] or '127.0.0.1'}:{cfg['PORT'] or 5432}/{cfg['NAME']}"


class WorkerProcess:
    def __init__(self, log_dir: Path, *, concurrency: int = 4, name: str = "test", beat: bool = False,
                 **env: str) -> None:
        self.log_dir = log_dir
        self.concurrency = concurrency
        self.beat = beat  # embedded Celery beat, as `manage.py serve` runs it: the runs' poll
        self.name = name  # kept across restarts: a restarted worker takes its own sessions back at once
        self.env = {**os.environ, "DATABASE_URL": _database_url(),
                    "T2S_INDEX_DIR": str(agent_settings.INDEX_DIR), "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
                    "T2S_SESSION_HEARTBEAT_S": "0.5", "T2S_SESSION_STALE_AFTER_S": "2", **env}
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, timeout: float = 90) -> WorkerProcess:
        self.starts += 1
        log = self.log_dir / f"worker-{self.starts}.log"
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "t2s_site", "worker", "--pool", "threads", "--concurrency", str(self.concurrency),
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{self.name}@%h",
             "--loglevel", "INFO",
             *(["--beat", "--schedule", str(self.log_dir / "celerybeat-schedule")] if self.beat else [])],
            cwd=ROOT, env=self.env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if " ready." in log.read_text():
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited:\n{log.read_text()}")
            time.sleep(0.2)
        raise RuntimeError(f"worker did not start in {timeout} s:\n{log.read_text()}")

    def kill(self) -> None:
        """SIGKILL, as when a machine dies: no cleanup, no acknowledgement."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def purge_broker() -> None:
    from t2s_site.celery import app

    app.control.purge()
