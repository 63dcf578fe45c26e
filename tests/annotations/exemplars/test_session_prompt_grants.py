"""A session's prompt holds its exemplars' text (and a retrieving strategy's pool examples), which may come from a
database other than the session's: it is shown only to a viewer who sees every such database, judged when it is
read (a grant revoked since the session ran hides it again), and hidden when where they came from cannot be told.
Every page, partial, API route and admin page that shows a session's turns or its config follows it."""

import inspect
import re
from pathlib import Path

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils.html import escape

from agent import policies
from agent.models import AgentSession, DatabaseGrant, Turn
from agent.roles import ANNOTATOR, CURATOR, VIEWER
from agent.services import sessions
from agent.strategies.pool import PoolExample
from annotations.exemplars import services as exemplar_services
from annotations.exemplars.selectors import few_shot_for_version
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db

SECRET = "CREATE TABLE agent (name TEXT); INSERT INTO agent VALUES ('Smiley');"
EXEMPLAR_QUESTION = "Who are the secret agents?"
# Distinctive text of the exemplar drawn from secretdb: its observation's row, and its question.
LEAKS = ("Smiley", EXEMPLAR_QUESTION)


@pytest.fixture
def secret(make_sqlite, upload_dir):
    from agent import services

    path = make_sqlite(SECRET, "secret.sqlite")
    return services.database_register(name="secretdb", location=str(path), refresh="sync")


@pytest.fixture
def author(django_user_model):
    return django_user_model.objects.create_user("author", password="pw-author-123", is_superuser=True)


@pytest.fixture
def version(secret, demo_database, author, django_user_model):
    reviewer = give_roles(django_user_model.objects.create_user("rex", password="pw-rex-123"), CURATOR)
    exemplar = exemplar_services.exemplar_create(user=author, database=secret, question=EXEMPLAR_QUESTION)
    exemplar_services.step_add(exemplar=exemplar, user=author, thought="List them.",
                               action='ExecuteSQL("SELECT name FROM agent")')
    exemplar_services.step_add(exemplar=exemplar, user=author, thought="Done.", action="Done")
    exemplar_services.exemplar_submit(exemplar=exemplar, user=author)
    exemplar_services.exemplar_review(exemplar=exemplar, user=reviewer, approve=True)
    exemplar_set = exemplar_services.set_create(name="spies", user=author)
    return exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[exemplar], user=reviewer)


def _run_session(asker, database, replay_llm, **kwargs) -> AgentSession:
    replay_llm(["Thought: Count the tracks.\nAction: ExecuteSQL(\"SELECT count(*) FROM Track\")",
                "Thought: Done.\nAction: Done"])
    session = sessions.session_create(database=database, question="How many tracks?", user=asker, enqueue=False,
                                      options={"observation_profile": "default"}, **kwargs)
    sessions.session_execute(session_id=session.pk)
    session.refresh_from_db()
    assert session.status == AgentSession.Status.ANSWERED
    return session


@pytest.fixture
def session(version, demo_database, author, replay_llm) -> AgentSession:
    """A session on the demo database (visible to everyone) whose prompt holds the exemplar from secretdb."""
    found = _run_session(author, demo_database, replay_llm, few_shot=few_shot_for_version(version))
    prompts = "".join(str(t.prompt) for t in Turn.objects.filter(session=found))
    assert all(text in prompts for text in LEAKS)  # the stored turns do hold it
    return found


# --- the paths: each returns (text a viewer gets, whether it says the prompt is hidden) -----------------------

def _page(client, session):
    text = client.get(session.get_absolute_url()).content.decode()
    return text, 'id="prompt-hidden-note"' in text and 'class="small prompt-hidden-note"' in text


def _live(client, session):
    text = client.get(session.get_absolute_url(), HTTP_HX_REQUEST="true").content.decode()
    return text, 'class="small prompt-hidden-note"' in text


def _poll(client, session):
    text = client.get(session.get_absolute_url(), {"after": "-1"}, HTTP_HX_REQUEST="true").content.decode()
    return text, 'class="small prompt-hidden-note"' in text


def _api_detail(client, session):
    response = client.get(reverse("session-detail", args=[session.pk]))
    assert response.status_code == 200
    return response.content.decode(), response.json()["config"].get("prompt_hidden") == policies.PROMPT_HIDDEN_NOTE


def _api_list(client, session):
    response = client.get(reverse("session-list"))
    row = next(r for r in response.json()["results"] if r["id"] == session.pk)
    return response.content.decode(), row["config"].get("prompt_hidden") == policies.PROMPT_HIDDEN_NOTE


def _api_cancel(client, session):
    response = client.post(reverse("session-cancel", args=[session.pk]))
    assert response.status_code == 200
    return response.content.decode(), response.json()["config"].get("prompt_hidden") == policies.PROMPT_HIDDEN_NOTE


VISIBLE_PATHS = {"page": _page, "live": _live, "poll": _poll, "api-detail": _api_detail, "api-list": _api_list,
                 "api-cancel": _api_cancel}


def _grant(database, user):
    DatabaseGrant.objects.get_or_create(database=database, user=user)


@pytest.mark.parametrize("path", VISIBLE_PATHS)
def test_a_viewer_not_granted_the_exemplars_database_gets_the_note_not_the_text(path, session, client, user):
    if path == "api-cancel":
        session.created_by = user
        session.save(update_fields=["created_by"])
    client.force_login(user)
    text, noted = VISIBLE_PATHS[path](client, session)
    assert not [leak for leak in LEAKS if leak in text]
    assert "secretdb" not in text  # nor the hidden database's name (the exemplar warnings name it)
    assert noted
    if path in ("page", "live", "poll"):
        assert "SELECT count(*) FROM Track" in text  # the session's own steps stay


@pytest.mark.parametrize("path", VISIBLE_PATHS)
def test_a_viewer_granted_the_exemplars_database_reads_the_prompt(path, session, client, user, secret):
    _grant(secret, user)
    if path == "api-cancel":
        session.created_by = user
        session.save(update_fields=["created_by"])
    client.force_login(user)
    text, noted = VISIBLE_PATHS[path](client, session)
    assert all(leak in text for leak in LEAKS) and not noted


def test_the_turns_api_never_returns_prompt_text(session, client, user, secret):
    client.force_login(user)
    for granted in (False, True):
        if granted:
            _grant(secret, user)
        response = client.get(reverse("session-turns", args=[session.pk]))
        assert response.status_code == 200 and response.json()["results"]
        assert all("prompt" not in turn for turn in response.json()["results"])
        assert not [leak for leak in LEAKS if leak in response.content.decode()]


def test_a_grant_revoked_after_the_run_hides_the_prompt_again(version, demo_database, secret, user, client,
                                                              replay_llm):
    _grant(secret, user)
    own = _run_session(user, demo_database, replay_llm, few_shot=few_shot_for_version(version))
    client.force_login(user)
    assert "Smiley" in _page(client, own)[0]
    DatabaseGrant.objects.filter(database=secret, user=user).delete()
    for path in ("page", "poll", "api-detail"):
        text, noted = VISIBLE_PATHS[path](client, own)
        assert "Smiley" not in text and EXEMPLAR_QUESTION not in text and noted, path


def test_a_session_without_exemplars_shows_its_prompt_as_before(demo_database, user, client, replay_llm):
    zero = _run_session(user, demo_database, replay_llm, zero_shot=True)
    client.force_login(user)
    text, noted = _page(client, zero)
    assert 'class="turn-prompt"' in text and "How many tracks?" in text and not noted
    assert policies.can_see_session_prompt(user, zero)


@pytest.mark.parametrize("breakage", ["version missing", "config missing", "source unparsable",
                                      "text without a database", "snapshot of another length", "source cut short"])
def test_when_the_exemplars_source_cannot_be_told_the_prompt_is_hidden_from_whoever_misses_a_grant(
        breakage, session, version, author, user, client):
    config = dict(session.config)
    if breakage == "version missing":  # versions are never deleted; a source naming none here is the same
        config["exemplar_set_version"] = {**config["exemplar_set_version"], "id": version.pk + 10_000}
    elif breakage == "config missing":
        config = {}
    elif breakage == "source unparsable":
        config["exemplar_set_version"] = {**config["exemplar_set_version"], "id": "not a number"}
    elif breakage == "source cut short":  # the page cannot link to the version any more, and still renders
        config["exemplar_set_version"] = {"id": "not a number"}
    elif breakage == "text without a database":
        config["exemplar_set_version"] = None
        config["few_shot"] = {**config["few_shot"], "databases": [None]}
    else:
        config["exemplar_set_version"] = None
        config["few_shot"] = {**config["few_shot"], "databases": []}
    AgentSession.objects.filter(pk=session.pk).update(config=config)
    session.refresh_from_db()
    assert not policies.can_see_session_prompt(user, session)
    client.force_login(user)
    text, noted = _page(client, session)
    assert "Smiley" not in text and EXEMPLAR_QUESTION not in text and noted
    # Whoever sees every registered database loses nothing by not knowing the source: it shows (old sessions
    # stored no source, and a superuser must still be able to read them).
    assert policies.can_see_session_prompt(author, session)
    client.force_login(author)
    text, noted = _page(client, session)
    assert EXEMPLAR_QUESTION in text and not noted


def test_exemplars_without_a_version_follow_the_databases_their_snapshot_names(session, secret, user, author):
    config = {**session.config, "exemplar_set_version": None}
    AgentSession.objects.filter(pk=session.pk).update(config=config)
    session.refresh_from_db()
    assert session.config["few_shot"]["databases"] == ["secretdb"]
    assert not policies.can_see_session_prompt(user, session)
    assert policies.can_see_session_prompt(author, session)
    _grant(secret, user)
    assert policies.can_see_session_prompt(user, session)
    # a name no database here carries restricts nothing (imported paper sets), as for set versions
    config["few_shot"] = {**config["few_shot"], "databases": ["concert_singer_elsewhere"]}
    AgentSession.objects.filter(pk=session.pk).update(config=config)
    session.refresh_from_db()
    DatabaseGrant.objects.filter(user=user).delete()
    assert policies.can_see_session_prompt(user, session)


def test_an_experiment_candidates_exemplars_follow_their_databases(session, version, secret, user, author):
    from annotations.experiments.models import Candidate, CandidateSnapshot

    candidate = Candidate.objects.create(exemplar_set=version.exemplar_set, number=1, base_version=version)
    snapshot = CandidateSnapshot.objects.create(candidate=candidate, exemplars=version.exemplars,
                                                content_hash="1" * 64)
    config = {**session.config, "exemplar_set_version": {"snapshot": snapshot.pk, "candidate_id": candidate.pk,
                                                         "candidate": 1, "set": "spies", "id": None}}
    AgentSession.objects.filter(pk=session.pk).update(config=config)
    session.refresh_from_db()
    assert not policies.can_see_session_prompt(user, session)
    assert policies.can_see_session_prompt(author, session)
    _grant(secret, user)
    assert policies.can_see_session_prompt(user, session)


def test_an_example_pools_databases_count_too(demo_database, secret, user, client, make_sqlite):
    """DART-SQL and SCL-SQL put retrieved question-SQL pairs of the pool in the prompt."""
    from agent import services

    # A database the user is never granted: without it, granting secretdb would grant them everything, and whoever
    # sees every database reads every prompt.
    services.database_register(name="elsewhere", location=str(make_sqlite(SECRET, "elsewhere.sqlite")),
                               refresh="sync")
    pool = sessions.example_pool_store(source="dataset spies", examples=[
        PoolExample("dataset:1:0", EXEMPLAR_QUESTION, "SELECT name FROM agent", "secretdb")])
    retrieving = AgentSession.objects.create(
        database=demo_database, question="How many tracks?", strategy="dart_sql",
        config={"few_shot": None, "exemplar_set_version": None, "example_pool": sessions.example_pool_snapshot(pool)})
    Turn.objects.create(session=retrieving, index=0, kind="generate", completion="SELECT 1",
                        prompt=[{"role": "user", "content": f"Q: {EXEMPLAR_QUESTION} SQL: SELECT name FROM agent"}])
    client.force_login(user)
    text, noted = _page(client, retrieving)
    assert EXEMPLAR_QUESTION not in text and noted
    _grant(secret, user)
    text, noted = _page(client, retrieving)
    assert EXEMPLAR_QUESTION in text and not noted
    missing = {"id": pool.pk + 10_000, "digest": pool.digest}
    AgentSession.objects.filter(pk=retrieving.pk).update(config={**retrieving.config, "example_pool": missing})
    retrieving.refresh_from_db()
    assert not policies.can_see_session_prompt(user, retrieving)


def test_a_label_review_page_shows_the_sessions_steps_not_its_prompt(session, demo_database, user, client,
                                                                     secret):
    from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem

    give_roles(user, ANNOTATOR)
    _grant(secret, user)  # even a reader granted every database gets no prompt on this page
    dataset = Dataset.objects.create(name="mini", kind="spider", source_path="/nowhere", question_count=1)
    question = DatasetQuestion.objects.create(dataset=dataset, index=0, db_id="chinook", database=demo_database,
                                              question="How many tracks?", gold_sql="SELECT count(*) FROM Track")
    run = Run.objects.create(name="r", dataset=dataset, source="agent", status="done")
    item = RunItem.objects.create(run=run, question=question, predicted_sql="SELECT 1", eval_status="ok", ex=False,
                                  session=session)
    client.force_login(user)
    text = client.get(reverse("labels:review", args=[item.pk])).content.decode()
    assert "SELECT count(*) FROM Track" in text
    assert not [leak for leak in LEAKS if leak in text]


# --- the admin --------------------------------------------------------------------------------------------

@pytest.fixture
def staff_viewer(django_user_model):
    """A staff account with a read role (the admin lets it read sessions and turns), not a superuser."""
    return give_roles(django_user_model.objects.create_user("stan", password="pw-stan-123", is_staff=True), VIEWER)


@pytest.mark.parametrize("model", ["turn", "agentsession"])
def test_the_admin_leaves_the_prompt_out_for_a_staff_user_not_granted(model, session, staff_viewer, staff, client,
                                                                       secret):
    turn = Turn.objects.filter(session=session).order_by("index").first()
    url = reverse(f"admin:agent_{model}_change", args=[turn.pk if model == "turn" else session.pk])
    client.force_login(staff_viewer)
    response = client.get(url)
    assert response.status_code == 200
    text = response.content.decode()
    assert "Smiley" not in text and EXEMPLAR_QUESTION not in text and escape(policies.PROMPT_HIDDEN_NOTE) in text
    _grant(secret, staff_viewer)
    assert "Smiley" in client.get(url).content.decode()
    client.force_login(staff)  # a superuser is granted every database
    assert "Smiley" in client.get(url).content.decode()


# --- the claim "every path is covered", checked against the code ------------------------------------------

# Every URL route whose view renders a session's turns (found below from the templates and the views' source),
# and the test above that shows it keeps the prompt from a viewer not granted its exemplars' databases.
TURN_ROUTES = {
    "session_detail": "test_a_viewer_not_granted_the_exemplars_database_gets_the_note_not_the_text[page/live/poll]",
    "labels:review": "test_a_label_review_page_shows_the_sessions_steps_not_its_prompt",
    # its turns come from agent.selectors.session_turns without prompts (asserted below)
    "experiments:experiment_question": "test_turn_routes_are_the_declared_ones",
}

TEMPLATES = Path(__file__).resolve().parents[3] / "templates"


def _templates_showing_turns() -> set[str]:
    """Templates that render a turn (the turn partial, or a turn's prompt), and every template including them."""
    sources = {str(p.relative_to(TEMPLATES)): p.read_text() for p in TEMPLATES.rglob("*.html")}
    found = {name for name, text in sources.items()
             if re.search(r"full_prompt|turn\.prompt\b|\.messages\b", text)}
    while True:
        more = {name for name, text in sources.items()
                if name not in found and any(f'"{t}"' in text for t in found)}
        if not more:
            return found
        found |= more


def _routes(resolver=None, namespace=""):
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _routes(entry, inner)
        elif isinstance(entry, URLPattern) and entry.name:
            yield f"{namespace}{entry.name}", entry.callback


def test_turn_routes_are_the_declared_ones():
    templates = _templates_showing_turns()
    assert "agent/partials/turn.html" in templates and "annotations/labels/review.html" in templates
    rendering = set()
    for name, callback in _routes():
        if name.startswith("admin:"):
            continue
        try:
            source = inspect.getsource(inspect.unwrap(callback))
        except (OSError, TypeError):
            continue
        if any(f'"{t}"' in source for t in templates):
            rendering.add(name)
    assert rendering == set(TURN_ROUTES), "a route renders turns: cover it with a test and list it in TURN_ROUTES"
    from annotations.experiments import views as experiment_views
    from annotations.labels import views as label_views

    for view in (experiment_views.experiment_question, label_views.review):
        source = inspect.getsource(view)
        assert "session_turns(" in source and "with_prompts" not in source and "Turn.objects" not in source


def test_every_api_serializer_of_sessions_or_turns_hides_the_prompt():
    from rest_framework import serializers

    from agent.api import SessionSerializer

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    for serializer in set(subclasses(serializers.ModelSerializer)):
        model = getattr(getattr(serializer, "Meta", None), "model", None)
        fields = set(getattr(serializer.Meta, "fields", ()) or ()) if model else set()
        if model is Turn:
            assert not fields & {"prompt", "messages", "__all__"}, serializer
        if model is AgentSession and fields & {"config", "__all__"}:
            assert issubclass(serializer, SessionSerializer), serializer  # its to_representation redacts config


def test_every_admin_page_of_sessions_or_turns_hides_the_prompt():
    from django.contrib import admin

    from agent.admin import PromptHidingAdmin

    for model in (AgentSession, Turn):
        assert isinstance(admin.site._registry[model], PromptHidingAdmin)
    for model_admin in admin.site._registry.values():
        for inline in model_admin.inlines:
            if inline.model in (AgentSession, Turn):
                assert not set(inline.fields or ()) & {"prompt", "config"}, inline
