"""An exported set uploaded again: exemplars map to registered databases by name (the others are named), the
same content is never duplicated, and the set's page says which exemplars cannot run here (no Run buttons)."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from agent.roles import CURATOR, VIEWER
from annotations.exemplars import services
from annotations.models import Exemplar, ExemplarSet
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db


@pytest.fixture
def curator(client, django_user_model):
    account = give_roles(django_user_model.objects.create_user("cleo", password="pw-cleo-123"), CURATOR, VIEWER)
    client.force_login(account)
    return account


def exported(client, demo_database, reviewer, approved) -> bytes:
    exemplar_set = services.set_create(name="chinook-set", user=reviewer)
    version = services.set_publish(exemplar_set=exemplar_set, exemplars=[
        approved(demo_database), approved(demo_database, question="How many artists?", actions=[
            ("Count them.", 'ExecuteSQL("SELECT COUNT(*) FROM Artist")'), ("Done.", "Done")])], user=reviewer)
    return client.get(f"/exemplars/sets/{exemplar_set.pk}/v{version.number}/export/").content


def upload(client, name: str, content: bytes):
    return client.post("/exemplars/sets/upload/", {"file": SimpleUploadedFile(f"{name}.json", content),
                                                   "name": name}, follow=True)


def test_reuploading_an_export_maps_to_the_registered_database_and_adds_no_duplicates(
        client, curator, demo_database, reviewer, approved):
    content = exported(client, demo_database, reviewer, approved)
    before = Exemplar.objects.approved().count()
    page = upload(client, "again", content).content.decode()
    assert "Mapped to registered databases: chinook (2)." in page
    assert "2 exemplars already here with the same content reused, not duplicated." in page
    again = ExemplarSet.objects.get(name="again").versions.get()
    assert all(Exemplar.objects.get(pk=i["exemplar_id"]).database == demo_database for i in again.exemplars)
    upload(client, "third", content)
    assert Exemplar.objects.approved().count() == before
    # The publish form lists each exemplar once.
    form = client.get(ExemplarSet.objects.get(name="third").get_absolute_url()).content.decode()
    assert form.count("How many artists?") == 1
    assert 'id="set-unrunnable"' not in form


def test_an_exemplar_whose_database_is_not_registered_is_named_and_cannot_be_run(
        client, curator, demo_database, reviewer, approved):
    doc = json.loads(exported(client, demo_database, reviewer, approved))
    doc["exemplars"][1]["database"] = "elsewhere"
    page = upload(client, "moved", json.dumps(doc).encode()).content.decode()
    assert "No registered database matched elsewhere (1 exemplar): their tools cannot run here." in page
    version = ExemplarSet.objects.get(name="moved").versions.get()
    stranger = Exemplar.objects.get(pk=version.exemplars[1]["exemplar_id"])
    assert stranger.database is None and stranger.source_database == "elsewhere"
    set_page = client.get(version.exemplar_set.get_absolute_url()).content.decode()
    assert 'id="set-unrunnable"' in set_page and f"#{stranger.pk}</a> on elsewhere" in set_page
    # Its console offers no Run button; an exemplar on a registered database does.
    assert ">Run</button>" not in client.get(f"/exemplars/{stranger.pk}/").content.decode()
    draft = services.exemplar_create(user=curator, database=demo_database, question="Which?")
    services.step_add(exemplar=draft, user=curator, thought="Look.", action='SearchValue("AC/DC")')
    assert ">Run</button>" in client.get(f"/exemplars/{draft.pk}/").content.decode()
    # Uploaded once more: the unmatched exemplar is not duplicated either.
    count = Exemplar.objects.count()
    upload(client, "moved-again", json.dumps(doc).encode())
    assert Exemplar.objects.count() == count
