"""The compare page: every question, paginated and filterable, with status words and counts that add up."""

import csv
import io

import pytest
from django.urls import reverse

from annotations.runs import selectors, services

pytestmark = pytest.mark.django_db


def scored_run(dataset, name: str, wrong: set[int], *, count: int | None = None, missing: str | None = None):
    lines = []
    for q in dataset.questions.order_by("index")[:count]:
        lines.append("SELECT -1" if q.index in wrong else q.gold_sql)
    text = "\n".join(lines) + "\n"
    run = services.run_import_predictions(dataset=dataset, text=text, fmt="spider", name=name, missing=missing)
    return services.run_evaluate(run=run)


@pytest.fixture
def two_runs(built_dataset):
    dataset = built_dataset(30)
    a = scored_run(dataset, "A", wrong={0, 1, 2})
    b = scored_run(dataset, "B", wrong={2, 3}, count=25, missing="subset")
    return a, b


def test_counts_add_up_and_name_the_questions_only_one_run_has(two_runs):
    a, b = two_runs
    comparison = selectors.run_compare(a=a, b=b)
    counts = comparison["counts"]
    assert (counts["fixed"], counts["broken"], counts["both_wrong"], counts["both_right"]) == (2, 1, 1, 21)
    assert comparison["common"] == sum(counts.values()) == 25
    assert (comparison["only_a"], comparison["only_b"], comparison["all_questions"]) == (5, 0, 30)


def test_filters_flips_bucket_and_database(two_runs):
    a, b = two_runs
    flips = selectors.run_compare(a=a, b=b, kind="flips")["pairs"]
    assert [p["question"].index for p in flips] == [0, 1, 3]
    assert [p["word_a"] for p in flips] == ["wrong result", "wrong result", "correct"]
    assert len(selectors.run_compare(a=a, b=b, bucket="tables:1")["pairs"]) == 25
    assert selectors.run_compare(a=a, b=b, bucket="tables:2")["pairs"] == []
    assert selectors.run_compare(a=a, b=b, db_id="nowhere")["pairs"] == []


def test_page_lists_every_question_with_status_words_and_both_sqls(user_client, two_runs):
    a, b = two_runs
    url = reverse("runs:run_compare")
    page = user_client.get(url, {"a": a.pk, "b": b.pk, "kind": "broken"}).content.decode()
    assert "wrong result" in page and "✘ ok" not in page
    assert "SELECT -1" in page and "SELECT count(*) FROM item WHERE price &gt; 3" in page  # both SQLs inline
    assert "30 questions in either run; 25 in both" in page and "Only in A: 5; only in B: 0" in page
    assert ">any</option>" in page and "---------" not in page


def test_csv_export_goes_through_the_formula_neutralising_writer(user_client, two_runs):
    a, b = two_runs
    response = user_client.get(reverse("runs:run_compare"), {"a": a.pk, "b": b.pk, "kind": "flips", "format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == selectors.COMPARE_CSV_HEADER and len(rows) == 4
    assert rows[1][5:7] == ["wrong → right", "wrong result"]


def test_run_page_counts_outcomes_in_words(user_client, two_runs):
    a, _ = two_runs
    assert selectors.outcome_counts(run=a) == [("correct", 27), ("wrong result", 3)]
    page = user_client.get(a.get_absolute_url()).content.decode()
    assert "correct: 27<br>wrong result: 3<br>" in page
