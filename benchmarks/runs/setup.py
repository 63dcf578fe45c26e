"""Steps of ``make bench-runs`` that run in the app's own environment (a process per step, like a user's command).

``dataset N NAME``, ``endpoint URL``, ``sessions NAME``, ``run NAME CONCURRENCY``, ``report RUN_ID|sessions``,
``watch RUN_ID|sessions [SECONDS]`` (the report again every SECONDS, one JSON line each, until stopped).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "t2s_site.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db.models import Max, Min

    from agent.models import AgentSession, LLMEndpoint, Turn
    from agent.services import sessions
    from annotations.runs import services
    from annotations.runs.models import Dataset, Run
    from tests.support.run_dataset import write_dataset

    def report(what: str) -> dict:
        if what == "sessions":
            qs, run = AgentSession.objects.filter(run_items__isnull=True), None
        else:
            run = Run.objects.get(pk=int(what))
            qs = AgentSession.objects.filter(run_items__run=run)
        agg = qs.aggregate(first=Min("started_at"), last=Max("finished_at"))
        # Where a session's time went: waiting in the queue (created -> claimed) and running (claimed -> end).
        ordered = [(s - c).total_seconds() for c, s in qs.filter(started_at__isnull=False).order_by("created_at")
                   .values_list("created_at", "started_at")]
        first = int(run.config.get("max_concurrency") or 0) if what != "sessions" else 0
        waits = sorted(ordered)
        runs = sorted(e / 1000 for e in qs.filter(elapsed_ms__isnull=False).values_list("elapsed_ms", flat=True))
        calls = sorted(Turn.objects.filter(session__in=qs, llm_latency_ms__isnull=False)
                       .values_list("llm_latency_ms", flat=True))
        out = {"total": qs.count(), "active": qs.filter(status__in=AgentSession.ACTIVE).count(),
               "answered": qs.filter(status="answered").count(),
               "first_start": agg["first"].timestamp() if agg["first"] else None,
               "last_finish": agg["last"].timestamp() if agg["last"] else None,
               "wait_p50": waits[len(waits) // 2] if waits else None, "wait_max": waits[-1] if waits else None,
               # the run's first sessions (a fresh worker's threads open their connections) and the later ones
               "wait_first_max": max(ordered[:first], default=None), "wait_later_max": max(ordered[first:], default=None),
               "run_p50": runs[len(runs) // 2] if runs else None, "run_max": runs[-1] if runs else None,
               "call_p50_ms": calls[len(calls) // 2] if calls else None, "call_max_ms": calls[-1] if calls else None}
        if run is not None:
            # Slot-seconds left empty while questions were still waiting (run created -> the last session
            # created), each divided by the concurrency: the seconds of the run's wall that dispatch gaps cost.
            # Only once the run is over: the watch reads a report a second, beside the worker being measured.
            spans = [] if run.status == Run.Status.RUNNING else list(
                qs.filter(finished_at__isnull=False).values_list("created_at", "finished_at"))
            if spans and first:
                start, end = run.created_at, max(c for c, _ in spans)
                held = sum(max(0.0, (min(f, end) - max(c, start)).total_seconds()) for c, f in spans)
                out["idle_slot_s"] = ((end - start).total_seconds() * first - held) / first
                out["last_created"] = end.timestamp()
            out.update(status=run.status, created=run.created_at.timestamp(),
                       evaluated=run.evaluated_at.timestamp() if run.evaluated_at else None,
                       correct=(run.totals or {}).get("correct"), eta_s=services.run_progress(run=run)["eta_s"])
        return out

    command = argv[0]
    if command == "migrate":
        call_command("migrate", verbosity=0)
    elif command == "dataset":
        # In the bench's own folder (T2S_BENCH_DATA), removed with its other files.
        path = write_dataset(Path(os.environ["T2S_BENCH_DATA"]) / argv[2], int(argv[1]))
        services.dataset_import(kind="jsonl", path=path, name=argv[2], build_indexes=True)
    elif command == "endpoint":
        LLMEndpoint.objects.update_or_create(name="replay", defaults={
            "base_url": argv[1], "model": "replay-model", "api_key_env": "", "is_default": True,
            "max_concurrency": 256, "timeout_s": 300, "max_retries": 3})  # above the longest scripted call
    elif command == "sessions":  # every question posted at once, no run: the worker's own pace
        dataset = Dataset.objects.get(name=argv[1])
        for q in dataset.questions.select_related("database"):
            sessions.session_create(database=q.database, question=q.question, zero_shot=True)
    elif command == "run":
        run = services.run_create_agent(dataset=Dataset.objects.get(name=argv[1]), name=argv[1],
                                        max_concurrency=int(argv[2]), zero_shot=True)
        print(run.pk)
    elif command == "report":
        print(json.dumps(report(argv[1])))
    elif command == "watch":  # a report a second from one process (a process per report cost 1.3 s of CPU)
        while True:
            print(json.dumps(report(argv[1])), flush=True)
            time.sleep(float(argv[2]) if len(argv) > 2 else 1.0)
    else:
        raise SystemExit(f"unknown step {command!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
