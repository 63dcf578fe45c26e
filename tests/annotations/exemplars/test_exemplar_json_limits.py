"""An exemplar set JSON file is read as a stream, twice (check, then write): one exemplar in memory at a
time, the JSON depth limit, at most 5,000 exemplars and the upload's size limit from the command too (each
stated in the refusal), and all or nothing, on the web and from ``import_exemplars``."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import override_settings

from agent.roles import CURATOR, VIEWER
from annotations.exemplars.importer import JSON_FORMAT, JSON_FORMAT_VERSION
from annotations.models import Exemplar, ExemplarSet
from tests.conftest import give_roles
from tests.support.memory import peak_growth, reset_peak

pytestmark = pytest.mark.django_db
DEEP = "[" * 200_000 + "]" * 200_000




def exemplar(i: int, *, schema: str = "") -> str:
    return json.dumps({"question": f"How many singers are older than {i}?", "database": "concert",
                       "schema_text": schema, "evidence": "", "final_sql": f"SELECT count(*) FROM singer WHERE age > {i}",
                       "notes": "", "tags": ["bulk"],
                       "steps": [{"thought": "Count them.", "action": f'ExecuteSQL("SELECT count(*) FROM singer '
                                                                      f'WHERE age > {i}")', "observation": "[(3,)]"}]})


def write_export(path, items, *, name: str = "bulk"):
    """An export written as the exporter lays it out, exemplars last; ``items``: their JSON texts."""
    head = json.dumps({"format": JSON_FORMAT, "format_version": JSON_FORMAT_VERSION,
                       "set": {"name": name, "description": ""}, "version": {"number": 1, "note": ""}})
    with path.open("w") as out:
        out.write(head[:-1] + ', "exemplars": [\n')
        for n, item in enumerate(items):
            out.write(("" if n == 0 else ",\n") + item)
        out.write("\n]}\n")
    return path


def test_a_small_export_imports_from_the_stream(tmp_path):
    path = write_export(tmp_path / "ok.json", (exemplar(i) for i in range(3)))
    call_command("import_exemplars", str(path), "--format", "json", stdout=StringIO())
    version = ExemplarSet.objects.get(name="bulk").versions.get()
    assert version.exemplar_count == 3 and version.exemplars[2]["question"] == "How many singers are older than 2?"


def test_200k_exemplars_are_refused_at_the_stated_limit_with_bounded_memory(tmp_path):
    path = write_export(tmp_path / "many.json", (exemplar(i) for i in range(200_000)))  # 76 MB
    count = Exemplar.objects.count()
    before = reset_peak()
    with override_settings(T2S={**settings.T2S, "UPLOAD_MAX_EXEMPLAR_BYTES": 200 * 1024 * 1024}), \
            pytest.raises(CommandError, match="more than 5,000 exemplars in one import \\(the limit\\)"):
        call_command("import_exemplars", str(path), "--format", "json", stdout=StringIO())
    assert peak_growth(before) < 30 * 1024 * 1024
    assert not ExemplarSet.objects.filter(name="bulk").exists() and Exemplar.objects.count() == count


def test_a_bad_exemplar_in_the_middle_of_a_large_file_imports_nothing(tmp_path):
    schema = "CREATE TABLE singer (singer_id int, name text, age int);\n" * 50  # 2.9 KB a shot
    path = write_export(tmp_path / "bad.json", (exemplar(i, schema=schema) if i != 2_000
                                                else json.dumps({"question": "", "steps": "none"})
                                                for i in range(4_000)))  # 12 MB
    count = Exemplar.objects.count()
    before = reset_peak()
    with pytest.raises(CommandError) as caught:
        call_command("import_exemplars", str(path), "--format", "json", stdout=StringIO())
    growth = peak_growth(before)
    assert "Nothing was imported" in str(caught.value) and "exemplars[2000]: no question." in str(caught.value)
    assert growth < 16 * 1024 * 1024, growth  # 6 MB measured; the whole file decoded at once took 27 MB
    assert not ExemplarSet.objects.filter(name="bulk").exists() and Exemplar.objects.count() == count


def test_a_file_past_the_upload_limit_is_refused_by_the_command_too(tmp_path):
    path = write_export(tmp_path / "ok.json", (exemplar(i) for i in range(20)))
    count = Exemplar.objects.count()
    with override_settings(T2S={**settings.T2S, "UPLOAD_MAX_EXEMPLAR_BYTES": 2_048}), \
            pytest.raises(CommandError, match="at most 2 KB is accepted"):
        call_command("import_exemplars", str(path), "--format", "json", stdout=StringIO())
    assert Exemplar.objects.count() == count


def test_a_200k_deep_exemplar_is_a_clear_error_from_the_command(tmp_path):
    path = write_export(tmp_path / "deep.json", [exemplar(0), DEEP, exemplar(2)])
    count = Exemplar.objects.count()
    with pytest.raises(CommandError) as caught:
        call_command("import_exemplars", str(path), "--format", "json", stdout=StringIO())
    assert "nested deeper than 100 levels (the limit)" in str(caught.value) and "Traceback" not in str(caught.value)
    assert Exemplar.objects.count() == count


def test_a_200k_deep_exemplar_is_a_clear_error_on_the_web(client, django_user_model, tmp_path):
    client.force_login(give_roles(django_user_model.objects.create_user("cleo", password="pw-cleo-123"),
                                  CURATOR, VIEWER))
    path = write_export(tmp_path / "deep.json", [exemplar(0), DEEP, exemplar(2)])
    before = ExemplarSet.objects.count()
    response = client.post("/exemplars/sets/upload/",
                           {"file": SimpleUploadedFile("deep.json", path.read_bytes()), "name": "deep"})
    assert response.status_code == 400 and "nested deeper than 100 levels" in response.content.decode()
    assert ExemplarSet.objects.count() == before and not ExemplarSet.objects.filter(name="deep").exists()
