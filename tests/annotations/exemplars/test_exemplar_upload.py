"""Uploading an exemplar set through the browser: a zip of the authors' prompt folder or a JSON export."""

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from agent.roles import ANNOTATOR, CURATOR, VIEWER
from annotations.models import ExemplarSet
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db
PAPER_SPIDER = Path(__file__).resolve().parents[3] / "annotations" / "exemplars" / "paper_prompts" / "spider"


@pytest.fixture
def curator(client, django_user_model):
    account = give_roles(django_user_model.objects.create_user("cleo", password="pw-cleo-123"), CURATOR, VIEWER)
    client.force_login(account)
    return account


def folder_zip(folder: Path, *, top: str = "spider", drop: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.name != drop:
                zf.write(path, f"{top}/{path.relative_to(folder)}")
    return buffer.getvalue()


def test_a_zipped_prompt_folder_becomes_a_published_set(client, curator):
    response = client.post("/exemplars/sets/upload/", {
        "file": SimpleUploadedFile("spider.zip", folder_zip(PAPER_SPIDER)), "name": "uploaded-spider"})
    assert response.status_code == 302
    exemplar_set = ExemplarSet.objects.get(name="uploaded-spider")
    version = exemplar_set.versions.get()
    assert version.exemplar_count == ExemplarSet.objects.get(name="paper-spider").versions.first().exemplar_count
    assert version.tool_description


def test_a_json_export_round_trips_through_the_upload(client, curator):
    source = ExemplarSet.objects.get(name="paper-spider").versions.first()
    exported = client.get(f"/exemplars/sets/{source.exemplar_set_id}/v{source.number}/export/").content
    response = client.post("/exemplars/sets/upload/", {
        "file": SimpleUploadedFile("copy.json", exported), "name": "copy"})
    assert response.status_code == 302
    assert ExemplarSet.objects.get(name="copy").versions.get().content_hash == source.content_hash


@pytest.mark.parametrize(("filename", "content", "message"), [
    ("bad.json", b'{"format": "something else"}', "not a t2s-studio exemplar set export"),
    ("deep.json", b"[" * 200 + b"]" * 200, "nested deeper"),
    ("notes.txt", b"hello", "upload a .zip of a prompt folder or a .json set export"),
    ("broken.zip", b"PK\x03\x04 nope", "not a zip file"),
])
def test_a_malformed_upload_is_refused_and_imports_nothing(client, curator, filename, content, message):
    before = ExemplarSet.objects.count()
    response = client.post("/exemplars/sets/upload/", {"file": SimpleUploadedFile(filename, content)})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert ExemplarSet.objects.count() == before


def test_a_folder_without_its_tool_description_names_the_problem_not_a_server_path(client, curator):
    response = client.post("/exemplars/sets/upload/", {
        "file": SimpleUploadedFile("spider.zip", folder_zip(PAPER_SPIDER, drop="tool_desc.txt"))})
    page = response.content.decode()
    assert response.status_code == 400 and "tool_desc.txt" in page
    assert "/tmp" not in page and "scratch" not in page and "exemplars-" not in page


def test_annotators_cannot_upload_sets(client, django_user_model):
    client.force_login(give_roles(django_user_model.objects.create_user("ann", password="pw-ann-1234"), ANNOTATOR))
    response = client.post("/exemplars/sets/upload/", {"file": SimpleUploadedFile("x.json", json.dumps({}).encode())})
    assert response.status_code == 403
