"""Fault injection on a real deployment: a worker SIGKILLed mid-run, the broker killed or shut down and restarted
with messages queued, the database restarted mid-run, and the embedded mode (SQLite app database and broker) with
a worker killed and restarted. The worker consumes every queue and runs beat, as `manage.py serve` does. Each runs a 24-question run against the replay LLM and checks that no session is lost, no
turn is stored twice, no LLM call is repeated for a turn that was stored (only a call in flight at the
fault may be), and that the run finishes within a bound after the fault.

Everything runs on the test's own PostgreSQL and Redis (tests/support/private_services.py), started and
stopped here; the shared services are never touched. They skip when the server binaries are missing,
and fail instead in CI (T2S_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import service_unavailable
from tests.support.private_services import PrivatePostgres, PrivateRedis, postgres_bin, redis_bin
from tests.support.replay_server import ReplayServer
from tests.support.run_dataset import question, replay_script
from tests.support.worker import WorkerProcess

pytestmark = pytest.mark.faults

ROOT = Path(__file__).resolve().parents[2]
N = 24
ROUNDS = 3
RECOVERY_BOUND_S = 45  # from the fault to the run scored
KNOBS = {"T2S_SESSION_HEARTBEAT_S": "0.5", "T2S_SESSION_STALE_AFTER_S": "2",
         "T2S_SESSION_QUEUED_STALE_AFTER_S": "3", "T2S_DISPATCH_POLL_S": "2"}


class Deployment:
    """The app's processes on one app database and broker: setup, workers, and reads of what they stored."""

    def __init__(self, tmp: Path, *, database_url: str | None, broker_url: str | None) -> None:
        self.var = Path(tempfile.mkdtemp(prefix="t2s-faults-var-"))
        self.tmp = tmp
        env = {k: v for k, v in os.environ.items()
               if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "PYTEST_ADDOPTS", "T2S_INDEX_DIR")}
        env.update(KNOBS, T2S_VAR_DIR=str(self.var))
        if database_url:
            env["DATABASE_URL"] = database_url
        if broker_url:
            env["CELERY_BROKER_URL"] = broker_url
        self.env = env
        self.database_url = database_url or f"sqlite:///{self.var / 'app.sqlite3'}"
        self.broker_url = broker_url or f"sqla+sqlite:///{self.var / 'celery-broker.sqlite'}"

    def manage(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "tests.faults.scenario", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip()

    def worker(self, concurrency: int) -> WorkerProcess:
        return WorkerProcess(self.tmp, concurrency=concurrency, name="faults", beat=True,
                             **{**self.env, "DATABASE_URL": self.database_url, "CELERY_BROKER_URL": self.broker_url,
                                "T2S_INDEX_DIR": str(self.var / "indexes")})

    def rows(self, sql: str) -> list[tuple]:
        if self.database_url.startswith("sqlite:///"):
            conn = sqlite3.connect(self.database_url.removeprefix("sqlite:///"), timeout=30)
            try:
                return conn.execute(sql).fetchall()
            finally:
                conn.close()
        import psycopg

        for attempt in range(50):  # the database may be restarting
            try:
                with psycopg.connect(self.database_url.replace("postgres://", "postgresql://", 1),
                                     connect_timeout=3) as conn:
                    return conn.execute(sql).fetchall()
            except psycopg.OperationalError:
                if attempt == 49:
                    raise
                time.sleep(0.2)
        return []

    def statuses(self, run_id: int) -> dict[str, int]:
        return dict(self.rows(
            "SELECT s.status, count(*) FROM annotations_runitem i JOIN agent_agentsession s ON s.id = i.session_id "
            f"WHERE i.run_id = {run_id} GROUP BY s.status"))

    def run_status(self, run_id: int) -> str:
        return self.rows(f"SELECT status FROM annotations_run WHERE id = {run_id}")[0][0]

    def wait(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.3)
        state = self.rows("SELECT id, status, attempts, lease, error FROM agent_agentsession "
                          "WHERE status NOT IN ('answered') ORDER BY id")
        runs = self.rows("SELECT id, status, error FROM annotations_run")
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.tmp.glob("worker-*.log")))
        raise AssertionError(f"timed out after {timeout} s waiting for {what}; runs {runs}; "
                             f"sessions not answered {state}\n{logs}")


def start_run(deployment: Deployment, *, latency_ms: int, concurrency: int) -> tuple[int, ReplayServer]:
    server = ReplayServer(replay_script(N, rounds=ROUNDS, latency_ms=latency_ms, spare=2)).start()
    run_id = int(deployment.manage("setup", str(N), server.url, str(concurrency)).splitlines()[-1])
    return run_id, server


def check_nothing_lost_or_repeated(deployment: Deployment, run_id: int, server: ReplayServer, *,
                                   repeats_allowed: int) -> None:
    assert deployment.run_status(run_id) == "done"
    items = deployment.rows(f"SELECT question_id, session_id, predicted_sql, ex FROM annotations_runitem "
                            f"WHERE run_id = {run_id}")
    assert len(items) == N
    # No lost session, none started twice for one question, every one answered and scored right.
    assert all(session_id is not None for _, session_id, _, _ in items)
    assert len({session_id for _, session_id, _, _ in items}) == N
    assert deployment.statuses(run_id) == {"answered": N}
    assert all(sql and ex for _, _, sql, ex in items), items
    assert deployment.rows("SELECT count(*) FROM agent_agentsession")[0][0] == N
    turns = defaultdict(list)
    for _session_id, index, thought, q in deployment.rows(
            "SELECT t.session_id, t.\"index\", t.thought, s.question FROM agent_turn t "
            "JOIN agent_agentsession s ON s.id = t.session_id ORDER BY t.session_id, t.\"index\""):
        turns[q].append((index, thought))
    # The LLM calls per question and conversation round (the round is the number of earlier replies in the
    # prompt). A round's stored turn must come from the last call of that round: an earlier call of the same
    # round may only be one whose turn was never stored (in flight at the fault).
    calls = defaultdict(list)
    for request in server.chat_requests():
        rnd = sum(1 for m in request.messages if m["role"] == "assistant")
        calls[(request.script_key, rnd)].append(request.step_index)
    scripts = replay_script(N, rounds=ROUNDS, spare=2)["scripts"]
    repeats = 0
    for i in range(N):
        q = question(i)[0]
        stored = turns[q]
        assert [index for index, _ in stored] == list(range(len(stored))), stored  # no duplicated turn
        assert stored and stored[-1][1] == "ok"
        for index, thought in stored:
            served = calls[(q, index)]
            assert served, (q, index)
            last_text = scripts[q][served[-1]]["text"]
            assert last_text.startswith(f"Thought: {thought}\n"), (q, index, thought, served)
            repeats += len(served) - 1
        assert not calls.get((q, len(stored))), f"a call after the last stored turn of {q!r}"
    assert repeats <= repeats_allowed


# --- services ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_and_redis():
    if postgres_bin() is None or redis_bin() is None:
        service_unavailable("PostgreSQL server binaries (/usr/lib/postgresql/*/bin) and redis-server")
    pg = PrivatePostgres().start()
    redis = PrivateRedis().start()
    template = "t2s_faults_template"
    pg.execute(f"CREATE DATABASE {template}")
    Deployment(Path(tempfile.mkdtemp()), database_url=pg.url(template), broker_url=redis.url).manage("migrate")
    try:
        yield pg, redis, template
    finally:
        redis.close()
        pg.close()


@pytest.fixture
def deployment(pg_and_redis, tmp_path, request):
    pg, redis, template = pg_and_redis
    name = "t2s_" + re.sub(r"\W", "_", request.node.name.lower())[-40:]  # a parametrized test's id included
    pg.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    # Each test on an empty broker database of its own.
    db_number = len(request.node.name) % 15 + 1
    return Deployment(tmp_path, database_url=pg.url(name), broker_url=redis.url.rsplit("/", 1)[0] + f"/{db_number}")


def _stop(*things) -> None:
    for thing in things:
        try:
            thing.stop()
        except Exception:  # noqa: BLE001 - cleanup of a process a fault may already have ended
            pass


# --- the faults ---------------------------------------------------------------------------------------


def kill_worker_mid_run_and_restart(deployment, *, latency_ms: int) -> None:
    """SIGKILL the run's worker after six answers, start it again under the same name (it requeues what its
    previous process held, at once): the run is scored within the bound, nothing lost, nothing repeated but the
    sessions in flight."""
    run_id, server = start_run(deployment, latency_ms=latency_ms, concurrency=6)
    worker = deployment.worker(8).start()
    try:
        deployment.wait(lambda: deployment.statuses(run_id).get("answered", 0) >= 6, 90, "six answered sessions")
        in_flight = deployment.statuses(run_id).get("running", 0)
        worker.kill()
        fault = time.monotonic()
        worker.start()
        deployment.wait(lambda: deployment.run_status(run_id) == "done", RECOVERY_BOUND_S, "the run to be scored")
        assert time.monotonic() - fault < RECOVERY_BOUND_S
        check_nothing_lost_or_repeated(deployment, run_id, server, repeats_allowed=max(in_flight, 6))
    finally:
        _stop(worker, server)


def test_worker_sigkilled_mid_run_then_restarted_loses_and_repeats_nothing(deployment):
    kill_worker_mid_run_and_restart(deployment, latency_ms=300)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "shut-down"])
def test_broker_restarted_under_a_run_loses_no_session_and_the_worker_carries_on(deployment, pg_and_redis, how):
    # With the default lost-message sweep: a queued session whose message went with the broker starts again
    # within 30 s of the restart, the worker (sessions, dispatch and beat in one process) survives, and the
    # run is scored with no one restarting anything.
    _, redis, _ = pg_and_redis
    deployment.env.pop("T2S_SESSION_QUEUED_STALE_AFTER_S")
    run_id, server = start_run(deployment, latency_ms=300, concurrency=12)
    worker = deployment.worker(3).start()  # fewer threads than the run's sessions: messages wait in Redis
    try:
        deployment.wait(lambda: deployment.statuses(run_id).get("answered", 0) >= 3, 90, "three answered sessions")
        assert deployment.statuses(run_id).get("queued", 0) > 0
        redis.kill(how)  # no persistence: every queued message is gone
        redis.start()
        fault = time.monotonic()
        queued = {pk for (pk,) in deployment.rows(
            f"SELECT s.id FROM annotations_runitem i JOIN agent_agentsession s ON s.id = i.session_id "
            f"WHERE i.run_id = {run_id} AND s.status = 'queued'")}
        deployment.wait(lambda: not queued & {pk for (pk,) in deployment.rows(
            "SELECT id FROM agent_agentsession WHERE status = 'queued'")}, 30, "the lost sessions to start again")
        deployment.wait(lambda: deployment.run_status(run_id) == "done", RECOVERY_BOUND_S, "the run to be scored")
        assert time.monotonic() - fault < RECOVERY_BOUND_S
        check_nothing_lost_or_repeated(deployment, run_id, server, repeats_allowed=12)
        assert worker.proc.poll() is None and "Unrecoverable error" not in worker.log.read_text()
    finally:
        _stop(worker, server)


def test_database_restarted_mid_run_fails_no_session(deployment, pg_and_redis):
    pg, _, _ = pg_and_redis
    run_id, server = start_run(deployment, latency_ms=300, concurrency=8)
    worker = deployment.worker(8).start()
    try:
        deployment.wait(lambda: deployment.statuses(run_id).get("answered", 0) >= 6, 90, "six answered sessions")
        pg.restart()  # "terminating connection due to administrator command", then "starting up"
        fault = time.monotonic()
        deployment.wait(lambda: deployment.run_status(run_id) == "done", RECOVERY_BOUND_S, "the run to be scored")
        assert time.monotonic() - fault < RECOVERY_BOUND_S
        check_nothing_lost_or_repeated(deployment, run_id, server, repeats_allowed=8)
    finally:
        _stop(worker, server)


def test_embedded_mode_worker_killed_and_restarted_loses_and_repeats_nothing(tmp_path):
    deployment = Deployment(tmp_path, database_url=None, broker_url=None)
    deployment.manage("migrate")
    kill_worker_mid_run_and_restart(deployment, latency_ms=150)  # SQLite's migrate takes longer
