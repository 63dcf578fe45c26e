"""Importing a dataset into a workspace: its members see it and its runs at once; an upload attaches to
databases already registered under its db_ids (checked by schema) instead of failing; without files it is
executable on them; a dataset nobody can execute is not shown to users with no grant."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from agent.models import Database, ImportJob, Workspace
from agent.roles import ANNOTATOR, CURATOR, OPERATOR, VIEWER
from agent.services import workspaces
from annotations import policies
from annotations.runs import services, uploads
from annotations.runs.models import Dataset
from tests.conftest import give_roles
from tests.support.uploads import QUESTIONS, spider_zip, sqlite_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(django_user_model):
    workspace = Workspace.objects.create(slug="team", name="Team")
    people = {}
    for name, role in [("opal", OPERATOR), ("cora", CURATOR), ("ann1", ANNOTATOR), ("ann2", ANNOTATOR)]:
        people[name] = give_roles(django_user_model.objects.create_user(name, password="pw-12345-x"), role, VIEWER)
        workspaces.workspace_member_add(workspace=workspace, user=people[name])
    people["out"] = give_roles(django_user_model.objects.create_user("out", password="pw-12345-x"), CURATOR, VIEWER)
    return workspace, people


def run_job(response) -> ImportJob:
    assert response.status_code == 302, response.content.decode()[:2000]
    job = ImportJob.objects.get(pk=int(response["Location"].rstrip("/").rsplit("/", 1)[1]))
    uploads.dataset_upload_run(job=job)
    job.refresh_from_db()
    return job


def test_an_import_into_a_workspace_is_seen_by_its_members_with_its_runs(client, team, tmp_path):
    workspace, people = team
    client.force_login(people["opal"])
    job = run_job(client.post("/datasets/", {"kind": "spider", "name": "small", "workspace": "team",
                                             "archive": SimpleUploadedFile("s.zip", spider_zip(tmp_path))}))
    assert job.status == "done", job.error
    assert job.stage == "imported 3 questions, 3 executable here"
    dataset = Dataset.objects.get(name="small")
    assert dataset.workspace == workspace and Database.objects.get(name="concert_singer").workspace == workspace
    run = services.run_import_predictions(dataset=dataset, text="SELECT 1\nSELECT 2\nSELECT 3\n", fmt="spider",
                                          name="baseline", user=people["opal"])
    for name in ("cora", "ann1", "ann2"):
        assert policies.visible_runs(people[name]).filter(pk=run.pk).exists(), name
        client.force_login(people[name])
        assert client.get(f"/runs/{run.pk}/").status_code == 200
    assert 'id="dataset-workspace">Team</a>' in client.get("/datasets/small/").content.decode()
    assert 'id="database-workspace">Team</a>' in client.get("/databases/concert_singer/").content.decode()
    assert not policies.visible_datasets(people["out"]).filter(pk=dataset.pk).exists()
    client.force_login(people["out"])
    assert client.get(f"/runs/{run.pk}/").status_code == 404


def test_an_upload_into_a_workspace_one_is_not_in_is_refused(client, team, tmp_path, django_user_model):
    Workspace.objects.create(slug="other", name="Other")
    _, people = team
    client.force_login(people["opal"])
    response = client.post("/datasets/", {"kind": "spider", "name": "x", "workspace": "other",
                                          "archive": SimpleUploadedFile("s.zip", spider_zip(tmp_path))})
    assert response.status_code == 200 and not ImportJob.objects.exists()


def test_a_second_upload_of_the_same_databases_attaches_to_the_registered_ones(client, team, tmp_path):
    _, people = team
    client.force_login(people["opal"])
    first = run_job(client.post("/datasets/", {"kind": "spider", "name": "one", "workspace": "team",
                                               "archive": SimpleUploadedFile("s.zip", spider_zip(tmp_path))}))
    assert first.status == "done", first.error
    registered = Database.objects.get(name="concert_singer")
    # The Curator of the same workspace uploads the same data again (with its files): no refusal.
    give_roles(people["cora"], OPERATOR)
    client.force_login(people["cora"])
    again = run_job(client.post("/datasets/", {"kind": "spider", "name": "two", "workspace": "team",
                                               "archive": SimpleUploadedFile("s.zip", spider_zip(tmp_path))}))
    assert again.status == "done", again.error
    assert Database.objects.filter(name="concert_singer").get().location == registered.location
    two = Dataset.objects.get(name="two")
    assert two.executable_count == 3
    assert set(two.questions.values_list("database", flat=True)) == {registered.pk}


def test_an_upload_with_other_tables_under_a_registered_name_is_refused(client, team, tmp_path):
    _, people = team
    client.force_login(people["opal"])
    assert run_job(client.post("/datasets/", {"kind": "spider", "name": "one", "workspace": "team",
                                              "archive": SimpleUploadedFile("s.zip", spider_zip(tmp_path))})
                   ).status == "done"
    other = tmp_path / "other.sqlite"
    import sqlite3

    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE singer (x INT)")
    conn.close()
    job = run_job(client.post("/datasets/", {"kind": "spider", "name": "two", "workspace": "team",
                                             "archive": SimpleUploadedFile("s.zip", spider_zip(
                                                 tmp_path, db_bytes=other.read_bytes()))}))
    assert job.status == "failed" and "other tables or columns" in job.error and "concert_singer" in job.error
    assert not Dataset.objects.filter(name="two").exists()


def test_questions_without_files_run_on_the_registered_databases(client, team, tmp_path):
    _, people = team
    client.force_login(people["opal"])
    run_job(client.post("/datasets/", {"kind": "spider", "name": "one", "workspace": "team",
                                       "questions": SimpleUploadedFile("dev.json", json.dumps(QUESTIONS).encode()),
                                       "databases": [SimpleUploadedFile("concert_singer.sqlite",
                                                                        sqlite_bytes(tmp_path))]}))
    job = run_job(client.post("/datasets/", {"kind": "spider", "name": "bare", "workspace": "team",
                                             "questions": SimpleUploadedFile("dev.json",
                                                                             json.dumps(QUESTIONS).encode())}))
    assert job.status == "done", job.error
    assert job.stage == "imported 3 questions, 3 executable here"
    assert Dataset.objects.get(name="bare").executable_count == 3


def test_a_dataset_nobody_can_execute_is_not_shown_to_users_without_a_grant(client, team, tmp_path):
    _, people = team
    client.force_login(people["opal"])
    job = run_job(client.post("/datasets/", {"kind": "spider", "name": "orphans",
                                             "questions": SimpleUploadedFile("dev.json",
                                                                             json.dumps(QUESTIONS).encode())}))
    assert job.status == "done" and job.stage == "imported 3 questions, 0 executable here"
    dataset = Dataset.objects.get(name="orphans")
    assert policies.visible_datasets(people["opal"]).filter(pk=dataset.pk).exists()  # its uploader
    client.force_login(people["out"])
    assert client.get("/datasets/orphans/").status_code == 404
    assert "orphans" not in client.get("/datasets/").content.decode()
