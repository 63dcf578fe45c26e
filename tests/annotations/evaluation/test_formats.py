from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotations.evaluation.formats import (
    GoldItem,
    load_bird_dev,
    load_spider_dev,
    load_spider_gold_sql,
    pair_items,
    parse_bird_predictions,
    parse_spider_predictions,
)

# --- Spider text -----------------------------------------------------------------------


def test_spider_lines_with_and_without_db_id():
    got = parse_spider_predictions("SELECT 1\tconcert_singer\nSELECT 2\n")
    assert [(p.index, p.sql, p.db_id, p.line) for p in got.predictions] == [
        (0, "SELECT 1", "concert_singer", 1), (1, "SELECT 2", None, 2)]
    assert got.issues == ()


def test_spider_blank_lines_separate_interactions_by_default_or_are_empty_predictions():
    text = "SELECT 1\n\nSELECT 2\n"
    skipped = parse_spider_predictions(text)
    assert [p.sql for p in skipped.predictions] == ["SELECT 1", "SELECT 2"]
    kept = parse_spider_predictions(text, blank_lines="keep")
    assert [p.sql for p in kept.predictions] == ["SELECT 1", None, "SELECT 2"]
    assert [(i.line, i.message) for i in kept.issues] == [(2, "empty prediction")]


def test_spider_malformed_lines_are_reported_with_line_numbers_and_keep_their_place():
    text = "SELECT 1\tdb\nSELECT 2\tdb\textra\nSELECT 3\tnot a db\n\tdb\nSELECT 5\tdb\n"
    got = parse_spider_predictions(text)
    assert [p.sql for p in got.predictions] == ["SELECT 1", None, None, None, "SELECT 5"]
    assert [p.index for p in got.predictions] == [0, 1, 2, 3, 4]
    assert [i.line for i in got.issues] == [2, 3, 4]
    assert "3 tab-separated fields" in got.issues[0].message
    assert str(got.issues[0]).startswith("line 2:")


# --- BIRD JSON ----------------------------------------------------------------------------


def test_bird_predictions_with_separator():
    text = json.dumps({"0": "SELECT 1\t----- bird -----\tfinancial", "1": "SELECT 2\t----- bird -----\tcard"},
                      indent=4)
    got = parse_bird_predictions(text)
    assert [(p.index, p.sql, p.db_id, p.line) for p in got.predictions] == [
        (0, "SELECT 1", "financial", 2), (1, "SELECT 2", "card", 3)]
    assert got.issues == ()


def test_bird_malformed_entries_are_reported_with_line_numbers_and_the_rest_kept():
    text = "\n".join([
        "{",
        '    "0": "SELECT 1\\t----- bird -----\\tfinancial",',
        '    "1": 42,',
        '    "2": "SELECT 3",',
        '    "3": "SELECT \'unterminated,',
        '    "x": "SELECT 5\\t----- bird -----\\tfinancial",',
        '    "5": "SELECT 6\\t----- bird -----\\tfinancial",',
        '    "5": "SELECT 7\\t----- bird -----\\tfinancial"',
        "}",
    ])
    got = parse_bird_predictions(text)
    by_index = got.by_index()
    assert by_index[0].sql == "SELECT 1"
    assert by_index[1].sql is None
    assert (by_index[2].sql, by_index[2].db_id) == ("SELECT 3", None)
    assert 3 not in by_index
    assert by_index[5].sql == "SELECT 7"
    lines = {i.line: i.message for i in got.issues}
    assert set(lines) == {3, 4, 5, 6, 8}
    assert "not a string" in lines[3]
    assert "separator" in lines[4]
    assert "invalid JSON" in lines[5]
    assert "not a question index" in lines[6]
    assert "duplicate" in lines[8]


def test_bird_file_that_is_not_an_object_is_one_issue():
    got = parse_bird_predictions('["SELECT 1"]')
    assert got.predictions == ()
    assert got.issues[0].line == 1


# --- gold ---------------------------------------------------------------------------------


def test_spider_gold_sql_and_dev_json(tmp_path: Path):
    gold = tmp_path / "dev_gold.sql"
    gold.write_text("SELECT count(*) FROM singer\tconcert_singer\n\nSELECT name FROM pets\tpets_1\n")
    items = load_spider_gold_sql(gold)
    assert [(g.index, g.db_id, g.sql) for g in items] == [
        (0, "concert_singer", "SELECT count(*) FROM singer"), (1, "pets_1", "SELECT name FROM pets")]
    dev = tmp_path / "dev.json"
    dev.write_text(json.dumps([{"db_id": "pets_1", "query": "SELECT 1 ", "question": "Q?"}]))
    assert load_spider_dev(dev) == [GoldItem(0, "pets_1", "SELECT 1", "Q?")]


def test_spider_gold_line_without_db_id_is_an_error(tmp_path: Path):
    gold = tmp_path / "gold.sql"
    gold.write_text("SELECT 1\n")
    with pytest.raises(ValueError, match="line 1"):
        load_spider_gold_sql(gold)


@pytest.mark.parametrize("as_jsonl", [False, True])
def test_bird_dev_with_evidence_and_difficulty(tmp_path: Path, as_jsonl: bool):
    entries = [{"question_id": 0, "db_id": "card", "question": "How many?", "evidence": "x means y",
                "SQL": "SELECT 1", "difficulty": "simple"}]
    path = tmp_path / ("dev.jsonl" if as_jsonl else "dev.json")
    path.write_text("\n".join(json.dumps(e) for e in entries) if as_jsonl else json.dumps(entries))
    assert load_bird_dev(path) == [GoldItem(0, "card", "SELECT 1", "How many?", "x means y", "simple")]


def test_pairing_reports_missing_extra_and_wrong_db():
    gold = [GoldItem(0, "a", "SELECT 1"), GoldItem(1, "a", "SELECT 2"), GoldItem(2, "b", "SELECT 3")]
    preds = parse_spider_predictions("SELECT 1\ta\nSELECT 2\tb\n")
    items, issues = pair_items(gold, preds)
    assert [i.pred_sql for i in items] == ["SELECT 1", "SELECT 2", None]
    assert items[2].pred_note == "no prediction for this question"
    assert [(i.line, "names db 'b'" in i.message) for i in issues] == [(2, True)]
    _, issues = pair_items(gold[:1], preds)
    assert "1 predictions beyond" in issues[0].message
