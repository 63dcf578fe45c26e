"""Honest figures: questions that cannot run are said at import and can be left out of a sample; subset-scored
runs are marked; compare buckets show their sizes; the cost estimate says where prices go."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent.roles import OPERATOR
from annotations.runs import estimates, services
from annotations.runs.models import DatasetQuestion, Run
from annotations.runs.uploads import import_summary
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db


@pytest.fixture
def half_executable(built_dataset):
    """Six executable questions and two on a database with no file here."""
    dataset = built_dataset(6)
    for index in (6, 7):
        DatasetQuestion.objects.create(dataset=dataset, index=index, db_id="ghost", database=None,
                                       question=f"Ghost {index}?", gold_sql="SELECT 1")
    dataset.question_count = 8
    dataset.save(update_fields=["question_count"])
    return dataset


def test_the_import_says_which_questions_cannot_run(half_executable, built_dataset):
    half_executable.executable_count = 6  # as the import counts them
    assert import_summary(half_executable) == "imported 8 questions, 6 executable here"
    assert import_summary(built_dataset(3, name="full")) == "imported 3 questions, 3 executable here"


def test_a_sample_of_executable_questions_only_never_draws_one_that_cannot_run(half_executable, replay_llm):
    replay_llm(["Thought: x\nAction: Done"])
    for seed in range(20):
        drawn = services.questions_for(half_executable, limit=5, sample="random", seed=seed, executable_only=True)
        assert len(drawn) == 5 and all(q.database_id for q in drawn)
    everything = services.questions_for(half_executable, sample="all", executable_only=True)
    assert len(everything) == 6
    run = services.run_create_agent(dataset=half_executable, name="r", sample="all", executable_only=True)
    assert run.items.count() == 6 and run.config["sample"]["executable_only"] is True


def test_the_launch_form_offers_executable_only_and_the_estimate_counts_it(client, user, half_executable,
                                                                         replay_llm):
    replay_llm([])
    give_roles(user, OPERATOR)
    client.force_login(user)
    page = client.get(half_executable.get_absolute_url()).content.decode()
    assert 'id="launch-executable-only"' in page and "8 questions, 6 executable here" in page
    url = reverse("runs:run_estimate", args=[half_executable.name])
    on = client.get(url, {"launch-sample": "all", "launch-executable_only": "on"}).content.decode()
    off = client.get(url, {"launch-sample": "all"}).content.decode()
    assert "6 questions" in on and "8 questions" in off


def test_the_estimate_says_where_prices_go_when_the_endpoint_comes_from_the_environment(built_dataset, settings):
    settings.T2S = {**settings.T2S, "LLM_BASE_URL": "http://127.0.0.1:9/v1", "LLM_MODEL": "env-model"}
    from agent.services.sessions import default_llm_endpoint

    e = estimates.run_estimate(dataset=built_dataset(3), strategy="interactive_t2s", endpoint=default_llm_endpoint(),
                               sample="all")
    assert e["endpoint_from_env"] is True and e["prices"] is None


def test_subset_scored_runs_are_marked_on_the_runs_list_and_compare_buckets_show_sizes(client, user,
                                                                                       built_dataset):
    dataset = built_dataset(3)
    subset = Run.objects.create(name="short file", dataset=dataset, source="imported", status="done",
                                missing_predictions="subset",
                                totals={"ex": 66.0, "correct": 2, "scored": 3, "questions": 3},
                                breakdowns={"difficulty": {"easy": {"ex": 100.0, "correct": 1, "scored": 1}}})
    full = Run.objects.create(name="full file", dataset=dataset, source="imported", status="done",
                              totals={"ex": 33.33, "correct": 1, "scored": 3, "questions": 3},
                              breakdowns={"difficulty": {"easy": {"ex": 0.0, "correct": 0, "scored": 1}}})
    client.force_login(user)
    listed = client.get(reverse("runs:run_list")).content.decode()
    assert listed.count("subset-badge") == 1 and "subset: 3 of 3 questions" in listed
    assert "subset-badge" in client.get(subset.get_absolute_url()).content.decode()
    assert "subset-badge" not in client.get(full.get_absolute_url()).content.decode()
    compare = client.get(reverse("runs:run_compare"), {"a": subset.pk, "b": full.pk}).content.decode()
    assert "subset-badge" in compare
    assert '<span class="small muted bucket-count">1/1</span>' in compare
    assert '<span class="small muted bucket-count">0/1</span>' in compare
