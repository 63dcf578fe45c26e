"""A run of our agent over a dataset sample: sessions a few at a time, predictions collected, then evaluated."""

import pytest

from agent.models import AgentSession
from agent.services import sessions
from annotations.runs import selectors, services
from annotations.runs.models import Run

pytestmark = pytest.mark.django_db


def drive(run):
    """What the dispatcher task and the workers do, in this process."""
    peak = 0
    for _ in range(200):  # a run that never settles fails the test instead of hanging the suite
        if not services.run_dispatch(run=run):
            break
        queued = list(AgentSession.objects.filter(status="queued").values_list("pk", flat=True))
        peak = max(peak, len(queued) + AgentSession.objects.filter(status="running").count())
        for pk in queued:
            sessions.session_execute(session_id=pk)
    else:
        pytest.fail("the run still had work in flight after 200 dispatch passes")
    run.refresh_from_db()
    if run.status == Run.Status.EVALUATING:  # what the evaluation task does
        services.run_evaluate(run=run)
        run.refresh_from_db()
    return peak


@pytest.mark.shared_data
def test_agent_run_over_a_sample_is_dispatched_within_its_concurrency_and_evaluated(spider_dev, replay_llm,
                                                                                   user_client):
    from agent import services as agent_services
    from agent.models import Database

    agent_services.database_refresh(database=Database.objects.get(name="concert_singer"))
    questions = list(spider_dev.questions.filter(db_id="concert_singer").order_by("index")[:3])
    script = {"scripts": {
        questions[0].question: [f'Thought: a\nAction: ExecuteSQL("{questions[0].gold_sql}")', "Thought: ok\nAction: Done"],
        questions[1].question: ['Thought: b\nAction: ExecuteSQL("SELECT 1")', "Thought: ok\nAction: Done"],
        questions[2].question: [{"fault": "http", "status": 400}],
    }}
    replay_llm(script)
    run = services.run_create_agent(dataset=spider_dev, name="sample", db_ids=["concert_singer"], limit=3,
                                    max_concurrency=2)
    assert run.items.count() == 3
    peak = drive(run)
    assert peak <= 2
    assert run.status == Run.Status.DONE
    items = {i.question.index: i for i in run.items.select_related("question", "session")}
    first = items[questions[0].index]
    assert first.ex is True
    assert items[questions[1].index].ex is False
    assert items[questions[2].index].prediction_note.startswith("agent: LLM error")
    assert run.totals["correct"] == 1 and run.totals["scored"] == 3
    agent = selectors.run_summary(run=run)["agent"]
    assert agent["cases"] == 3 and agent["rounds"] > 0
    # The dataset page lists its runs side by side with their per-question cost figures.
    page = user_client.get(spider_dev.get_absolute_url()).content.decode()
    assert f"#{run.pk} sample" in page and "33.33%" in page and "LLM calls per question" in page
    # No set was picked: the paper's Spider set, for every session, and the run page says so.
    assert run.config["exemplars_choice"] == "default"
    assert {i.session.config["exemplar_set_version"]["set"] for i in items.values()} == {"paper-spider"}
    page = user_client.get(run.get_absolute_url()).content.decode()
    assert "paper-spider v1</a> (the paper's set for this dataset, the default)" in page


@pytest.mark.shared_data
def test_a_zero_shot_run_sends_no_exemplars(spider_dev, replay_llm):
    from agent import services as agent_services
    from agent.models import Database

    agent_services.database_refresh(database=Database.objects.get(name="concert_singer"))
    server = replay_llm(["Thought: ok\nAction: Done"])
    run = services.run_create_agent(dataset=spider_dev, name="zs", db_ids=["concert_singer"], limit=1,
                                    zero_shot=True)
    assert run.config["exemplar_set_version"] is None and run.config["exemplars_choice"] == "zero-shot"
    drive(run)
    assert run.items.get().session.config["exemplar_set_version"] is None
    assert "Here are some examples" not in server.chat_requests()[0].messages[0]["content"]


@pytest.mark.shared_data
def test_resume_reruns_only_failed_questions(spider_dev, replay_llm):
    from agent import services as agent_services
    from agent.models import Database

    agent_services.database_refresh(database=Database.objects.get(name="concert_singer"))
    q0, q1 = spider_dev.questions.filter(db_id="concert_singer").order_by("index")[:2]
    server = replay_llm({"scripts": {
        q0.question: [f'Thought: a\nAction: ExecuteSQL("{q0.gold_sql}")', "Thought: ok\nAction: Done"],
        q1.question: [{"fault": "http", "status": 400},
                      f'Thought: b\nAction: ExecuteSQL("{q1.gold_sql}")', "Thought: ok\nAction: Done"],
    }})
    run = services.run_create_agent(dataset=spider_dev, name="resumable", db_ids=["concert_singer"], limit=2)
    drive(run)
    assert run.totals["correct"] == 1
    calls_before = len(server.chat_requests())
    services.run_resume(run=run)
    drive(run)
    assert run.totals["correct"] == 2
    assert len(server.chat_requests()) == calls_before + 2  # only the failed question ran again


@pytest.mark.shared_data
def test_spend_cap_stops_starting_sessions(spider_dev, replay_llm, settings):
    from agent.models import LLMEndpoint

    LLMEndpoint.objects.create(name="priced", base_url="http://127.0.0.1:9/v1", model="replay-model",
                               input_price_per_mtok=100_000, output_price_per_mtok=0, is_default=True,
                               max_concurrency=1)
    server = replay_llm(["Thought: a\nAction: Done"] * 5)
    LLMEndpoint.objects.filter(name="priced").update(base_url=server.url)
    from agent import services as agent_services
    from agent.models import Database

    agent_services.database_refresh(database=Database.objects.get(name="concert_singer"))
    run = services.run_create_agent(dataset=spider_dev, name="capped", db_ids=["concert_singer"], limit=3,
                                    spend_cap=0.5)
    drive(run)
    notes = sorted(i.prediction_note for i in run.items.all())
    assert sum("spend cap" in n for n in notes) == 2  # the first session spent past the cap
