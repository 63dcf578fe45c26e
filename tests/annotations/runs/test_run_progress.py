"""A run's progress: the ETA follows its observed session durations and concurrency for uniform fast calls, fixed
1-second calls and a lognormal latency tail, and a run where nothing happens for a while is said to be stalled.

Each case lays a run's sessions out as a perfect dispatcher would (each question started the moment a slot frees
up), stores the state at a moment of it (ended sessions, running ones, questions waiting) and compares the ETA
shown then with what the schedule still took.
"""

from __future__ import annotations

import heapq
import random
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from agent.models import AgentSession
from annotations.runs import services
from annotations.runs.models import RunItem
from tests.support.run_dataset import lognormal_latency, replay_script, write_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_of(tmp_path, replay_llm):
    from agent.models import LLMEndpoint

    server = replay_llm(replay_script(1))
    LLMEndpoint.objects.create(name="wide", base_url=server.url, model="replay-model", is_default=True,
                               max_concurrency=64)

    def make(n: int, concurrency: int):
        path = write_dataset(tmp_path / f"d{n}", n)
        dataset = services.dataset_import(kind="jsonl", path=path, name=f"eta{n}-{concurrency}", build_indexes=True)
        return services.run_create_agent(dataset=dataset, name="eta", max_concurrency=concurrency, zero_shot=True)
    return make


def schedule(durations: list[float], concurrency: int) -> list[tuple[float, float]]:
    """(start, end) of each session, each started as soon as one of the slots is free."""
    slots, out = [0.0] * concurrency, []
    for duration in durations:
        start = heapq.heappop(slots)
        out.append((start, start + duration))
        heapq.heappush(slots, start + duration)
    return out


def store_moment(run, plan: list[tuple[float, float]], at: float, now: datetime) -> float:
    """Store the run as it stands ``at`` seconds into ``plan``, that moment being ``now``; what the plan still
    takes from there."""
    items = list(run.items.select_related("question__database").order_by("pk"))
    started = [(item, start, end) for item, (start, end) in zip(items, plan, strict=True) if start <= at]
    rows = AgentSession.objects.bulk_create([
        AgentSession(database=item.question.database, question=item.question.question, strategy=run.strategy,
                     status="answered" if end <= at else "running") for item, _, end in started])
    for session, (item, start, end) in zip(rows, started, strict=True):
        session.created_at = session.started_at = now - timedelta(seconds=at - start)
        session.finished_at = now - timedelta(seconds=at - end) if end <= at else None
        item.session = session
        item.predicted_sql = "SELECT 1" if end <= at else ""
    AgentSession.objects.bulk_update(rows, ["created_at", "started_at", "finished_at"])
    RunItem.objects.bulk_update([item for item, _, _ in started], ["session", "predicted_sql"])
    return max(end for _, end in plan) - at


def eta_against_schedule(run_of, durations: list[float], concurrency: int, fraction: float) -> float | None:
    run = run_of(len(durations), concurrency)
    plan = schedule(durations, concurrency)
    now = timezone.now()
    left = store_moment(run, plan, fraction * max(end for _, end in plan), now)
    eta = services.run_progress(run=run, now=now)["eta_s"]
    return None if eta is None else eta / left


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.75])
def test_the_eta_is_right_for_uniform_fast_calls(run_of, fraction):
    durations = [3 * random.Random(i).uniform(0.04, 0.06) for i in range(320)]  # three calls of about 50 ms
    assert 0.85 <= eta_against_schedule(run_of, durations, 16, fraction) <= 1.2


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.75])
def test_the_eta_is_right_for_fixed_one_second_calls_in_waves(run_of, fraction):
    # 320 questions of three 1-second calls at concurrency 64: five waves of 3 s (a rate over time misjudged them).
    assert 0.85 <= eta_against_schedule(run_of, [3.0] * 320, 64, fraction) <= 1.2


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("fraction", [0.25, 0.5])
def test_the_eta_follows_a_lognormal_latency_tail(run_of, seed, fraction):
    # Calls of median 2.5 s, p90 8 s: the long sessions still running and still to come set the end.
    call = lognormal_latency(median_ms=2500, p90_ms=8000, seed=seed)
    durations = [sum(call(i, k) for k in range(3)) / 1000 for i in range(320)]
    assert 0.7 <= eta_against_schedule(run_of, durations, 16, fraction) <= 1.4


def test_no_eta_before_a_session_has_ended(run_of):
    assert eta_against_schedule(run_of, [3.0] * 64, 16, 0.1) is None


def test_a_run_where_nothing_happens_for_a_while_is_said_to_be_stalled(run_of, staff_client):
    from agent.models import Turn

    run = run_of(40, 8)
    plan = schedule([3.0] * 40, 8)
    store_moment(run, plan, 7.5, timezone.now())  # two waves ended, the third running
    progress = services.run_progress(run=run)
    assert progress["stalled_s"] is None and progress["eta_s"] > 0
    # Then nothing: no turn stored, no session ended or created for two minutes (messages lost with a broker).
    past = timezone.now() - timedelta(minutes=2)
    AgentSession.objects.filter(run_items__run=run).update(created_at=past - timedelta(seconds=10))
    AgentSession.objects.filter(run_items__run=run, finished_at__isnull=False).update(finished_at=past)
    type(run).objects.filter(pk=run.pk).update(created_at=past - timedelta(minutes=1))
    run.refresh_from_db()
    progress = services.run_progress(run=run)
    assert progress["eta_s"] is None and progress["stalled_s"] >= 120
    page = staff_client.get(run.get_absolute_url()).content.decode()
    assert "stalled" in page and "left" not in page.split("stalled")[1][:80]
    # A turn stored by a running session is progress again.
    session = AgentSession.objects.filter(run_items__run=run, status="running").first()
    Turn.objects.create(session=session, index=0)
    assert services.run_progress(run=run)["stalled_s"] is None
