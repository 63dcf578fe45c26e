"""``make bench-runs``: how close a run of our agent comes to what the worker and the LLM allow.

On PostgreSQL and Redis of its own (tests/support/private_services.py; ``--embedded`` uses the SQLite app
database and broker instead), with the replay LLM server and a dataset built on the spot (no ../shared):

1. worker-bound baseline: ``--baseline`` sessions posted at once (no run), one worker with ``--threads``
   threads, LLM at ``--latency-ms``: the sessions per second this worker manages when it never waits;
2. a run of ``--questions`` questions (``--rounds`` LLM calls each, same latency) at concurrency
   ``--threads``: its throughput as a percentage of that baseline (target 60 %), the dispatcher's CPU
   share of the worker's, the worker's RSS over the run, the ETA shown at 25 %;
3. an LLM-bound run: ``--slow-questions`` questions at ``--slow-latency-ms`` per call (``--slow-shape lognormal``:
   seeded latencies of median ``--median-ms`` and p90 ``--p90-ms`` instead), concurrency ``--slow-concurrency``:
   wall time against the ideal schedule (each question started the moment a slot is free; for fixed latencies
   ceil(questions / concurrency) x rounds x latency); ``--trace`` adds where a session's time goes there
   (benchmarks/runs/trace.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
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
        done = subprocess.run([sys.executable, "-m", "benchmarks.runs.setup", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=1800)
        if done.returncode:
            raise SystemExit(f"step {args} failed:\n{done.stderr[-4000:]}")
        return done.stdout.strip()

    def report(self, what: str) -> dict:
        return json.loads(self.step("report", what).splitlines()[-1])

    def watch(self, what: str, predicate, timeout: float, description: str) -> dict:
        """The first report a second that satisfies ``predicate``, from one watching process: a process per
        report cost 1.3 s of CPU, a good part of one of the 2 cores the worker is measured on."""
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.runs.setup", "watch", what], cwd=ROOT,
                                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + timeout
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("{"):
                    report = json.loads(line)
                    if predicate(report):
                        return report
                if time.monotonic() > deadline:
                    break
            raise SystemExit(f"timed out waiting for {description}")
        finally:
            proc.kill()
            proc.wait()

    def worker(self, threads: int, stats: Path, trace: Path | None = None) -> subprocess.Popen:
        log = (self.var / f"worker-{stats.stem}.log").open("w")
        env = dict(self.env, T2S_BENCH_TRACE=str(trace)) if trace else self.env
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.runs.worker", str(stats), "-A", "t2s_site", "worker", "--pool",
             "threads", "--concurrency", str(threads), "--without-gossip", "--without-mingle",
             "--without-heartbeat", "-n", f"{stats.stem}@%h", "--loglevel", "WARNING"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while not stats.exists() or not stats.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"worker did not start:\n{(self.var / f'worker-{stats.stem}.log').read_text()}")
            time.sleep(0.2)
        time.sleep(3)  # connected and consuming
        return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def samples(stats: Path) -> list[dict]:
    return [json.loads(line) for line in stats.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=1500)
    parser.add_argument("--baseline", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--slow-questions", type=int, default=320)
    parser.add_argument("--slow-latency-ms", type=int, default=1000)
    parser.add_argument("--slow-concurrency", type=int, default=64)
    parser.add_argument("--slow-shape", choices=("fixed", "lognormal"), default="fixed",
                        help="step 3's call latencies: all --slow-latency-ms, or lognormal (--median-ms, --p90-ms)")
    parser.add_argument("--median-ms", type=float, default=2500)
    parser.add_argument("--p90-ms", type=float, default=8000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--slow-workers", type=int, default=1,
                        help="worker processes sharing the LLM-bound run's concurrency (threads pool each)")
    parser.add_argument("--slow-threads", type=int, default=0,
                        help="threads per worker process for step 3 (default: its concurrency / --slow-workers)")
    parser.add_argument("--embedded", action="store_true", help="SQLite app database and broker")
    parser.add_argument("--stages", default="123", help="which steps to run (3 alone needs no baseline)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the run's folder (datasets, worker logs, samples); it is kept anyway on failure")
    parser.add_argument("--trace", action="store_true",
                        help="mark each session's steps in step 3's workers and print wall and CPU per segment")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from tests.support.private_services import PrivatePostgres, PrivateRedis
    from tests.support.replay_server import ReplayServerProcess
    from tests.support.run_dataset import (
        ideal_schedule_s,
        lognormal_latency,
        replay_script,
        session_latency_s,
    )

    # The app's var/ and, beside it (a database inside var/ is refused as a target), the generated datasets.
    root = Path(tempfile.mkdtemp(prefix="t2s-bench-runs-"))
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
    try:
        app.step("migrate")
        print(f"bench-runs: {'embedded SQLite' if args.embedded else 'PostgreSQL + Redis'}, one worker "
              f"(threads pool, {args.threads} threads), replay LLM; {time.strftime('%Y-%m-%d %H:%M')}")

        if "2" in args.stages and "1" not in args.stages:
            raise SystemExit("step 2 compares with step 1's baseline")
        if "1" in args.stages:
            # 1. baseline: every session queued at once
            app.step("dataset", str(args.baseline), "baseline")
            with ReplayServerProcess(replay_script(args.baseline, rounds=args.rounds, latency_ms=args.latency_ms)) as server:
                app.step("endpoint", server.url)
                stats = var / "baseline.jsonl"
                worker = app.worker(args.threads, stats)
                try:
                    app.step("sessions", "baseline")
                    app.watch("sessions", lambda r: r["active"] == 0, 1800, "the baseline sessions")
                finally:
                    stop(worker)
                base = app.report("sessions")
            base_rate = base["total"] / (base["last_finish"] - base["first_start"])
            print(f"\n1. worker-bound baseline: {base['total']} sessions posted at once, {args.rounds} rounds at "
                  f"{args.latency_ms} ms: {base_rate:.1f} sessions/s ({base['answered']} answered)")

        if "2" in args.stages:
            # 2. the same pace through a run of many questions
            app.step("dataset", str(args.questions), "big")
            with ReplayServerProcess(replay_script(args.questions, rounds=args.rounds, latency_ms=args.latency_ms)) as server:
                app.step("endpoint", server.url)
                stats = var / "big.jsonl"
                worker = app.worker(args.threads, stats)
                try:
                    run_id = app.step("run", "big", str(args.threads)).splitlines()[-1]
                    quarter = app.watch(run_id, lambda r: r["answered"] >= args.questions // 4, 3600,
                                        "a quarter of the run")
                    print(f"   at 25 %: ETA shown {quarter['eta_s']:.0f} s", end="")
                    sys.stdout.flush()
                    t_quarter = time.time()
                    final = app.watch(run_id, lambda r: r["status"] == "done", 3600, "the run")
                    print(f", took {final['last_finish'] - t_quarter:.0f} s more")
                finally:
                    stop(worker)
            rows = samples(stats)
            wall = final["last_finish"] - final["created"]
            rate = final["total"] / wall
            during = [r for r in rows if final["created"] <= r["t"] <= final["last_finish"]] or rows
            cpu = during[-1]["cpu_s"] - during[0]["cpu_s"]
            dispatch = during[-1]["dispatch_cpu_s"] - during[0]["dispatch_cpu_s"]
            rss = [r["rss_mb"] for r in during]
            marks = [rss[min(len(rss) - 1, int(len(rss) * f))] for f in (0, 0.25, 0.5, 0.75, 1.0)]
            print(f"2. run of {final['total']} questions at concurrency {args.threads}: {wall:.1f} s to the last session, "
                  f"{rate:.1f} sessions/s = {100 * rate / base_rate:.0f} % of the worker-bound baseline (target 60 %); "
                  f"scored {final['evaluated'] - final['last_finish']:.1f} s later by the evaluation task, "
                  f"{final['correct']} correct")
            print(f"   dispatcher CPU {dispatch:.1f} s of the worker's {cpu:.1f} s = {100 * dispatch / cpu:.1f} % "
                  f"{during[-1]['dispatches'] - during[0]['dispatches']} calls, "
                  f"{during[-1]['passes'] - during[0]['passes']} passes")
            print("   worker RSS (MB) at 0/25/50/75/100 % of the run: " + " / ".join(f"{m:.0f}" for m in marks))

        if "3" in args.stages:
            # 3. LLM-bound: slow calls, many at once
            app.step("dataset", str(args.slow_questions), "slow")
            shape = (lognormal_latency(median_ms=args.median_ms, p90_ms=args.p90_ms, seed=args.seed)
                     if args.slow_shape == "lognormal" else None)
            script = replay_script(args.slow_questions, rounds=args.rounds, latency_ms=args.slow_latency_ms,
                                   latency=shape)
            durations = [session_latency_s(script, i) for i in range(args.slow_questions)]
            with ReplayServerProcess(script) as server:
                app.step("endpoint", server.url)
                # The run's concurrency spread over --slow-workers processes (one GIL each).
                threads = args.slow_threads or math.ceil(args.slow_concurrency / args.slow_workers)
                stats_files = [var / f"slow{k}.jsonl" for k in range(args.slow_workers)]
                traces = [stats.with_suffix(".trace.json") for stats in stats_files]
                workers = []
                try:
                    for stats, trace_file in zip(stats_files, traces, strict=True):
                        workers.append(app.worker(threads, stats, trace_file if args.trace else None))
                    run_id = app.step("run", "slow", str(args.slow_concurrency)).splitlines()[-1]
                    slow = app.watch(run_id, lambda r: r["status"] == "done", 3600, "the slow run")
                finally:
                    for worker in workers:
                        stop(worker)
            wall = slow["last_finish"] - slow["created"]
            ideal = ideal_schedule_s(durations, args.slow_concurrency)
            calls = (f"{args.slow_latency_ms} ms" if shape is None else
                     f"lognormal latencies (median {args.median_ms:.0f} ms, p90 {args.p90_ms:.0f} ms, seed {args.seed})")
            print(f"3. run of {slow['total']} questions, {args.rounds} calls of {calls}, concurrency "
                  f"{args.slow_concurrency} ({args.slow_workers} worker process(es) of {threads} threads): {wall:.1f} s, LLM-bound ideal {ideal:.1f} s = {100 * ideal / wall:.0f} % "
                  f"(target 90 %)")
            cpu = dispatch = consumer = 0.0
            for stats in stats_files:
                rows = [r for r in samples(stats) if slow["created"] <= r["t"] <= slow["last_finish"]]
                if len(rows) > 1:
                    cpu += rows[-1]["cpu_s"] - rows[0]["cpu_s"]
                    dispatch += rows[-1]["dispatch_cpu_s"] - rows[0]["dispatch_cpu_s"]
                    consumer += rows[-1]["consumer_cpu_s"] - rows[0]["consumer_cpu_s"]
            if cpu:
                print(f"   worker CPU {cpu:.1f} s ({1000 * cpu / slow['total']:.0f} ms a session), dispatcher "
                      f"{dispatch:.1f} s, consumer thread {consumer:.1f} s; a session waited {slow['wait_p50']:.2f} s (max {slow['wait_first_max']:.2f} "
                      f"in the first {args.slow_concurrency}, {slow['wait_later_max'] or 0:.2f} later) to start and ran {slow['run_p50']:.2f} s (max {slow['run_max']:.2f}) for "
                      f"{sorted(durations)[len(durations) // 2]:.1f} s of LLM latency p50 (an LLM call {slow['call_p50_ms']:.0f} ms, "
                      f"max {slow['call_max_ms']:.0f}); the first started "
                      f"{slow['first_start'] - slow['created']:.2f} s after the launch")
                if slow.get("idle_slot_s") is not None:
                    print(f"   slots left empty while questions waited: {slow['idle_slot_s']:.2f} s of the wall at full "
                          f"concurrency; the last session was created {slow['last_finish'] - slow['last_created']:.2f} s "
                          f"before the run's end")
            if args.trace:
                from benchmarks.runs.trace import summary

                print("\n".join(summary(traces)))
    except BaseException:
        print(f"bench-runs: its files (worker logs, samples, datasets) are kept in {root}", file=sys.stderr)
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
