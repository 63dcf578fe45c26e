"""Spend under control: a session's options are bounded by the endpoint's record and the settings, an endpoint
reads its key only from an allowed variable, and runs are for Operators within the endpoint's concurrency.

Reproduces issue #12's findings (options set model, max_tokens=1000000, max_rounds=100000, stop=[]; any user
launched runs with concurrency 64; api_key_env=T2S_ADMIN_PASSWORD sent the admin password) and shows them refused
with nothing stored and nothing sent to the LLM server.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from agent.models import AgentSession, LLMEndpoint
from agent.services import sessions

pytestmark = pytest.mark.django_db

SCRIPT = ['Thought: count\nAction: ExecuteSQL("SELECT count(*) FROM Artist")', "Thought: ok\nAction: Done"]


@pytest.mark.parametrize(("options", "message"), [
    ({"model": "gpt-4-32k-expensive"}, "not offered by endpoint"),
    ({"max_tokens": 1_000_000}, "max_tokens must be"),
    ({"max_rounds": 100_000}, "max_rounds must be"),
    ({"max_rounds": True}, "max_rounds must be"),
])
def test_options_beyond_the_endpoints_bounds_are_refused(user_client, demo_database, replay_llm, options, message):
    server = replay_llm(SCRIPT)
    response = user_client.post("/api/sessions/", {"database": "chinook", "question": "How many artists?",
                                                   "options": options}, content_type="application/json")
    assert response.status_code == 400 and message in str(response.json()["options"])
    assert not AgentSession.objects.exists()
    assert server.chat_requests() == []


def test_stop_sequences_can_be_added_never_removed(demo_database, replay_llm):
    replay_llm(SCRIPT)
    session = sessions.session_create(database=demo_database, question="q", options={"stop": []}, enqueue=False)
    own = session.config["strategy"]["stop"]
    assert own and "\nObservation" in "".join(own)
    more = sessions.session_create(database=demo_database, question="q", options={"stop": ["\nEND"]},
                                   enqueue=False)
    assert more.config["strategy"]["stop"] == [*own, "\nEND"]


def test_within_bounds_is_accepted(demo_database, replay_llm):
    replay_llm(SCRIPT)
    session = sessions.session_create(database=demo_database, question="q",
                                      options={"max_rounds": 8, "max_tokens": 256}, enqueue=False)
    assert session.config["strategy"]["max_rounds"] == 8 and session.config["strategy"]["max_tokens"] == 256


def test_an_api_key_env_outside_the_allowlist_is_refused_and_never_read(demo_database, replay_llm, monkeypatch):
    server = replay_llm(SCRIPT)
    monkeypatch.setenv("T2S_ADMIN_PASSWORD", "admin-secret")
    endpoint = LLMEndpoint(name="evil", base_url=server.url, model="replay-model", api_key_env="T2S_ADMIN_PASSWORD")
    with pytest.raises(ValidationError, match="cannot hold an API key"):
        endpoint.full_clean()
    with pytest.raises(ValidationError, match="cannot hold an API key"):
        sessions.session_create(database=demo_database, question="q", endpoint=endpoint, enqueue=False)
    client = sessions.llm_client_from_snapshot({"base_url": server.url, "model": "replay-model",
                                                "api_key_env": "T2S_ADMIN_PASSWORD"})
    assert client.settings.api_key is None  # a snapshot from before the allowlist sends nothing
    LLMEndpoint(name="ok", base_url=server.url, model="m", api_key_env="VLLM_API_KEY").full_clean()


def test_runs_are_for_operators_within_the_endpoints_concurrency(client, django_user_model, demo_database,
                                                                  replay_llm, settings):
    from django.urls import reverse

    from agent.roles import OPERATOR
    from annotations.runs import services as run_services
    from annotations.runs.models import Dataset, DatasetQuestion, Run
    from tests.conftest import give_roles

    replay_llm(SCRIPT)
    settings.T2S = {**settings.T2S, "LLM_MAX_CONCURRENCY": 8}  # the environment endpoint's bound
    dataset = Dataset.objects.create(name="mini", kind="spider", source_path="/nowhere", question_count=1)
    DatasetQuestion.objects.create(dataset=dataset, index=0, db_id="chinook", database=demo_database,
                                   question="How many artists?", gold_sql="SELECT count(*) FROM Artist")
    asker = django_user_model.objects.create_user("asa", password="pw-asa-123")  # default roles: Viewer, Asker
    client.force_login(asker)
    url = reverse("runs:run_launch", args=["mini"])
    assert client.post(url, {"launch-name": "r", "launch-strategy": "interactive_t2s"}).status_code == 403
    with pytest.raises(ValidationError, match="At most 8 concurrent"):
        run_services.run_create_agent(dataset=dataset, name="flood", strategy="interactive_t2s", user=asker,
                                      max_concurrency=64)
    operator = give_roles(django_user_model.objects.create_user("ops", password="pw-ops-123"), OPERATOR)
    client.force_login(operator)
    response = client.post(url, {"launch-name": "flood", "launch-strategy": "interactive_t2s",
                                 "launch-max_concurrency": "64"})
    assert response.status_code == 302 and not Run.objects.exists()
    run = run_services.run_create_agent(dataset=dataset, name="ok", strategy="interactive_t2s", user=operator)
    assert run.config["max_concurrency"] == 8
