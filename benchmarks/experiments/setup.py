"""Steps of ``make bench-experiments`` that run in the app's own environment (a process per step).

``migrate``, ``dataset N``, ``endpoint URL CONCURRENCY``, ``exemplars`` (set ``team`` v1 with exemplar A, an
open candidate adding exemplar B, suite ``all`` of every question), ``run CONCURRENCY`` (an ordinary run of v1
over the same questions; prints its id), ``report run|experiment ID`` (one JSON line), ``watch run|experiment
ID`` (the report again every second, until stopped).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

MARKER_A, MARKER_B = "BENCH-EXEMPLAR-A", "BENCH-EXEMPLAR-B"  # A: in v1; B: added by the candidate


def replay_script(n: int, *, latency_ms: int) -> dict:
    """Per question: an ExecuteSQL, then Done, each after ``latency_ms``. Every fourth question is answered
    right only with exemplar B in the prompt (the candidate gains it), every eighth (offset 1) only without B
    (the candidate loses it), the rest always right: the experiment has flips both ways to count and show."""
    from tests.support.run_dataset import question

    scripts = {}
    for i in range(n):
        text, gold = question(i)
        right = {"text": f'Thought: count {i}\nAction: ExecuteSQL("{gold}")', "latency_ms": latency_ms}
        wrong = {"text": f'Thought: guess {i}\nAction: ExecuteSQL("SELECT count(*) FROM item WHERE grp = 99")',
                 "latency_ms": latency_ms}
        first = ({"if_system_contains": MARKER_B, "then": right, "else": wrong} if i % 4 == 0 else
                 {"if_system_contains": MARKER_B, "then": wrong, "else": right} if i % 8 == 1 else right)
        scripts[text] = {"by_turn": [first, {"text": "Thought: done\nAction: Done", "latency_ms": latency_ms}]}
    return {"scripts": scripts}


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "t2s_site.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from agent.models import LLMEndpoint
    from annotations.exemplars import services as exemplar_services
    from annotations.experiments import services
    from annotations.models import ExemplarSetVersion
    from annotations.runs import services as run_services
    from annotations.runs.models import Dataset
    from tests.support.run_dataset import write_dataset

    command = argv[0]
    if command == "migrate":
        call_command("migrate", verbosity=0)
    elif command == "dataset":
        path = write_dataset(Path(os.environ["T2S_BENCH_DATA"]) / "shop", int(argv[1]))
        run_services.dataset_import(kind="jsonl", path=path, name="shop", build_indexes=True)
    elif command == "endpoint":
        LLMEndpoint.objects.update_or_create(name="replay", defaults={
            "base_url": argv[1], "model": "replay-model", "api_key_env": "", "is_default": True,
            "max_concurrency": int(argv[2]), "timeout_s": 30, "max_retries": 3})
    elif command == "exemplars":
        from django.contrib.auth import get_user_model

        dataset = Dataset.objects.get(name="shop")
        database = dataset.questions.first().database
        user = get_user_model().objects.create_superuser("bench", password="bench-only-account")
        made = []
        for marker in (MARKER_A, MARKER_B):
            exemplar = exemplar_services.exemplar_create(user=user, database=database,
                                                         question=f"How many items are there? ({marker})")
            exemplar_services.step_add(exemplar=exemplar, user=user, thought=f"Count them. {marker}",
                                       action='ExecuteSQL("SELECT count(*) FROM item")')
            exemplar_services.step_add(exemplar=exemplar, user=user, thought="Done.", action="Done")
            made.append(exemplar)
        exemplar_services.exemplar_mark_approved_on_import(exemplar=made[0], user=None, source="bench")
        team = exemplar_services.set_create(name="team", user=None)
        exemplar_services.set_publish(exemplar_set=team, exemplars=[made[0]], user=None)
        services.candidate_create(exemplar_set=team, user=None, exemplars=[made[1]], title="adds B")
        services.suite_create(name="all", dataset=dataset, user=None, sources=[
            {"kind": "picked", "questions": list(dataset.questions.values_list("index", flat=True))}])
    elif command == "run":
        version = ExemplarSetVersion.objects.get(exemplar_set__name="team", number=1)
        run = run_services.run_create_agent(dataset=Dataset.objects.get(name="shop"), name="plain run",
                                            max_concurrency=int(argv[1]), exemplar_set_version=version)
        print(run.pk)
    elif command in ("report", "watch"):
        while True:
            print(json.dumps(report(argv[1], int(argv[2]))), flush=True)
            if command == "report":
                break
            time.sleep(1.0)
    else:
        raise SystemExit(f"unknown step {command!r}")
    return 0


def report(kind: str, pk: int) -> dict:
    """Sessions, their first start and last end, tokens, correct answers, and whether everything is scored."""
    from django.db.models import Max, Min, Sum

    from agent.models import AgentSession
    from annotations.experiments import selectors
    from annotations.experiments.models import Experiment
    from annotations.runs.models import Run

    if kind == "run":
        runs = list(Run.objects.filter(pk=pk))
        done = runs[0].status == Run.Status.DONE
    else:
        experiment = Experiment.objects.get(pk=pk)
        runs = list(Run.objects.filter(experiment_run__experiment=experiment))
        done = selectors.experiment_state(experiment) == "done"
    sessions = AgentSession.objects.filter(run_items__run__in=runs)
    agg = sessions.aggregate(first=Min("started_at"), last=Max("finished_at"), prompt=Sum("prompt_tokens"),
                             completion=Sum("completion_tokens"))
    evaluated = max((r.evaluated_at for r in runs if r.evaluated_at), default=None)
    return {"done": done, "runs": len(runs), "sessions": sessions.count(),
            "created": min(r.created_at for r in runs).timestamp(),
            "first_start": agg["first"].timestamp() if agg["first"] else None,
            "last_finish": agg["last"].timestamp() if agg["last"] else None,
            "evaluated": evaluated.timestamp() if evaluated else None,
            "tokens": (agg["prompt"] or 0) + (agg["completion"] or 0),
            "correct": sum((r.totals or {}).get("correct") or 0 for r in runs)}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
