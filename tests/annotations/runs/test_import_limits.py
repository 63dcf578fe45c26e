"""Imports stream with bounded memory, refuse over-deep JSON with a clear error, are all-or-nothing
and report progress."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from annotations.evaluation.formats import parse_bird_predictions
from annotations.runs import services
from annotations.runs.models import Dataset, DatasetQuestion
from tests.support.memory import peak_growth, reset_peak

DEEP = "[" * 200_000 + "]" * 200_000


def write_jsonl(path, n, extra=""):
    with path.open("w") as out:
        for i in range(n):
            out.write(json.dumps({"question": f"How many singers are older than {i}?",
                                  "sql": f"SELECT count(*) FROM singer WHERE age > {i % 50}", "db_id": "concert"}))
            out.write("\n")
        out.write(extra)
    return path


@pytest.mark.django_db
def test_large_jsonl_import_streams_with_bounded_memory_and_reports_progress(tmp_path):
    path = write_jsonl(tmp_path / "big.jsonl", 30_000)
    seen = []
    before = reset_peak()
    dataset = services.dataset_import(kind="jsonl", path=path, name="big", register_databases=False,
                                      progress=lambda done, total: seen.append((done, total)))
    growth = peak_growth(before)
    assert dataset.question_count == 30_000 and DatasetQuestion.objects.filter(dataset=dataset).count() == 30_000
    assert seen[0] == (0, 30_000) and seen[-1] == (30_000, 30_000)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) == 1 + 30_000 // services.IMPORT_BATCH
    assert growth < 100 * 1024 * 1024, growth


@pytest.mark.django_db
def test_deep_json_line_is_a_clear_error_and_nothing_is_written(tmp_path):
    path = write_jsonl(tmp_path / "deep.jsonl", 10, extra=DEEP + "\n")
    with pytest.raises(ValidationError) as caught:
        services.dataset_import(kind="jsonl", path=path, name="deep", register_databases=False)
    assert "line 11" in str(caught.value) and "nested deeper than 100 levels" in str(caught.value)
    assert not Dataset.objects.filter(name="deep").exists() and not DatasetQuestion.objects.exists()


@pytest.mark.django_db
def test_malformed_last_line_leaves_an_existing_dataset_unchanged(tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", 30)
    services.dataset_import(kind="jsonl", path=good, name="ds", register_databases=False)
    bad = write_jsonl(tmp_path / "bad.jsonl", 50, extra='{"question": "no sql"}\n')
    with pytest.raises(ValidationError, match="record 51"):
        services.dataset_import(kind="jsonl", path=bad, name="ds", register_databases=False)
    assert Dataset.objects.get(name="ds").question_count == 30 and DatasetQuestion.objects.count() == 30


@pytest.mark.django_db
def test_deep_bird_dev_json_is_a_clear_error_from_the_cli(tmp_path):
    (tmp_path / "dev.json").write_text(DEEP)
    with pytest.raises(CommandError, match="nested deeper than 100 levels"):
        call_command("import_dataset", "bird", str(tmp_path), name="bird-deep")


def test_deep_bird_predictions_entry_is_an_issue_not_a_crash():
    text = '{"0": "SELECT 1\\t----- bird -----\\tdb",\n"1": ' + DEEP + ',\n"2": "SELECT 2\\t----- bird -----\\tdb"}'
    parsed = parse_bird_predictions(text)
    assert [p.index for p in parsed.predictions] == [0, 2]
    assert any("nested deeper than 100 levels" in i.message and i.line == 2 for i in parsed.issues)


def test_bird_predictions_parse_in_linear_time():
    import time

    entries = ",\n".join(f'"{i}": "SELECT {i}\\t----- bird -----\\tdb"' for i in range(50_000))
    started = time.perf_counter()
    parsed = parse_bird_predictions("{" + entries + "}")
    assert len(parsed.predictions) == 50_000 and parsed.predictions[-1].line == 50_000
    assert time.perf_counter() - started < 10


EMBEDDED_SCRIPT = r"""
import sys, threading, time
import django
from django.conf import settings
django.setup()
settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # many logins, not slow hashing
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from annotations.runs import services
assert connection.vendor == "sqlite"
User.objects.create_user("ana", "ana@example.com", "pw-ana-123")
done, errors = [], []
def run():
    try:
        services.dataset_import(kind="jsonl", path=sys.argv[1], name="big", register_databases=False,
                                progress=lambda d, t: done.append(d))
    except Exception as exc:
        errors.append(repr(exc))
    finally:
        connection.close()
warm = Client(HTTP_HOST="127.0.0.1")  # first request's start-up cost outside the measured window
assert warm.login(username="ana", password="pw-ana-123") and warm.get("/sessions/").status_code == 200
worker = threading.Thread(target=run)
worker.start()
logins = ok = during = 0
while worker.is_alive() or logins < 5:
    client = Client(HTTP_HOST="127.0.0.1")
    during += worker.is_alive()
    try:
        ok += bool(client.login(username="ana", password="pw-ana-123"))
        ok += client.get("/sessions/").status_code == 200
    except Exception as exc:
        print("login failed:", repr(exc))
    logins += 1
    time.sleep(0 if worker.is_alive() else 0.05)
worker.join()
print(f"logins={logins} during={during} ok={ok} batches={len(done)} errors={errors}")
assert not errors and done and done[-1] == int(sys.argv[2]), (errors, done[-3:])
assert ok == 2 * logins, (ok, logins)
print("ok")
"""


def test_logins_keep_working_during_a_large_import_in_embedded_mode(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    n = 200_000  # long enough on an idle machine for several logins while the import writes
    path = write_jsonl(tmp_path / "big.jsonl", n)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DJANGO_SETTINGS_MODULE="t2s_site.settings", T2S_VAR_DIR=str(tmp_path),
               DATABASE_URL=f"sqlite:///{tmp_path / 'app.sqlite3'}", T2S_REQUIRE_SERVICES="0")
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", EMBEDDED_SCRIPT, str(path), str(n)], cwd=root, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-3000:])
    summary = out.stdout.strip().splitlines()
    assert summary[-1] == "ok" and "login failed" not in out.stdout
    counts = dict(part.split("=", 1) for part in summary[-2].split()[:3])
    assert int(counts["during"]) >= 3, summary[-2]
    print(summary[-2])  # logins really happened while the import was writing
