"""A request that is refused stores nothing, and a refusal about a name never tells whether a hidden object
holds it.

Every write route of the API (read from the URLconf through the access matrix's table) is sent payloads it must
refuse, by an account that may use every route; whatever it answers with a 4xx, no row of any model changes.
"""

from __future__ import annotations

import json

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.urls import reverse

from agent.models import Database
from agent.roles import ANNOTATOR, DATA_ADMIN, OPERATOR
from annotations.labels.models import Category, Label
from tests.conftest import give_roles
from tests.support.uploads import sqlite_bytes
from tests.test_access_matrix import EXPECTATIONS, world  # noqa: F401 (the matrix's world is a fixture)

pytestmark = pytest.mark.django_db

WRITES = ("POST", "PUT", "PATCH", "DELETE")
# Values no field of any serializer takes: wrong types, out of range, unknown ids.
POISON = {key: value for key in (
    "name", "question", "database", "dataset", "run", "item", "category", "exemplar", "exemplars", "options",
    "strategy", "note", "corrected_sql", "location", "file", "kind", "sends", "questions", "limit", "position",
    "thought", "action", "approve", "evidence", "final", "exemplar_set_version", "suite_version", "candidate")
          for value in ([{"not": "valid"}],)}


def _payloads(world) -> tuple[dict, ...]:  # noqa: F811
    """Nothing; wrong types everywhere; and real objects of the world with one value each route must refuse
    (a corrected query on a label that takes none, an empty question, options out of bounds), which passes the
    serializers and is refused deeper, where a partial write could stay behind."""
    selected_column = Category.objects.get(version=world.category.version, key="selected_column")
    deep = {"item": world.item.pk, "category": selected_column.pk, "corrected_sql": "SELECT 1", "note": "n",
            "database": world.database.name, "question": "How many singers?", "dataset": world.dataset.name, "run": world.run.pk,
            "exemplar": world.exemplar.pk, "strategy": "dart_sql", "options": {"self_consistency": 300,
                                                                              "temperature": 100}}
    return {}, POISON, deep


def _counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()
            if model._meta.label not in ("sessions.Session",)}


def _write_routes(world):  # noqa: F811
    """(name, method, url, the world's user of the first role allowed to use it) for every API write."""
    for name, rule in sorted(EXPECTATIONS.items()):
        if not rule.api or rule.public:
            continue
        for method, roles in rule.methods.items():
            if method in WRITES and roles:
                yield name, method, reverse(name, kwargs=rule.kwargs(world)), world.users[sorted(roles)[0]]


def test_every_refused_api_write_stores_nothing(client, world):  # noqa: F811
    refused, changed = 0, []
    for name, method, url, user in _write_routes(world):
        client.force_login(user)
        for payload in _payloads(world):
            with transaction.atomic():  # each request on the same world, its effects rolled back after
                before = _counts()
                response = client.generic(method, url, data=json.dumps(payload), content_type="application/json")
                after = _counts()
                transaction.set_rollback(True)
            if 400 <= response.status_code < 500:
                refused += 1
                diff = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
                if diff:
                    changed.append(f"{method} {url} ({name}) answered {response.status_code} but stored {diff}")
    assert refused >= 40  # the routes were reached and refused, not skipped
    assert not changed, "\n".join(changed)


def test_a_corrected_query_on_a_label_that_takes_none_is_refused_and_no_label_is_stored(client, world):  # noqa: F811
    annotator = world.users[ANNOTATOR]
    client.force_login(annotator)
    selected_column = Category.objects.get(version=world.category.version, key="selected_column")
    assert not selected_column.accepts_corrected_gold
    before = Label.objects.count()
    response = client.post(reverse("label-list"), {"item": world.item.pk, "category": selected_column.pk,
                                                   "corrected_sql": "SELECT 1"}, content_type="application/json")
    assert response.status_code == 400 and "corrected_sql" in response.json()
    assert Label.objects.count() == before
    assert not Label.objects.filter(item=world.item, category=selected_column, annotator=annotator).exists()


@pytest.fixture
def secret_and_visible(make_sqlite, grant, django_user_model):
    from agent import services

    hidden = services.database_register(name="secretdb", location=str(make_sqlite("CREATE TABLE t (x);", "s.sqlite")),
                                        refresh="none")
    visible = services.database_register(name="mine", location=str(make_sqlite("CREATE TABLE t (x);", "m.sqlite")),
                                         refresh="none")
    admin = give_roles(django_user_model.objects.create_user("dora", password="pw-dora-123"), DATA_ADMIN, OPERATOR)
    grant(visible, admin)
    return hidden, visible, admin


def test_a_database_upload_refusal_reads_the_same_for_a_hidden_and_a_visible_name(client, secret_and_visible,
                                                                                  upload_dir, tmp_path):
    hidden, visible, admin = secret_and_visible
    client.force_login(admin)

    def refusal(name: str) -> dict:
        response = client.post(reverse("database-upload"), {
            "name": name, "file": SimpleUploadedFile("x.sqlite", sqlite_bytes(tmp_path))})
        assert response.status_code == 400
        return response.json()

    assert refusal(hidden.name) == refusal(visible.name)
    assert "registered" not in json.dumps(refusal(hidden.name))
    assert Database.objects.count() == 2


def test_a_dataset_import_refusal_reads_the_same_for_a_hidden_and_a_visible_database(secret_and_visible, tmp_path):
    from django.core.exceptions import ValidationError

    from annotations.runs.services.datasets import dataset_import

    hidden, visible, admin = secret_and_visible
    messages = []
    for db_id in (hidden.name, visible.name):
        root = tmp_path / db_id
        (root / "database" / db_id).mkdir(parents=True)
        (root / "database" / db_id / f"{db_id}.sqlite").write_bytes(sqlite_bytes(tmp_path, name=f"src-{db_id}"))
        (root / "dev.json").write_text(json.dumps([{"db_id": db_id, "question": "q?", "query": "SELECT 1"}]))
        with pytest.raises(ValidationError) as refused:
            dataset_import(path=root, kind="spider", name=f"set-{db_id}", repoint=False)
        messages.append(refused.value.messages[0].replace(db_id, "<name>"))
    assert messages[0] == messages[1] and "registered" not in messages[0]
