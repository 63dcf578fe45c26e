"""The paper-replica preset: one choice that sets the agent up as the paper's authors ran it."""

from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from agent.models import AgentSession
from agent.services import sessions

pytestmark = pytest.mark.django_db

REPLICA = {"observation_profile": "paper", "authors_sql_rules": True, "authors_case_retry": True,
           "column_ranking": "embedding"}


def _replica(config) -> bool:
    return all(config["strategy"][k] == v for k, v in REPLICA.items()) and config["preset"] == "paper-replica"


def test_the_preset_sets_the_papers_exemplars_formats_and_switches(demo_database, replay_llm, staff_client):
    replay_llm([])
    session = sessions.session_create(database=demo_database, question="q", paper_replica=True, enqueue=False)
    assert _replica(session.config)
    assert session.config["exemplar_set_version"]["set"] == "paper-spider"
    page = staff_client.get(session.get_absolute_url()).content.decode()
    assert 'id="session-preset">paper-replica<' in page
    plain = sessions.session_create(database=demo_database, question="q", enqueue=False)
    assert plain.config["preset"] is None and plain.config["strategy"]["observation_profile"] == "default"
    assert not plain.config["strategy"]["authors_sql_rules"] and not plain.config["strategy"]["authors_case_retry"]
    assert plain.config["strategy"]["column_ranking"] == "index"


def test_the_preset_is_one_flag_for_ask_and_the_api_and_refuses_zero_shot(demo_database, replay_llm, staff_client):
    replay_llm([])
    call_command("ask", "chinook", "How many artists?", "--paper-replica", stdout=StringIO())
    assert _replica(AgentSession.objects.latest("pk").config)
    made = staff_client.post("/api/sessions/", {"database": "chinook", "question": "q", "paper_replica": True},
                             content_type="application/json").json()
    assert _replica(AgentSession.objects.get(pk=made["id"]).config)
    with pytest.raises(ValidationError, match="never zero-shot"):
        sessions.session_create(database=demo_database, question="q", paper_replica=True, zero_shot=True,
                                enqueue=False)
    with pytest.raises(ValidationError, match="Interactive-T2S"):
        sessions.session_create(database=demo_database, question="q", paper_replica=True, strategy="dart_sql",
                                enqueue=False)
