"""``make bench-experiments``: what an exemplar experiment costs in worker time on the replay endpoint.

On PostgreSQL and Redis of its own (tests/support/private_services.py; ``--embedded``: the SQLite app database
and broker), one Celery worker (threads pool, sampled by benchmarks/runs/worker.py), the replay LLM server in a
process of its own and a dataset built on the spot (no ../shared). Alternated ``--repeats`` times:

1. an ordinary run of v1 over the ``--questions`` questions at concurrency ``--concurrency``;
2. ``manage.py experiment --candidate 1 --suite all --trials T --concurrency C --wait``: the candidate (v1 plus
   an exemplar) and v1, T runs each, the same questions (2 x T x questions sessions), the command's own report.

Each prints the wall time from launch to the last session and to the last run scored, the worker's CPU time in
that window, CPU per session, and the experiment against 2 x T ordinary runs. Every session makes two LLM
calls of ``--latency-ms``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class App:
    def __init__(self, env: dict[str, str], var: Path) -> None:
        self.env, self.var = env, var

    def step(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "benchmarks.experiments.setup", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=1800)
        if done.returncode:
            raise SystemExit(f"step {args} failed:\n{done.stderr[-4000:]}")
        return done.stdout.strip()

    def watch(self, kind: str, pk: str, timeout: float) -> dict:
        """The first report (one a second, from one process) where everything is scored."""
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.experiments.setup", "watch", kind, pk], cwd=ROOT,
                                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + timeout
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                report = json.loads(line)
                if report["done"]:
                    return report
                if time.monotonic() > deadline:
                    break
            raise SystemExit(f"timed out waiting for {kind} {pk}")
        finally:
            proc.kill()
            proc.wait()


def cpu_between(stats: Path, start: float, end: float, field: str = "cpu_s") -> float:
    """The worker's CPU seconds (``dispatch_cpu_s``: its dispatcher's) between two moments, from its one-a-second
    samples."""
    rows = [json.loads(line) for line in stats.read_text().splitlines() if line.strip()]
    inside = [r for r in rows if start <= r["t"] <= end + 1.5] or rows
    before = [r for r in rows if r["t"] < start]
    first = before[-1] if before else inside[0]
    return inside[-1][field] - first[field]


def load() -> str:
    return open("/proc/loadavg").read().split()[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--latency-ms", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=24,
                        help="sessions at once: the ordinary run's, the experiment's over all its runs, the endpoint's")
    parser.add_argument("--threads", type=int, default=24, help="the worker's threads")
    parser.add_argument("--repeats", type=int, default=1, help="how many times to alternate the two")
    parser.add_argument("--embedded", action="store_true", help="SQLite app database and broker")
    parser.add_argument("--keep", action="store_true", help="keep the bench's folder (kept anyway on failure)")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from benchmarks.experiments.setup import replay_script
    from benchmarks.runs.bench import stop
    from tests.support.private_services import PrivatePostgres, PrivateRedis
    from tests.support.replay_server import ReplayServerProcess

    root = Path(tempfile.mkdtemp(prefix="t2s-bench-experiments-"))
    var = root / "var"
    var.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "T2S_INDEX_DIR")}
    env.update(T2S_VAR_DIR=str(var), T2S_BENCH_DATA=str(root / "datasets"), LOG_LEVEL="WARNING")
    pg = redis = None
    if not args.embedded:
        pg, redis = PrivatePostgres().start(), PrivateRedis().start()
        pg.execute("CREATE DATABASE t2s_bench")
        env.update(DATABASE_URL=pg.url("t2s_bench"), CELERY_BROKER_URL=redis.url)
    app = App(env, var)
    sessions_per_experiment = 2 * args.trials * args.questions
    try:
        app.step("migrate")
        app.step("dataset", str(args.questions))
        app.step("exemplars")
        print(f"bench-experiments: {'embedded SQLite' if args.embedded else 'PostgreSQL + Redis'}, one worker "
              f"(threads pool, {args.threads} threads), replay LLM at {args.latency_ms} ms a call, 2 calls a "
              f"session, concurrency {args.concurrency}; {time.strftime('%Y-%m-%d %H:%M')}, load {load()}")
        with ReplayServerProcess(replay_script(args.questions, latency_ms=args.latency_ms)) as server:
            app.step("endpoint", server.url, str(args.concurrency))
            stats = var / "worker.jsonl"
            from benchmarks.runs.bench import App as RunsApp

            worker = RunsApp(env, var).worker(args.threads, stats)
            try:
                for repeat in range(1, args.repeats + 1):
                    run_id = app.step("run", str(args.concurrency)).splitlines()[-1]
                    plain = app.watch("run", run_id, 3600)
                    plain_cpu = cpu_between(stats, plain["created"], plain["evaluated"])
                    plain_dispatch = cpu_between(stats, plain["created"], plain["evaluated"], "dispatch_cpu_s")
                    plain_wall = plain["last_finish"] - plain["created"]
                    print(f"\n{repeat}. ordinary run: {plain['sessions']} sessions, {plain_wall:.1f} s to the last "
                          f"session, scored {plain['evaluated'] - plain['created']:.1f} s after the launch; worker "
                          f"CPU {plain_cpu:.1f} s = {1000 * plain_cpu / plain['sessions']:.1f} ms a session, "
                          f"{plain_dispatch:.1f} s of it dispatching (load {load()})")
                    started = time.time()
                    command = subprocess.run(
                        [sys.executable, "manage.py", "experiment", "--set", "team", "--candidate", "1", "--suite",
                         "all", "--trials", str(args.trials), "--concurrency", str(args.concurrency), "--wait",
                         "--poll", "2"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=7200)
                    if command.returncode:
                        raise SystemExit(f"experiment failed:\n{command.stderr[-4000:]}")
                    took = time.time() - started
                    experiment_id = re.search(r"Experiment #(\d+) started", command.stdout).group(1)
                    exp = json.loads(app.step("report", "experiment", experiment_id).splitlines()[-1])
                    exp_cpu = cpu_between(stats, exp["created"], exp["evaluated"])
                    exp_dispatch = cpu_between(stats, exp["created"], exp["evaluated"], "dispatch_cpu_s")
                    exp_wall = exp["last_finish"] - exp["created"]
                    print(f"   experiment #{experiment_id}: {exp['runs']} runs, {exp['sessions']} sessions "
                          f"(expected {sessions_per_experiment}), {exp_wall:.1f} s to the last session, every run "
                          f"scored {exp['evaluated'] - exp['created']:.1f} s after the launch, the command returned "
                          f"after {took:.1f} s; worker CPU {exp_cpu:.1f} s = "
                          f"{1000 * exp_cpu / exp['sessions']:.1f} ms a session, {exp_dispatch:.1f} s of it "
                          f"dispatching (load {load()})")
                    runs = 2 * args.trials
                    print(f"   against {runs} ordinary runs: CPU {exp_cpu / (runs * plain_cpu):.2f} x, wall to the "
                          f"last session {exp_wall / (runs * plain_wall):.2f} x; {exp['tokens']:,} tokens")
                    # the command's report, without its first line and its progress lines (text mode reads each
                    # "\r" as a new line)
                    report = [line for line in command.stdout.split("\n")[1:]
                              if line.strip() and "questions done over all runs" not in line]
                    print("   " + "\n   ".join(report))
            finally:
                stop(worker)
    except BaseException:
        print(f"bench-experiments: its files (worker log, samples, dataset) are kept in {root}", file=sys.stderr)
        raise
    else:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    finally:
        if redis is not None:
            redis.close()
        if pg is not None:
            pg.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
