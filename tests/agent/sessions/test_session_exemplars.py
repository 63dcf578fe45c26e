"""A session run with an exemplar set version records it and sends its trajectories in the prompt."""

import pytest

from agent.services import sessions
from annotations.exemplars import services as exemplar_services

pytestmark = pytest.mark.django_db


def test_session_records_the_version_and_prompts_with_its_exemplars(demo_database, replay_llm, django_user_model):
    author = django_user_model.objects.create_user("ana", password="pw-ana-123")
    reviewer = django_user_model.objects.create_user("rex", password="pw-rex-123", is_staff=True)
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
                                      exemplar_set_version=version, enqueue=False)
    sessions.session_execute(session_id=session.pk)
    session.refresh_from_db()
    assert session.config["exemplar_set_version"]["id"] == version.pk
    assert session.config["exemplar_set_version"]["set"] == "music-1shot"
    system = server.chat_requests()[0].messages[0]["content"]
    assert "How many albums has AC/DC?" in system and 'SearchValue("AC/DC")' in system
    assert session.status == "answered"


def test_a_versions_own_tool_description_is_sent_unless_a_tool_is_switched_off(demo_database, replay_llm,
                                                                              django_user_model):
    author = django_user_model.objects.create_user("ana", password="pw-ana-123")
    exemplar_set = exemplar_services.set_create(name="custom-desc", user=author)
    version = exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[], user=author,
                                            tool_description="CUSTOM TOOLS TEXT: use the tools wisely.")
    server = replay_llm(["Thought: ok\nAction: Done", "Thought: ok\nAction: Done"])
    full = sessions.session_create(database=demo_database, question="q1", exemplar_set_version=version,
                                   enqueue=False)
    sessions.session_execute(session_id=full.pk)
    ablation = sessions.session_create(database=demo_database, question="q2", exemplar_set_version=version,
                                       options={"enabled_tools": ["SearchColumn", "SearchValue", "ExecuteSQL"]},
                                       enqueue=False)
    sessions.session_execute(session_id=ablation.pk)
    first, second = (r.messages[0]["content"] for r in server.chat_requests())
    assert first.startswith("CUSTOM TOOLS TEXT")
    assert "CUSTOM TOOLS TEXT" not in second and "FindShortestPath" not in second
