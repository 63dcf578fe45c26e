"""Observation profiles: exemplars are rendered in the session's profile exactly as live observations are."""

import pytest

from agent.models import Turn
from agent.roles import CURATOR
from agent.services import sessions
from agent.tools import registry
from agent.tools.execute_sql import QueryOutcome
from agent.tools.spec import ToolOutput
from annotations.exemplars import services as exemplar_services
from annotations.exemplars.selectors import few_shot_for_version
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db

SQL = ("SELECT Album.Title FROM Album JOIN Artist ON Album.ArtistId = Artist.ArtistId "
       "WHERE Artist.Name = 'AC/DC'")
ACTIONS = ['SearchValue("AC/DC")', 'SearchColumn(["album title", "artist name"])',
           'FindShortestPath(start="Album.Title", end="Artist.Name")', f'ExecuteSQL("{SQL}")']


@pytest.fixture
def version(demo_database, django_user_model):
    author = django_user_model.objects.create_user("ana", password="pw-ana-123")
    reviewer = give_roles(django_user_model.objects.create_user("rex", password="pw-rex-123"), CURATOR)
    exemplar = exemplar_services.exemplar_create(user=author, database=demo_database,
                                                 question="Which albums has AC/DC made?")
    for action in ACTIONS:
        exemplar_services.step_add(exemplar=exemplar, user=author, thought="Step.", action=action)
    exemplar_services.step_add(exemplar=exemplar, user=author, thought="Done.", action="Done")
    exemplar_services.exemplar_submit(exemplar=exemplar, user=author)
    exemplar_services.exemplar_review(exemplar=exemplar, user=reviewer, approve=True)
    exemplar_set = exemplar_services.set_create(name="acdc", user=author)
    return exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[exemplar], user=reviewer)


@pytest.mark.parametrize("profile", ["default", "paper"])
def test_an_exemplar_renders_identically_in_the_prompt_and_as_live_observations(profile, demo_database, version,
                                                                                replay_llm, django_user_model):
    # The model replays the exemplar's own calls: each live observation must be the exemplar's, character
    # for character, in the session's profile.
    asker = django_user_model.objects.create_user("asker", password="pw-asker-123")  # Viewer and Asker
    server = replay_llm([f"Thought: Step {i}.\nAction: {a}" for i, a in enumerate(ACTIONS)]
                        + ["Thought: Done.\nAction: Done"])
    session = sessions.session_create(database=demo_database, question="Which albums has AC/DC made?",
                                      few_shot=few_shot_for_version(version), user=asker,
                                      options={"observation_profile": profile},
                                      enqueue=False)
    assert session.config["exemplar_warnings"] == []
    sessions.session_execute(session_id=session.pk)
    system = server.chat_requests()[0].messages[0]["content"]
    live = [t.observation for t in Turn.objects.for_session(session).order_by("index")][:len(ACTIONS)]
    assert len(live) == len(ACTIONS) and all(live)
    for action, observation in zip(ACTIONS, live, strict=True):
        assert f"Action: {action}\nObservation: {observation.strip()}" in system
    if profile == "paper":
        assert live[3].startswith("[('") and live[3].endswith(")]")  # str(sorted(set(rows)))
        assert live[0].startswith("[{'contents': 'AC/DC'")
        # One pair: the path alone, through the tables as the authors' graph walks.
        assert live[2] == "Album.Title <-> Album.ArtistId = Artist.ArtistId <-> Artist.Name"
    else:
        assert live[3].startswith("Title\n")


def test_an_exemplar_whose_database_is_not_registered_keeps_its_text_with_a_visible_warning(
        demo_database, replay_llm, staff_client):
    replay_llm([])
    session = sessions.session_create(database=demo_database, question="q",
                                      options={"observation_profile": "paper"}, enqueue=False)
    warnings = session.config["exemplar_warnings"]  # the paper's Spider set: academic, activity_1 are not here
    assert len(warnings) == 2 and "academic" in warnings[0] and "sent as stored" in warnings[0]
    page = staff_client.get(session.get_absolute_url()).content.decode()
    assert 'id="exemplar-warnings"' in page and "paper profile (the authors' formats)" in page


def test_default_profile_rewrites_the_papers_exemplars_in_its_own_format(demo_database, replay_llm):
    """The paper's Spider exemplars come from databases not registered here: in the default profile their
    stored reprs are rewritten, so the examples show the format of the live observations."""
    server = replay_llm(['Thought: q\nAction: ExecuteSQL("SELECT Name FROM Artist LIMIT 1")', "Thought: ok\nAction: Done"])
    session = sessions.session_create(database=demo_database, question="q", enqueue=False)
    warnings = session.config["exemplar_warnings"]
    assert len(warnings) == 2 and "rewritten from their stored text" in warnings[0]
    sessions.session_execute(session_id=session.pk)
    system = server.chat_requests()[0].messages[0]["content"]
    assert "Observation: [" not in system and "Observation: {" not in system
    assert "Observation: 'organization name':\n- organization.name TEXT\n" in system
    assert "Observation: 'Soccer activity':\nno exact match; closest cells:\nActivity.activity_name = 'Soccer'" in system
    assert "Fname | Lname | Fname | Lname\n'Linda' | 'Smith' | 'Michael' | 'Goodrich'" in system
    live = [t.observation for t in Turn.objects.for_session(session).order_by("index")][0]
    assert live.startswith("Name\n")  # the same table format as the exemplars' ExecuteSQL


def test_paper_execute_sql_is_the_sorted_distinct_rows_cut_at_200_characters():
    from agent.sql import QueryResult

    spec = registry.find("ExecuteSQL")
    rows = [("b", 2), ("a", 1), ("b", 2)]
    result = QueryResult(("x", "y"), tuple(rows), 3, True)
    output = ToolOutput(QueryOutcome(result, None, 20), sql="q", result=result)
    assert spec.observation(output, "paper") == "[('a', 1), ('b', 2)]"
    long_rows = tuple((f"name number {i}",) for i in range(40))
    long = QueryResult(("x",), long_rows, 40, True)
    text = spec.observation(ToolOutput(QueryOutcome(long, None, 20), sql="q", result=long), "paper")
    assert len(text) == 203 and text.endswith("...")
    failed = ToolOutput(QueryOutcome(None, "no such table: t", 20), ok=False, sql="q")
    assert spec.observation(failed, "paper") == "no such table: t"
