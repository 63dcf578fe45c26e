"""A session run with an exemplar set version records it and sends its trajectories in the prompt."""

import pytest
from django.urls import reverse

from agent.models import AgentSession
from agent.roles import CURATOR
from agent.services import sessions
from annotations.exemplars import services as exemplar_services
from annotations.exemplars.selectors import few_shot_for_version
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db


def test_session_records_the_version_and_prompts_with_its_exemplars(demo_database, replay_llm, django_user_model):
    author = django_user_model.objects.create_user("ana", password="pw-ana-123")
    reviewer = give_roles(django_user_model.objects.create_user("rex", password="pw-rex-123"), CURATOR)
    exemplar = exemplar_services.exemplar_create(user=author, database=demo_database,
                                                 question="How many albums has AC/DC?")
    exemplar_services.step_add(exemplar=exemplar, user=author, thought="Find the band.", action='SearchValue("AC/DC")')
    exemplar_services.step_add(exemplar=exemplar, user=author, thought="Count.", action=(
        "ExecuteSQL(\"SELECT COUNT(*) FROM Album JOIN Artist ON Album.ArtistId = Artist.ArtistId "
        "WHERE Artist.Name = 'AC/DC'\")"))
    exemplar_services.step_add(exemplar=exemplar, user=author, thought="Done.", action="Done")
    exemplar_services.exemplar_submit(exemplar=exemplar, user=author)
    exemplar_services.exemplar_review(exemplar=exemplar, user=reviewer, approve=True)
    exemplar_set = exemplar_services.set_create(name="music-1shot", user=author)
    version = exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[exemplar], user=reviewer)

    server = replay_llm(['Thought: count\nAction: ExecuteSQL("SELECT COUNT(*) FROM Artist")',
                         "Thought: ok\nAction: Done"])
    session = sessions.session_create(database=demo_database, question="How many artists are there?",
                                      few_shot=few_shot_for_version(version), enqueue=False)
    sessions.session_execute(session_id=session.pk)
    session.refresh_from_db()
    assert session.config["exemplar_set_version"]["id"] == version.pk
    assert session.config["exemplar_set_version"]["set"] == "music-1shot"
    # The session keeps the exemplars themselves: running it never goes back to the exemplar store.
    assert [e["question"] for e in session.config["few_shot"]["exemplars"]] == ["How many albums has AC/DC?"]
    system = server.chat_requests()[0].messages[0]["content"]
    assert "How many albums has AC/DC?" in system and 'SearchValue("AC/DC")' in system
    assert session.status == "answered"


def test_a_versions_own_tool_description_is_sent_unless_a_tool_is_switched_off(demo_database, replay_llm,
                                                                              django_user_model):
    author = give_roles(django_user_model.objects.create_user("ana", password="pw-ana-123"), CURATOR)
    exemplar_set = exemplar_services.set_create(name="custom-desc", user=author)
    version = exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[], user=author,
                                            tool_description="CUSTOM TOOLS TEXT: use the tools wisely.")
    # Each session runs one query before Done (Done before any ExecuteSQL is refused).
    server = replay_llm(['Thought: q\nAction: ExecuteSQL("SELECT 1")', "Thought: ok\nAction: Done"] * 2)
    full = sessions.session_create(database=demo_database, question="q1", few_shot=few_shot_for_version(version),
                                   enqueue=False)
    sessions.session_execute(session_id=full.pk)
    ablation = sessions.session_create(database=demo_database, question="q2", few_shot=few_shot_for_version(version),
                                       options={"enabled_tools": ["SearchColumn", "SearchValue", "ExecuteSQL"]},
                                       enqueue=False)
    sessions.session_execute(session_id=ablation.pk)
    first, _, second, _ = (r.messages[0]["content"] for r in server.chat_requests())
    assert first.startswith("CUSTOM TOOLS TEXT")
    assert "CUSTOM TOOLS TEXT" not in second and "FindShortestPath" not in second


def test_exemplar_set_versions_are_named_on_the_command_line_as_set_or_set_n(demo_database, django_user_model):
    from django.core.management import CommandError, call_command

    from annotations.exemplars.selectors import version_from_spec

    author = give_roles(django_user_model.objects.create_user("ana", password="pw-ana-123"), CURATOR)
    exemplar_set = exemplar_services.set_create(name="cli-set", user=author)
    v1 = exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[], user=author, tool_description="a")
    v2 = exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[], user=author, tool_description="b")
    assert version_from_spec("cli-set") == v2
    assert version_from_spec("cli-set:1") == v1 and version_from_spec("cli-set:v2") == v2
    assert version_from_spec("cli-set:x") is None and version_from_spec("nope") is None
    with pytest.raises(CommandError, match="No published version"):
        call_command("ask", "chinook", "How many artists?", "--exemplars", "cli-set:9")


def test_the_ask_page_and_the_api_offer_and_resolve_exemplar_set_versions(user_client, demo_database, replay_llm,
                                                                          django_user_model):
    author = give_roles(django_user_model.objects.create_user("eve", password="pw-eve-123"), CURATOR)
    exemplar_set = exemplar_services.set_create(name="web-set", user=author)
    version = exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[], user=author,
                                            tool_description="WEB SET TOOLS")
    replay_llm([])
    page = user_client.get(reverse("ask")).content.decode()
    assert f'<option value="{version.pk}">web-set v1 (0 exemplars)</option>' in page

    asked = user_client.post(reverse("ask"), {"database": "chinook", "question": "How many artists?",
                                              "strategy": "interactive_t2s", "exemplar_set_version": version.pk,
                                              "tools": ["SearchValue", "ExecuteSQL"]})
    assert asked.status_code == 302
    session = AgentSession.objects.latest("pk")
    assert session.config["exemplar_set_version"]["set"] == "web-set"
    assert session.config["few_shot"]["tool_description"] == "WEB SET TOOLS"

    created = user_client.post("/api/sessions/", {"database": "chinook", "question": "How many albums?",
                                                   "exemplar_set_version": version.pk}, content_type="application/json")
    assert created.status_code == 201
    assert AgentSession.objects.get(pk=created.json()["id"]).config["exemplar_set_version"]["id"] == version.pk
    missing = user_client.post("/api/sessions/", {"database": "chinook", "question": "q",
                                                  "exemplar_set_version": version.pk + 1000},
                               content_type="application/json")
    assert missing.status_code == 400 and "No exemplar set version" in missing.content.decode()
