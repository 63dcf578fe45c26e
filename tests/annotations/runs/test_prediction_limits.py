"""BIRD and Spider prediction files are read as a stream (one chunk and one entry at a time), with the JSON
depth limit, bounded entries stated in the refusal, and all or nothing on the web, the evaluate command and
``python -m annotations.evaluation``."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from agent.roles import OPERATOR
from annotations.evaluation import __main__ as evaluation_cli
from annotations.evaluation import formats
from annotations.runs import services
from annotations.runs.models import Run
from tests.conftest import give_roles
from tests.support.memory import peak_growth, reset_peak

DEEP = "[" * 200_000 + "]" * 200_000
SEP = "\t----- bird -----\t"




def write_bird(path, n: int, *, middle: str | None = None):
    with path.open("w") as out:
        out.write("{\n")
        for i in range(n):
            if middle is not None and i == n // 2:
                out.write(middle + ",\n")
            out.write(f'{json.dumps(str(i))}: {json.dumps(f"SELECT count(*) FROM item WHERE price > {i}{SEP}shop")}'
                      + (",\n" if i < n - 1 else "\n"))
        out.write("}\n")
    return path


def test_a_200k_entry_bird_file_is_read_as_a_stream_with_bounded_memory(tmp_path):
    path = write_bird(tmp_path / "big.json", 200_000)  # 14 MB
    before = reset_peak()
    parsed = formats.load_bird_predictions(path, keep=lambda i: i < 1_000)
    growth = peak_growth(before)
    assert len(parsed.predictions) == 1_000 and parsed.ignored == 199_000 and not parsed.issues
    assert parsed.predictions[-1].line == 1_001 and parsed.predictions[0].db_id == "shop"
    assert growth < 30 * 1024 * 1024, growth  # the file is 14 MB; one chunk (1 M characters) is held
    before = reset_peak()
    parsed = formats.load_bird_predictions(path)  # every entry kept: the predictions themselves, not the text
    growth = peak_growth(before)
    assert len(parsed.predictions) == 200_000 and parsed.predictions[-1].line == 200_001
    assert growth < 120 * 1024 * 1024, growth


def test_entries_past_the_limit_refuse_the_file_and_say_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(formats, "MAX_PREDICTION_ENTRIES", 1_000)
    with pytest.raises(formats.PredictionFileTooLarge, match="more than 1,000 entries"):
        formats.load_bird_predictions(write_bird(tmp_path / "many.json", 1_001))
    (tmp_path / "many.txt").write_text("SELECT 1\n" * 1_001)
    with pytest.raises(formats.PredictionFileTooLarge, match="more than 1,000 lines"):
        formats.load_spider_predictions(tmp_path / "many.txt")


def test_an_overlong_spider_line_is_an_issue_and_is_not_held(tmp_path):
    (tmp_path / "pred.txt").write_text("SELECT 1\n" + "SELECT '" + "x" * 3_000_000 + "'\nSELECT 3\n")
    parsed = formats.load_spider_predictions(tmp_path / "pred.txt")
    assert [p.sql for p in parsed.predictions] == ["SELECT 1", None, "SELECT 3"]
    assert parsed.issues[0].line == 2 and "longer than 1,000,000 characters" in parsed.issues[0].message


pytestmark_db = pytest.mark.django_db


@pytestmark_db
def test_a_bad_entry_in_the_middle_stores_nothing(built_dataset, tmp_path):
    dataset = built_dataset(6)
    huge = '"3": "SELECT \'' + "x" * 1_100_000 + '\'"'  # one entry past the 1,000,000-character limit
    path = write_bird(tmp_path / "pred.json", 6, middle=huge)
    with pytest.raises(ValidationError) as caught, path.open() as handle:
        services.run_import_predictions(dataset=dataset, text=handle, fmt="bird", name="bad")
    assert "nothing was imported" in str(caught.value) and "longer than 1,000,000 characters" in str(caught.value)
    assert not Run.objects.exists()
    with pytest.raises(CommandError, match="longer than 1,000,000 characters"):
        call_command("evaluate", "--dataset", dataset.name, "--predictions", str(path), "--format", "bird")
    assert not Run.objects.exists()


@pytestmark_db
def test_a_200k_deep_bird_file_is_a_clear_error_on_the_web(client, user, built_dataset):
    from django.core.files.uploadedfile import SimpleUploadedFile

    dataset = built_dataset(4)
    give_roles(user, OPERATOR)
    client.force_login(user)
    upload = SimpleUploadedFile("pred.json", ('{"0": ' + DEEP + "}").encode())
    response = client.post(dataset.get_absolute_url(), {"name": "deep", "format": "bird", "file": upload})
    page = response.content.decode()
    assert response.status_code == 200 and "nested deeper than 100 levels" in page
    assert not Run.objects.exists()
    top = SimpleUploadedFile("pred.json", DEEP.encode())  # the whole file one nested array
    response = client.post(dataset.get_absolute_url(), {"name": "deep", "format": "bird", "file": top})
    assert response.status_code == 200 and "expected a JSON object" in response.content.decode()


@pytestmark_db
def test_a_200k_deep_bird_file_is_a_clear_error_from_the_evaluate_command(built_dataset, tmp_path):
    dataset = built_dataset(4)
    path = tmp_path / "pred.json"
    path.write_text('{"0": ' + DEEP + "}")
    with pytest.raises(CommandError, match="nested deeper than 100 levels"):
        call_command("evaluate", "--dataset", dataset.name, "--predictions", str(path), "--format", "bird")
    assert not Run.objects.exists()


def test_the_evaluation_cli_says_what_is_wrong_without_a_traceback(tmp_path, capsys, monkeypatch):
    gold = tmp_path / "dev.json"
    gold.write_text(json.dumps([{"question": "q", "SQL": "SELECT 1", "db_id": "shop"}]))
    (tmp_path / "db").mkdir()
    deep_gold = tmp_path / "deep.json"
    deep_gold.write_text(DEEP)
    assert evaluation_cli.main(["bird", "--gold", str(deep_gold), "--pred", str(gold), "--db", str(tmp_path)]) == 2
    assert "deep.json" in (err := capsys.readouterr().err) and "nested deeper than 100 levels" in err
    assert "Traceback" not in err
    monkeypatch.setattr(formats, "MAX_PREDICTION_ENTRIES", 10)
    pred = write_bird(tmp_path / "pred.json", 11)
    assert evaluation_cli.main(["bird", "--gold", str(gold), "--pred", str(pred), "--db", str(tmp_path / "db")]) == 2
    err = capsys.readouterr().err
    assert "pred.json" in err and "more than 10 entries (the limit for one prediction file)" in err
