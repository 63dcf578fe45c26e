"""Fuzzing the prediction parsers and dataset readers: any text is predictions plus issues (never an
exception), and any dataset file is questions or a ValidationError naming what is wrong."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from annotations.evaluation.formats import parse_bird_predictions, parse_spider_predictions
from annotations.runs import services
from annotations.runs.services.datasets import iter_generic

FUZZ = settings(max_examples=120, deadline=1000, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)
fragments = st.sampled_from(['{', '}', '"', ':', ',', '\n', '"0"', '"SELECT 1\\t----- bird -----\\tdb"', "[", "]",
                             "\\", "\x00", "\ud800", "SELECT", "\t", "1", " "])


@FUZZ
@given(st.one_of(st.text(max_size=500), st.lists(fragments, max_size=80).map("".join)))
def test_prediction_parsers_never_raise(text):
    for parse in (parse_spider_predictions, parse_bird_predictions):
        parsed = parse(text)
        assert all(issue.message for issue in parsed.issues)


@FUZZ
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6))
@example({"0\x1f": None})  # str.strip() takes control characters int() keeps
def test_bird_predictions_of_any_json_object_never_raise(obj):
    parsed = parse_bird_predictions(json.dumps(obj))
    assert len(parsed.predictions) <= len(obj)



def test_bird_prediction_key_that_is_a_digit_but_not_a_number_is_an_issue():
    # '²'.isdigit() is True, int('²') raises: Hypothesis found it
    parsed = parse_bird_predictions(json.dumps({"²": "SELECT 1\t----- bird -----\tdb", "0": "SELECT 2"}))
    assert [p.index for p in parsed.predictions] == [0]
    assert any("not a question index" in issue.message for issue in parsed.issues)


def _records():
    good = st.fixed_dictionaries({"question": st.text(min_size=1, max_size=20),
                                  "sql": st.just("SELECT 1"), "db_id": st.sampled_from(["a", "b"])})
    return st.lists(st.one_of(good, json_values), max_size=6)


@FUZZ
@given(_records(), st.sampled_from(["jsonl", "csv"]))
def test_generic_dataset_files_are_questions_or_a_validation_error(tmp_path_factory, records, fmt):
    folder = tmp_path_factory.mktemp("ds")
    if fmt == "jsonl":
        path = folder / "data.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in records))
    else:
        import csv

        path = folder / "data.csv"
        with path.open("w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["question", "sql", "db_id"])
            for r in records:
                writer.writerow([r.get(k) if isinstance(r, dict) else r for k in ("question", "sql", "db_id")])
    try:
        items = list(iter_generic(path))
    except ValidationError as exc:
        assert exc.messages and path.name in exc.messages[0]
        return
    assert all(i.question and i.sql and i.db_id for i in items)


@FUZZ
@given(st.one_of(json_values, st.lists(st.dictionaries(st.sampled_from(["db_id", "query", "SQL", "question"]),
                                                       json_values, max_size=4), max_size=4)),
       st.sampled_from(["spider", "bird"]))
@pytest.mark.django_db
def test_spider_and_bird_files_of_any_shape_are_a_validation_error_not_a_crash(tmp_path_factory, data, kind):
    folder = tmp_path_factory.mktemp(kind)
    (folder / "dev.json").write_text(json.dumps(data))
    try:
        services.dataset_import(kind=kind, path=folder, name=f"fuzz-{kind}", register_databases=False)
    except ValidationError as exc:
        assert exc.messages
