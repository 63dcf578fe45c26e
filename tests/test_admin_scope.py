"""The Django admin follows "Who sees what": a staff account that is not a superuser sees in the admin only the
rows the app would show it (``agent.admin.GrantScoped``); sessions and turns are read-only there.

The registry is enumerated: every registered ModelAdmin is either grant-scoped or listed in ``GLOBAL`` with the
reason its rows are shown to every staff account, and every scoped one is tried against a row built on a
database the staff account is not granted."""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from django.utils import timezone

from agent.admin import GrantScoped

# Registered admins whose rows are not on any database, shown to every staff account with the view permission.
GLOBAL = {
    "agent.llmendpoint": "LLM endpoints: configuration, no database content (Data admins manage them).",
    "agent.userbudget": "an account's daily budget: account administration, as Users and Groups are.",
    "agent.auditentry": "the audit log, which the app shows whole to whoever may read it (Data admins).",
    "agent.llmcalllease": "concurrency slots of an endpoint: no content.",
    "annotations.taxonomy": "the error taxonomy, shown to every role.",
    "annotations.taxonomyversion": "the error taxonomy, shown to every role.",
    "annotations.category": "the error taxonomy, shown to every role.",
}


def _label(model) -> str:
    return model._meta.label_lower


SCOPED = sorted((m for m, a in admin.site._registry.items() if isinstance(a, GrantScoped)), key=_label)


def test_every_registered_admin_is_scoped_or_global_for_a_reason():
    unscoped = sorted(_label(m) for m, a in admin.site._registry.items()
                      if not isinstance(a, GrantScoped) and _label(m) not in GLOBAL
                      and m._meta.app_label in ("agent", "annotations"))
    assert not unscoped, ("Admins neither grant-scoped (agent.admin.GrantScopedAdmin with grant_lookup or "
                          f"grant_scope) nor listed in GLOBAL with a reason: {unscoped}")
    registered = {_label(m) for m in admin.site._registry}
    assert not set(GLOBAL) - registered, f"stale GLOBAL entries: {set(GLOBAL) - registered}"
    scoped = set(SCOPED)
    from agent.models import Database

    for model in admin.site._registry:
        if _label(model) in GLOBAL:
            reaches = [f.name for f in model._meta.get_fields()
                       if f.is_relation and f.many_to_one and (f.related_model is Database or f.related_model in scoped)]
            assert not reaches, f"{_label(model)} is listed as global but points at scoped rows: {reaches}"


def test_the_session_and_turn_admins_and_their_inline_write_nothing():
    from django.contrib.auth.models import User

    from agent.models import AgentSession, Turn

    request = type("Request", (), {"user": User(username="root", is_superuser=True, is_active=True)})()
    for model in (AgentSession, Turn):
        model_admin = admin.site._registry[model]
        assert not model_admin.has_add_permission(request)
        assert not model_admin.has_change_permission(request, None)
        assert not model_admin.has_delete_permission(request, None)
    for inline in admin.site._registry[AgentSession].inlines:
        inline = inline(AgentSession, admin.site)
        assert not inline.has_add_permission(request, None) and not inline.has_change_permission(request, None)
        assert not inline.has_delete_permission(request, None)


# --- two worlds: one on a database the staff account sees, one on a database it does not ------------------

SCHEMA = "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT); INSERT INTO singer VALUES (1, 'Joe');"


@dataclass
class Worlds:
    shown: dict = field(default_factory=dict)  # model -> pks built on the granted database
    hidden: dict = field(default_factory=dict)  # model -> pks built on the other one
    objects: dict = field(default_factory=dict)


def _pks() -> dict:
    return {m: set(m._default_manager.values_list("pk", flat=True)) for m in admin.site._registry}


def _build(tag: str, *, staff, other, make_sqlite) -> dict:
    from agent import services as agent_services
    from agent.models import (
        AgentSession,
        AnswerFeedback,
        AskPreference,
        DatabaseGrant,
        ExamplePool,
        ImportJob,
        Turn,
        Workspace,
        WorkspaceMembership,
    )
    from annotations.exemplars.selectors import exemplar_snapshot
    from annotations.experiments.models import (
        Candidate,
        CandidateItem,
        CandidateSnapshot,
        ExemplarOrigin,
        Experiment,
        ExperimentRun,
        Suite,
        SuiteQuestion,
        SuiteVersion,
    )
    from annotations.labels.models import Label, LabelReveal, Queue, Reservation, SuggestionEvent
    from annotations.labels.selectors import default_taxonomy_version
    from annotations.models import Exemplar, ExemplarSet, ExemplarSetVersion, ExemplarStep
    from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem

    shown = tag == "shown"
    owner = staff if shown else other
    database = agent_services.database_register(name=f"db-{tag}", refresh="none",
                                                location=str(make_sqlite(SCHEMA, f"{tag}.sqlite")))
    workspace = Workspace.objects.create(slug=f"ws-{tag}", name=tag)
    database.workspace = workspace
    database.save(update_fields=["workspace"])
    WorkspaceMembership.objects.create(workspace=workspace, user=owner)
    DatabaseGrant.objects.create(database=database, user=owner)
    session = AgentSession.objects.create(database=database, question=f"secret question {tag}", status="answered",
                                          created_by=owner, config={"few_shot": None})
    Turn.objects.create(session=session, index=0, action=f"ExecuteSQL('SELECT {tag}')")
    AnswerFeedback.objects.create(session=session, author=owner, verdict="right")
    AskPreference.objects.create(user=owner, database=database)
    examples = [{"question": "q", "sql": "SELECT 1", "db_id": database.name}]
    ExamplePool.objects.create(source=f"pool {tag}", digest=hashlib.sha256(tag.encode()).hexdigest(), size=1,
                               examples=examples)
    ImportJob.objects.create(kind="dataset", name=f"upload {tag}", created_by=owner)
    dataset = Dataset.objects.create(name=f"set-{tag}", kind="spider", source_path="/nowhere", question_count=1)
    question = DatasetQuestion.objects.create(dataset=dataset, index=0, db_id=database.name, database=database,
                                              question=f"How many singers {tag}?", gold_sql="SELECT 1",
                                              difficulty="easy", table_count=1, join_count=0)
    run = Run.objects.create(name=f"run {tag}", dataset=dataset, source="imported", status="done", created_by=owner)
    item = RunItem.objects.create(run=run, question=question, predicted_sql="SELECT 1", eval_status="ok", ex=False,
                                  session=session)
    taxonomy = default_taxonomy_version()
    category = taxonomy.categories.order_by("position").first()
    Queue.objects.create(run=run, name=f"queue {tag}", taxonomy_version=taxonomy, created_by=owner)
    Label.objects.create(item=item, category=category, taxonomy_version=taxonomy, annotator=owner)
    LabelReveal.objects.create(item=item, user=owner)
    Reservation.objects.create(item=item, user=owner, expires_at=timezone.now() + timedelta(hours=1))
    SuggestionEvent.objects.create(item=item, user=owner, category_key=category.key)
    exemplar = Exemplar.objects.create(database=database, question=f"exemplar {tag}", author=owner)
    ExemplarStep.objects.create(exemplar=exemplar, position=0, thought="Count.", action="ExecuteSQL('SELECT 1')")
    exemplar_set = ExemplarSet.objects.create(name=f"exemplars {tag}", created_by=owner)
    version = ExemplarSetVersion.objects.create(exemplar_set=exemplar_set, number=1, note=f"version note {tag}",
                                                exemplars=[exemplar_snapshot(exemplar)], content_hash=tag[0] * 64)
    suite = Suite.objects.create(name=f"suite {tag}", dataset=dataset)
    suite_version = SuiteVersion.objects.create(suite=suite, number=1, question_count=1,
                                                recipe=[{"kind": "picked", "questions": [0]}])
    SuiteQuestion.objects.create(version=suite_version, question=question, position=0, origins=[{"kind": "picked"}])
    candidate = Candidate.objects.create(exemplar_set=exemplar_set, number=1, base_version=version)
    CandidateItem.objects.create(candidate=candidate, position=0, exemplar=exemplar)
    snapshot = CandidateSnapshot.objects.create(candidate=candidate, exemplars=[], content_hash=tag[1] * 64)
    experiment = Experiment.objects.create(exemplar_set=exemplar_set, candidate=candidate, candidate_snapshot=snapshot,
                                           baseline_version=version, suite_version=suite_version,
                                           strategy="interactive_t2s", created_by=owner)
    arm_run = Run.objects.create(name=f"arm {tag}", dataset=dataset, source="agent", status="done", created_by=owner)
    ExperimentRun.objects.create(experiment=experiment, arm="candidate", trial=1, run=arm_run)
    ExemplarOrigin.objects.create(exemplar=exemplar, run=run, item=item)
    return {"database": database, "session": session, "exemplar_set": exemplar_set}


@pytest.fixture
def staff_viewer(django_user_model):
    """A staff account, not a superuser, with every view permission (and no role's grant of its own)."""
    account = django_user_model.objects.create_user("stan", password="pw-stan-123", is_staff=True)
    account.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    return account


@pytest.fixture
def worlds(db, make_sqlite, staff_viewer, django_user_model) -> Worlds:
    importlib.import_module("annotations.migrations.0005_seed_error_taxonomy").seed(
        importlib.import_module("django.apps").apps, None)
    other = django_user_model.objects.create_user("olga", password="pw-olga-123")
    other.groups.set([Group.objects.get_or_create(name="others")[0]])
    w = Worlds()
    for tag in ("shown", "hidden"):
        before = _pks()
        w.objects[tag] = _build(tag, staff=staff_viewer, other=other, make_sqlite=make_sqlite)
        after = _pks()
        getattr(w, tag).update({m: after[m] - before[m] for m in after})
    return w


def _listed(client, model) -> set:
    response = client.get(reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist"))
    assert response.status_code == 200, (model, response.status_code)
    return {obj.pk for obj in response.context["cl"].queryset}


@pytest.mark.parametrize("model", SCOPED, ids=_label)
def test_a_row_on_a_database_not_granted_is_missing_from_the_admin(model, worlds, staff_viewer, staff, client):
    hidden, shown = worlds.hidden[model], worlds.shown[model]
    assert hidden and shown, f"build a {_label(model)} row in each world of tests/test_admin_scope.py:_build"
    name = f"admin:{model._meta.app_label}_{model._meta.model_name}"

    client.force_login(staff)  # a superuser sees every row
    assert hidden | shown <= _listed(client, model)
    assert client.get(reverse(f"{name}_change", args=[next(iter(hidden))])).status_code == 200

    client.force_login(staff_viewer)
    listed = _listed(client, model)
    assert shown <= listed, "a granted staff account sees its own"
    assert not hidden & listed
    for view in ("change", "history", "delete"):
        response = client.get(reverse(f"{name}_{view}", args=[next(iter(hidden))]))
        missing = client.get(reverse(f"{name}_{view}", args=[987654321]))
        # exactly as for a row that does not exist (the admin redirects to its index saying so)
        assert (response.status_code, response.get("Location")) == (missing.status_code, missing.get("Location"))
        assert response.status_code in (302, 403, 404), (view, response.status_code)


def test_list_filters_and_autocompletes_name_only_granted_databases(worlds, staff_viewer, client):
    client.force_login(staff_viewer)
    for url in (reverse("admin:agent_agentsession_changelist"), reverse("admin:agent_databasegrant_changelist"),
                reverse("admin:annotations_exemplar_changelist"), reverse("admin:annotations_runitem_changelist"),
                reverse("admin:annotations_datasetquestion_changelist")):
        text = client.get(url).content.decode()
        assert "db-shown" in text or "set-shown" in text or "run shown" in text, url
        assert "db-hidden" not in text and "set-hidden" not in text and "run hidden" not in text, url
    popup = client.get(reverse("admin:agent_database_changelist") + "?_to_field=id&_popup=1").content.decode()
    assert "db-shown" in popup and "db-hidden" not in popup


def test_a_select_of_databases_offers_only_granted_ones(worlds, staff_viewer, client):
    staff_viewer.user_permissions.add(*Permission.objects.filter(codename="add_databasegrant"))
    client.force_login(staff_viewer)
    text = client.get(reverse("admin:agent_databasegrant_add")).content.decode()
    assert "db-shown" in text and "db-hidden" not in text
    hidden = worlds.objects["hidden"]["database"]
    response = client.post(reverse("admin:agent_databasegrant_add"), {"database": hidden.pk, "user": staff_viewer.pk})
    assert response.status_code == 200  # the form refuses the choice
    from agent.models import DatabaseGrant

    assert not DatabaseGrant.objects.filter(database=hidden, user=staff_viewer).exists()


def test_a_set_it_sees_lists_only_its_visible_versions(worlds, staff_viewer, staff, client):
    from agent.models import Workspace
    from annotations.exemplars.selectors import exemplar_snapshot
    from annotations.models import Exemplar, ExemplarSet, ExemplarSetVersion

    # a set of the staff account's workspace, one version of which draws on the database it is not granted
    exemplar_set = ExemplarSet.objects.create(name="mixed set", workspace=Workspace.objects.get(slug="ws-shown"))
    hidden = Exemplar.objects.get(question="exemplar hidden")
    ExemplarSetVersion.objects.create(exemplar_set=exemplar_set, number=1, note="version note hidden",
                                      exemplars=[exemplar_snapshot(hidden)], content_hash="m" * 64)
    url = reverse("admin:annotations_exemplarset_change", args=[exemplar_set.pk])
    client.force_login(staff_viewer)
    text = client.get(url).content.decode()
    assert "mixed set" in text and "version note hidden" not in text
    client.force_login(staff)
    assert "version note hidden" in client.get(url).content.decode()


@pytest.mark.parametrize("superuser", [False, True])
def test_the_session_change_form_is_read_only_and_add_is_refused(worlds, staff_viewer, staff, client, superuser):
    from agent.models import AgentSession, Turn

    account = staff if superuser else staff_viewer
    if not superuser:
        account.user_permissions.add(*Permission.objects.filter(content_type__app_label="agent",
                                                                content_type__model__in=["agentsession", "turn"]))
    client.force_login(account)
    session = worlds.objects["shown"]["session"]
    turn = session.turns.get()
    assert client.get(reverse("admin:agent_agentsession_add")).status_code == 403
    assert client.get(reverse("admin:agent_turn_add")).status_code == 403
    response = client.get(reverse("admin:agent_agentsession_change", args=[session.pk]))
    assert response.status_code == 200 and b'name="status"' not in response.content
    response = client.post(reverse("admin:agent_agentsession_change", args=[session.pk]),
                           {"status": "queued", "question": "rewritten", "strategy": "dart_sql"})
    assert response.status_code == 403
    client.post(reverse("admin:agent_turn_change", args=[turn.pk]), {"action": "rewritten", "index": 0})
    assert client.post(reverse("admin:agent_agentsession_delete", args=[session.pk]), {"post": "yes"}).status_code == 403
    session.refresh_from_db()
    turn.refresh_from_db()
    assert (session.status, session.question, session.strategy) == ("answered", "secret question shown",
                                                                     "interactive_t2s")
    assert turn.action == "ExecuteSQL('SELECT shown')" and AgentSession.objects.filter(pk=session.pk).exists()
    assert Turn.objects.filter(pk=turn.pk).exists()
