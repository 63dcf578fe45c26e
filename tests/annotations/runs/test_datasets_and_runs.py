"""Dataset import, prediction import, evaluation, results pages and run comparison on real Spider dev data."""

import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from agent.models import Database
from agent.roles import OPERATOR
from annotations.runs import selectors, services
from annotations.runs.models import Dataset, Run
from tests.conftest import SPIDER_DIR, give_roles

pytestmark = pytest.mark.django_db

GOLD_LINES = (SPIDER_DIR / "dev_gold.sql").read_text().splitlines() if SPIDER_DIR.exists() else []


def predictions(transform=lambda i, sql: sql) -> str:
    return "\n".join(transform(i, line.rsplit("\t", 1)[0]) for i, line in enumerate(GOLD_LINES)) + "\n"


@pytest.mark.shared_data
def test_spider_import_registers_databases_by_db_id_and_is_idempotent(spider_dev):
    assert spider_dev.question_count == 1034 and spider_dev.executable_count == 972
    assert Database.objects.filter(name="concert_singer").exists()
    assert not Database.objects.filter(name="wta_1").exists()
    first = spider_dev.questions.get(index=0)
    assert first.db_id == "concert_singer" and first.question.startswith("How many singers")
    assert first.difficulty == "easy" and first.table_count == 1
    again = services.dataset_import(kind="spider", path=SPIDER_DIR, name="spider-dev", build_indexes=False)
    assert again.pk == spider_dev.pk and again.questions.count() == 1034


@pytest.mark.shared_data
def test_gold_as_predictions_scores_100_percent_over_the_972_executable(spider_dev):
    run = services.run_import_predictions(dataset=spider_dev, text=predictions(), fmt="spider", name="gold")
    run = services.run_evaluate(run=run)
    assert run.totals["ex"] == 100.0 and run.totals["scored"] == 972 and run.totals["questions"] == 1034
    assert run.totals["status_counts"]["not_executable"] == 62
    # HDSP's f_nc is shown for every strategy's predictions: identical queries are 1.0
    assert run.items.filter(f_nc=1.0).count() == 1034 and not run.items.filter(f_sc__isnull=False).exists()


@pytest.mark.shared_data
def test_malformed_lines_are_reported_with_their_line_number_and_the_rest_imported(spider_dev):
    text = predictions(lambda i, sql: f"{sql}\tdb\textra" if i == 3 else sql)
    run = services.run_import_predictions(dataset=spider_dev, text=text, fmt="spider", name="broken line")
    assert run.import_issues and run.import_issues[0]["line"] == 4
    run = services.run_evaluate(run=run)
    assert run.totals["correct"] == 971
    bird = '{"0": "SELECT 1\\t----- bird -----\\tconcert_singer", "x": 5}'
    bird_run = services.run_import_predictions(dataset=spider_dev, text=bird, fmt="bird", name="bird format")
    assert bird_run.import_issues


@pytest.mark.shared_data
def test_evaluate_command_prints_breakdowns_and_json(spider_dev, tmp_path, capsys):
    path = tmp_path / "pred.txt"
    path.write_text(predictions(lambda i, sql: "SELECT 1" if i % 2 else sql))
    call_command("evaluate", "--dataset", "spider-dev", "--predictions", str(path))
    out = capsys.readouterr().out
    assert "EX " in out and "by difficulty:" in out and "by tables in the gold query:" in out
    # Table 1 of Spider dev as the paper defines it (its published figures), then our broader reading
    assert "Table 1 of the dataset, paper definition: CVR 10.25% (106/1034)   CVCR 87.14% (122/140)" in out
    assert "Table 1, broader reading (any string comparison): CVR 32.50%   CVCR 97.32%" in out
    assert not Run.objects.exists()  # figures only, unless --save
    call_command("evaluate", "--dataset", "spider-dev", "--predictions", str(path), "--json", "--save", "half")
    data = json.loads(capsys.readouterr().out)
    assert data["totals"]["scored"] == 972 and 40 < data["totals"]["ex"] < 60
    assert Run.objects.get().name == "half"
    with pytest.raises(CommandError, match="No dataset named"):
        call_command("evaluate", "--dataset", "nope", "--predictions", str(path))


@pytest.mark.shared_data
def test_results_item_and_compare_pages(user_client, spider_dev):
    good = services.run_evaluate(run=services.run_import_predictions(
        dataset=spider_dev, text=predictions(), fmt="spider", name="gold"))
    worse = services.run_evaluate(run=services.run_import_predictions(
        dataset=spider_dev, text=predictions(lambda i, sql: "SELECT 1" if i == 0 else sql), fmt="spider",
        name="worse"))
    page = user_client.get(worse.get_absolute_url()).content.decode()
    assert "99.90%" in page and "Tables joined" in page and "concert_singer" in page
    wrong = user_client.get(worse.get_absolute_url(), {"outcome": "wrong"}).content.decode()
    assert "How many singers do we have?" in wrong
    item = worse.items.get(question__index=0)
    detail = user_client.get(reverse("runs:run_item", args=[worse.pk, item.pk])).content.decode()
    assert "SELECT count(*) FROM singer" in detail and "diff-row" in detail  # the differing rows are marked
    comparison = selectors.run_compare(a=good, b=worse)
    assert comparison["counts"]["broken"] == 1 and comparison["delta_ex"] == pytest.approx(-0.1, abs=0.01)
    compare_page = user_client.get(reverse("runs:run_compare"), {"a": good.pk, "b": worse.pk}).content.decode()
    assert "1 right → wrong" in compare_page


@pytest.mark.shared_data
def test_upload_predictions_in_the_browser_form(user_client, user, spider_dev, django_capture_on_commit_callbacks):
    give_roles(user, OPERATOR)
    from django.core.files.uploadedfile import SimpleUploadedFile

    from t2s_site.celery import app

    upload = SimpleUploadedFile("pred.txt", predictions().encode())
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = user_client.post(spider_dev.get_absolute_url(),
                                        {"name": "uploaded", "format": "spider", "file": upload})
    finally:
        app.conf.task_always_eager = False
    run = Run.objects.get(name="uploaded")
    assert response.status_code == 302 and run.status == Run.Status.DONE and run.totals["ex"] == 100.0


def test_jsonl_dataset_with_its_own_databases(tmp_path, make_sqlite):
    folder = tmp_path / "mine"
    (folder / "database" / "shop").mkdir(parents=True)
    db_path = make_sqlite("CREATE TABLE item (name TEXT, price REAL); INSERT INTO item VALUES ('pen', 2), ('ink', 5);")
    db_path.rename(folder / "database" / "shop" / "shop.sqlite")
    (folder / "questions.jsonl").write_text(
        json.dumps({"question": "How many items?", "sql": "SELECT count(*) FROM item", "database": "shop"}) + "\n"
        + json.dumps({"question": "Cheapest?", "query": "SELECT name FROM item ORDER BY price LIMIT 1",
                      "db_id": "shop", "evidence": "cheapest = lowest price"}) + "\n")
    dataset = services.dataset_import(kind="jsonl", path=folder / "questions.jsonl", name="mine")
    assert dataset.executable_count == 2 and dataset.questions.get(index=1).evidence == "cheapest = lowest price"
    assert Database.objects.get(name="shop").index_status == Database.IndexStatus.READY
    with pytest.raises(Exception, match="needs question"):
        (folder / "bad.jsonl").write_text(json.dumps({"question": "q"}) + "\n")
        services.dataset_import(kind="jsonl", path=folder / "bad.jsonl", name="bad")
    assert not Dataset.objects.filter(name="bad").exists()


@pytest.mark.shared_data
def test_run_page_shows_the_papers_cell_value_figures(user_client, spider_dev):
    run = services.run_evaluate(run=services.run_import_predictions(
        dataset=spider_dev, text=predictions(), fmt="spider", name="gold"))
    figures = selectors.cell_value_figures(run=run)
    # The paper's definition reproduces its Table 1 for Spider dev exactly.
    paper = figures["paper"]
    assert (paper["with_values"], paper["queries"], paper["found"], paper["values"]) == (106, 1034, 122, 140)
    assert paper["cvr"] == pytest.approx(10.25, abs=0.005) and paper["cvcr"] == pytest.approx(87.14, abs=0.005)
    # Our broader reading, under its own name.
    assert figures["cvr"] == pytest.approx(32.50, abs=0.01) and figures["cvcr"] == pytest.approx(97.32, abs=0.01)
    by_key = {r["key"]: r for r in figures["rows"]}
    assert by_key["with values"]["ex"] == 100.0
    assert by_key["with values"]["scored"] + by_key["without values"]["scored"] == 972
    page = user_client.get(run.get_absolute_url()).content.decode()
    assert "Table 1), paper definition: CVR 10.25% · CVCR 87.14%" in page
    assert "broader reading: CVR 32.50% · CVCR 97.32%" in page
