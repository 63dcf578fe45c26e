"""Agent orchestration benchmark (`make bench-agent`).

1. Overhead per turn: sessions run in-process against the replay LLM at 0 ms;
   per turn, the wall time between consecutive stored turns minus that turn's
   LLM latency (what remains is prompt building, parsing, the tool, the
   database writes). Reports p50/p95.
2. Throughput: N sessions of R rounds with L s simulated LLM latency on one
   real Celery worker (threads pool, concurrency C). Ideal wall time is
   N*R*L/C; reports wall time and the fraction of ideal reached.

Uses PostgreSQL and Redis when reachable (a throwaway database and Redis db
14), else the embedded SQLite database and broker. Run with --help for sizes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN = os.environ.get("T2S_BENCH_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("T2S_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")


def _services(use_services: bool) -> tuple[str | None, str | None, str]:
    if not use_services:
        return None, None, "embedded (SQLite app database, SQLite broker)"
    try:
        import psycopg
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
        name = f"t2s_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"{PG_ADMIN.rsplit('/', 1)[0]}/{name}", REDIS_URL, "PostgreSQL + Redis"
    except Exception as exc:  # noqa: BLE001 - fall back to embedded mode, and say so
        print(f"services unavailable ({exc}); using embedded mode", file=sys.stderr)
        return None, None, "embedded (SQLite app database, SQLite broker)"


def _drop(database_url: str | None) -> None:
    if not database_url:
        return
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def script_for(question: str, rounds: int, latency_ms: int) -> list:
    steps = []
    for i in range(rounds - 1):
        action = ['SearchValue("Iron Maiden")', 'SearchColumn(["album title"])',
                  'FindShortestPath(start="Artist.Name", end="Album.Title")',
                  'ExecuteSQL("SELECT count(*) FROM Album")'][i % 4]
        steps.append({"text": f"Thought: step {i} of {question}\nAction: {action}", "latency_ms": latency_ms})
    steps.append({"text": "Thought: done\nAction: Done", "latency_ms": latency_ms})
    return steps


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--overhead-sessions", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=float, default=1.0, help="simulated LLM latency per call, seconds")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--embedded", action="store_true", help="do not use PostgreSQL/Redis even if reachable")
    args = parser.parse_args(argv)

    database_url, broker_url, mode = _services(not args.embedded)
    var_dir = Path(tempfile.mkdtemp(prefix="t2s-bench-agent-"))
    os.environ["T2S_VAR_DIR"] = str(var_dir)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    if broker_url:
        os.environ["CELERY_BROKER_URL"] = broker_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "t2s_site.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    try:
        return _run(args, mode, var_dir)
    finally:
        from django.db import connections

        connections.close_all()
        _drop(database_url)


def _run(args, mode: str, var_dir: Path) -> int:
    from django.conf import settings
    from django.core.management import call_command

    from agent import services
    from agent.conf import agent_settings
    from agent.models import AgentSession, Turn
    from agent.services import sessions
    from tests.support.replay_server import ReplayServer
    from tests.support.worker import WorkerProcess, purge_broker

    call_command("migrate", verbosity=0)
    demo = services.database_register(name="chinook", location=str(agent_settings.DEMO_DATABASE), refresh="sync")
    print(f"mode: {mode}; app database {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[1]}; "
          f"broker {settings.CELERY_BROKER_URL.split(':', 1)[0]}")

    # 1. overhead per turn, in-process, LLM at 0 ms
    questions = [f"Overhead question {i}?" for i in range(args.overhead_sessions)]
    overheads: list[float] = []
    with ReplayServer({"scripts": {q: script_for(q, args.rounds, 0) for q in questions}}) as server:
        settings.T2S["LLM_BASE_URL"], settings.T2S["LLM_MODEL"] = server.url, "replay"
        for q in questions:
            session = sessions.session_create(database=demo, question=q, enqueue=False)
            sessions.session_execute(session_id=session.pk)
            session.refresh_from_db()
            turns = list(Turn.objects.for_session(session))
            previous = session.started_at
            for turn in turns:
                gap_ms = (turn.created_at - previous).total_seconds() * 1000
                overheads.append(max(0.0, gap_ms - (turn.llm_latency_ms or 0)))
                previous = turn.created_at
            assert session.status == AgentSession.Status.ANSWERED, session.error
            assert len(turns) == args.rounds, len(turns)
    print(f"\noverhead per turn (everything but the LLM call), {len(overheads)} turns of "
          f"{args.overhead_sessions} sessions: p50 {pct(overheads, 0.5):.1f} ms, p95 {pct(overheads, 0.95):.1f} ms, "
          f"mean {statistics.mean(overheads):.1f} ms")

    # 2. throughput on one worker
    questions = [f"Throughput question {i}?" for i in range(args.sessions)]
    latency_ms = int(args.latency * 1000)
    with ReplayServer({"scripts": {q: script_for(q, args.rounds, latency_ms) for q in questions}}) as server:
        settings.T2S["LLM_BASE_URL"], settings.T2S["LLM_MODEL"] = server.url, "replay"
        purge_broker()
        worker = WorkerProcess(var_dir, concurrency=args.concurrency, T2S_SESSION_HEARTBEAT_S="10",
                               T2S_SESSION_STALE_AFTER_S="300")
        worker.start()
        try:
            started = time.perf_counter()
            ids = [sessions.session_create(database=demo, question=q).pk for q in questions]
            while AgentSession.objects.filter(pk__in=ids, status__in=AgentSession.ACTIVE).exists():
                time.sleep(0.2)
            wall = time.perf_counter() - started
        finally:
            worker.stop()
        done = AgentSession.objects.filter(pk__in=ids, status=AgentSession.Status.ANSWERED).count()
    ideal = args.sessions * args.rounds * args.latency / args.concurrency
    print(f"\nthroughput: {args.sessions} sessions x {args.rounds} rounds x {args.latency:g} s LLM latency, "
          f"one worker, concurrency {args.concurrency}: wall {wall:.1f} s, ideal {ideal:.1f} s, "
          f"{100 * ideal / wall:.0f}% of ideal; {done}/{args.sessions} answered")
    return 0 if done == args.sessions else 1


if __name__ == "__main__":
    raise SystemExit(main())
