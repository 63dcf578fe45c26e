"""A set version follows the grants of every database it draws on: pages, API, export, the Ask form, and the
prompt a session builds from it (which never runs an exemplar's query on a database its user was not granted)."""

import sqlite3

import pytest
from django.urls import reverse

from agent.roles import CURATOR
from agent.services import sessions
from annotations.exemplars import services as exemplar_services
from annotations.exemplars.selectors import few_shot_for_version
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db

SECRET = "CREATE TABLE agent (name TEXT); INSERT INTO agent VALUES ('Smiley');"
ACTION = 'ExecuteSQL("SELECT name FROM agent")'


@pytest.fixture
def secret(make_sqlite, upload_dir):
    from agent import services

    path = make_sqlite(SECRET, "secret.sqlite")
    return services.database_register(name="secretdb", location=str(path), refresh="sync"), path


@pytest.fixture
def version(secret, demo_database, django_user_model):
    database, _ = secret
    author = django_user_model.objects.create_user("author", password="pw-author-123", is_superuser=True)
    reviewer = give_roles(django_user_model.objects.create_user("rex", password="pw-rex-123"), CURATOR)
    exemplar = exemplar_services.exemplar_create(user=author, database=database, question="Who are the agents?")
    exemplar_services.step_add(exemplar=exemplar, user=author, thought="List them.", action=ACTION)
    exemplar_services.step_add(exemplar=exemplar, user=author, thought="Done.", action="Done")
    exemplar_services.exemplar_submit(exemplar=exemplar, user=author)
    exemplar_services.exemplar_review(exemplar=exemplar, user=reviewer, approve=True)
    exemplar_set = exemplar_services.set_create(name="spies", user=author)
    return exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[exemplar], user=reviewer)


def _add_row_after_publishing(path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO agent VALUES ('Karla')")
    conn.close()


def _system_prompt_of_session(user, database, version, replay_llm) -> str:
    server = replay_llm(["Thought: Count.\nAction: ExecuteSQL(\"SELECT 1\")", "Thought: Done.\nAction: Done"])
    session = sessions.session_create(database=database, question="How many?", user=user, enqueue=False,
                                      few_shot=few_shot_for_version(version),
                                      options={"observation_profile": "default"})
    sessions.session_execute(session_id=session.pk)
    return server.chat_requests()[0].messages[0]["content"], session


def test_a_session_never_runs_an_exemplar_query_on_a_database_its_user_was_not_granted(
        secret, version, demo_database, user, replay_llm):
    _add_row_after_publishing(secret[1])
    system, session = _system_prompt_of_session(user, demo_database, version, replay_llm)
    assert "Smiley" in system  # what was stored at publishing is what the prompt uses
    assert "Karla" not in system  # the row added since was never read on this user's behalf
    assert any("secretdb" in w and "not one you may query" in w for w in session.config["exemplar_warnings"])


def test_a_granted_user_gets_the_exemplar_rendered_again(secret, version, demo_database, user, grant, replay_llm):
    grant(secret[0], user)
    _add_row_after_publishing(secret[1])
    system, session = _system_prompt_of_session(user, demo_database, version, replay_llm)
    assert "Karla" in system and session.config["exemplar_warnings"] == []


@pytest.mark.parametrize("route", ["page", "preview", "export", "api"])
def test_a_version_drawing_on_an_ungranted_database_is_refused_to_the_reader(route, version, client, user, grant,
                                                                          secret):
    client.force_login(user)
    url = {"page": reverse("exemplars:version_detail", args=[version.exemplar_set_id, version.number]),
           "preview": reverse("exemplars:version_preview", args=[version.exemplar_set_id, version.number]),
           "export": reverse("exemplars:version_export", args=[version.exemplar_set_id, version.number]),
           "api": reverse("exemplar-set-version-detail", args=[version.pk])}[route]
    refused = client.get(url)
    assert refused.status_code == 404 and b"Smiley" not in refused.content
    grant(secret[0], user)
    assert client.get(url).status_code == 200


def test_lists_leave_out_such_a_version_and_its_set_when_it_has_no_other(version, client, user, demo_database):
    client.force_login(user)
    listed = client.get(reverse("exemplar-set-version-list")).json()
    assert version.pk not in [v["id"] for v in listed.get("results", listed)]
    # its set's every version is hidden: the set is too (its name would leak); one visible version shows it and
    # says how many are withheld (tests/annotations/exemplars/test_set_workspaces.py)
    assert client.get(reverse("exemplar-set-detail", args=[version.exemplar_set_id])).status_code == 404
    assert client.get(reverse("exemplars:set_detail", args=[version.exemplar_set_id])).status_code == 404
    assert "spies" not in client.get(reverse("exemplars:set_list")).content.decode()
    ask = client.get(reverse("ask")).content.decode()
    assert "spies v1" not in ask


def test_the_api_refuses_to_start_a_session_with_such_a_version(version, client, user, demo_database):
    from agent.models import AgentSession

    client.force_login(user)
    response = client.post(reverse("session-list"), {"database": demo_database.name, "question": "How many?",
                                                     "exemplar_set_version": version.pk},
                           content_type="application/json")
    assert response.status_code == 400 and "exemplar_set_version" in response.json()
    assert not AgentSession.objects.exists()


def test_a_run_refuses_such_a_version_and_an_example_pool_drawn_from_it(version, demo_database, user, grant,
                                                                        secret, replay_llm):
    from django.core.exceptions import ValidationError

    from agent.roles import OPERATOR
    from annotations.runs import services as run_services
    from annotations.runs.models import Dataset, DatasetQuestion, Run

    replay_llm([])
    give_roles(user, OPERATOR)
    dataset = Dataset.objects.create(name="mini", kind="spider", source_path="/nowhere", question_count=1)
    DatasetQuestion.objects.create(dataset=dataset, index=0, db_id="chinook", database=demo_database,
                                   question="How many artists?", gold_sql="SELECT count(*) FROM Artist")
    with pytest.raises(ValidationError, match="No such exemplar set version"):
        run_services.run_create_agent(dataset=dataset, name="r", user=user, exemplar_set_version=version)
    with pytest.raises(ValidationError, match="No published version"):
        run_services.run_create_agent(dataset=dataset, name="r", user=user, strategy="dart_sql",
                                      pool="exemplars:spies")
    assert not Run.objects.exists()
    grant(secret[0], user)
    assert run_services.run_create_agent(dataset=dataset, name="r", user=user, strategy="dart_sql",
                                         pool="exemplars:spies").pk
