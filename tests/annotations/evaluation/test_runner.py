from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from annotations.evaluation import (
    EvalItem,
    GoldCache,
    Status,
    bird_db_resolver,
    evaluate,
    spider_db_resolver,
)

SINGERS = """
CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER, net REAL);
INSERT INTO singer VALUES (1, 'Joe', 'France', 52, 1.5), (2, 'Ann', 'France', 32, NULL),
    (3, 'Tim', 'Netherlands', 41, 2.0), (4, 'Eve', 'US', 32, 2.0);
"""

HANG = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def item(index: int, gold: str, pred: str | None, db_id: str = "music", difficulty: str | None = None) -> EvalItem:
    return EvalItem(index=index, db_id=db_id, gold_sql=gold, pred_sql=pred, difficulty=difficulty)


def spider(items, root: Path, **kw):
    return evaluate(items, mode="spider", db_resolver=spider_db_resolver(root), **kw)


@pytest.fixture
def music(make_db, tmp_path: Path) -> Path:
    make_db("music", SINGERS)
    return tmp_path / "database"


def test_spider_rules_forgive_column_order_distinct_and_row_order_without_order_by(music):
    report = spider([
        item(0, "SELECT name, age FROM singer", "SELECT age, name FROM singer ORDER BY name"),
        item(1, "SELECT DISTINCT country FROM singer", "SELECT country FROM singer"),
        item(2, "SELECT count(DISTINCT country) FROM singer", "SELECT count(*) FROM singer"),
        item(3, "SELECT name FROM singer ORDER BY age, id", "SELECT name FROM singer ORDER BY age DESC"),
        item(4, "SELECT name FROM singer WHERE age > 40", "SELECT name FROM singer WHERE age > 41"),
        item(5, "SELECT name FROM singer WHERE id = 1", "SELECT name FROM singer WHERE id = value"),
        item(6, "SELECT count(*) FROM singer", "SELECT CAST(count(*) AS REAL) FROM singer"),
        item(7, "SELECT count(*) FROM singer", "SELECT CAST(count(*) AS TEXT) FROM singer"),
        item(8, "SELECT name FROM singer WHERE age >= 40", "SELECT name FROM singer WHERE age > = 40"),
    ], music, workers=1)
    assert [q.ex for q in report.per_question] == [True, True, True, False, False, True, True, False, True]
    assert report.totals.correct == 6 and report.totals.scored == 9


def test_keep_distinct_and_value_placeholder_can_be_turned_off(music):
    items = [item(0, "SELECT count(DISTINCT country) FROM singer", "SELECT count(*) FROM singer"),
             item(1, "SELECT name FROM singer WHERE id = 1", "SELECT name FROM singer WHERE id = value")]
    report = spider(items, music, keep_distinct=True, value_placeholder=False)
    assert [q.ex for q in report.per_question] == [False, False]
    assert report.per_question[1].status == Status.PRED_ERROR


def test_every_database_file_of_the_db_must_agree(make_db, tmp_path: Path):
    make_db("suite", "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1), (2), (3);", filename="one.sqlite")
    make_db("suite", "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (5), (6);", filename="two.sqlite")
    root = tmp_path / "database"
    assert len(spider_db_resolver(root)("suite")) == 2
    report = spider([
        item(0, "SELECT a FROM t WHERE a > 1", "SELECT a FROM t WHERE a >= 2", db_id="suite"),
        item(1, "SELECT a FROM t WHERE a > 1", "SELECT a FROM t WHERE a IN (2, 3)", db_id="suite"),
    ], root)
    assert [q.ex for q in report.per_question] == [True, False]


def test_missing_database_is_not_executable_and_left_out_of_the_denominator(music):
    report = spider([item(0, "SELECT 1", "SELECT 1"), item(1, "SELECT 1", "SELECT 1", db_id="wta_1")], music)
    missing = report.per_question[1]
    assert (missing.status, missing.ex) == (Status.NOT_EXECUTABLE, None)
    assert (report.totals.questions, report.totals.scored, report.totals.ex) == (2, 1, 100.0)
    assert report.totals.status_counts == {"ok": 1, "not_executable": 1}
    assert "1 of 2 not scored" in report.summary()


def test_failing_gold_is_a_gold_error_and_left_out(music):
    report = spider([item(0, "SELECT nope FROM singer", "SELECT 1"), item(1, "SELECT 1", "SELECT 2")], music)
    assert report.per_question[0].status == Status.GOLD_ERROR
    assert "gold query failed" in report.per_question[0].error
    assert (report.totals.scored, report.totals.correct) == (1, 0)


def test_hanging_prediction_times_out_alone(music):
    started = time.monotonic()
    report = spider([item(0, "SELECT count(*) FROM singer", HANG),
                     item(1, "SELECT count(*) FROM singer", "SELECT count(*) FROM singer"),
                     item(2, "SELECT name FROM singer", "SELECT name FROM singer")], music,
                    workers=2, timeout_s=0.5)
    assert time.monotonic() - started < 10
    statuses = [q.status for q in report.per_question]
    assert statuses == [Status.PRED_TIMEOUT, Status.OK, Status.OK]
    assert report.per_question[0].ex is False and "time limit" in report.per_question[0].error
    assert report.totals.scored == 3 and report.totals.correct == 2


def test_exploding_prediction_is_an_error_not_a_prefix(music):
    huge = "SELECT a.id FROM singer a, singer b, singer c, singer d"
    report = spider([item(0, "SELECT id FROM singer", huge),
                     item(1, "SELECT id FROM singer", "SELECT id FROM singer")], music, max_rows=100)
    assert report.per_question[0].status == Status.PRED_ERROR
    assert "result too large (limit 100 rows" in report.per_question[0].error
    assert report.per_question[1].ex is True


def test_predictions_run_read_only(music):
    db = music / "music" / "music.sqlite"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    report = spider([item(0, "SELECT 1", "DELETE FROM singer"),
                     item(1, "SELECT 1", "SELECT 1; DROP TABLE singer"),
                     item(2, "SELECT 1", None)], music)
    assert all(q.status == Status.PRED_ERROR and q.ex is False for q in report.per_question)
    assert report.per_question[2].error == "no prediction"
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_bird_mode_is_set_equality_with_soft_f1_and_difficulty(make_db, tmp_path: Path):
    make_db("card", SINGERS.replace("singer", "client"))
    root = tmp_path / "database"
    report = evaluate([
        item(0, "SELECT DISTINCT country FROM client", "SELECT country FROM client", "card", "simple"),
        item(1, "SELECT name, age FROM client", "SELECT age, name FROM client", "card", "moderate"),
        item(2, "SELECT name FROM client WHERE age = 32", "SELECT name FROM client WHERE id IN (2, 3)", "card",
             "moderate"),
        item(3, "SELECT name FROM client", "SELEC name", "card", "challenging"),
    ], mode="bird", db_resolver=bird_db_resolver(root))
    assert [q.ex for q in report.per_question] == [True, False, False, False]
    # Soft-F1 looks for each value in the row at the same position: column order does not matter there.
    assert [q.soft_f1 for q in report.per_question] == [1.0, 1.0, 0.5, 0.0]
    assert list(report.by_difficulty) == ["simple", "moderate", "challenging"]
    assert report.by_difficulty["moderate"].scored == 2
    assert report.per_question[0].hardness is None


def test_breakdowns_by_hardness_and_tables(music):
    report = spider([
        item(0, "SELECT count(*) FROM singer", "SELECT count(*) FROM singer"),
        item(1, "SELECT a.name FROM singer a JOIN singer b ON a.id = b.id", "SELECT 1"),
    ], music)
    q0, q1 = report.per_question
    assert (q0.hardness, q0.table_count, q0.join_count) == ("easy", 1, 0)
    assert (q1.table_count, q1.join_count) == (2, 1)
    assert list(report.by_tables) == ["1", "2"]
    assert report.by_tables["1"].ex == 100.0 and report.by_tables["2"].ex == 0.0
    assert report.by_difficulty["easy"].correct == 1


def test_threads_decide_like_a_single_worker(music):
    items = [item(i, "SELECT name FROM singer WHERE age > 35", p) for i, p in enumerate([
        "SELECT name FROM singer WHERE age > 35", "SELECT name FROM singer", "SELECT name FROM singer WHERE age > 40",
        "SELECT name FROM singer WHERE age >= 36", "SELECT nme FROM singer"] * 4)]
    one = spider(items, music, workers=1)
    four = spider(items, music, workers=4)
    processes = spider(items, music, workers=2, executor="process")
    assert [q.ex for q in one.per_question] == [q.ex for q in four.per_question]
    assert [(q.index, q.ex, q.status) for q in processes.per_question] == [
        (q.index, q.ex, q.status) for q in one.per_question]


def test_hanging_prediction_times_out_alone_in_worker_processes(music):
    report = spider([item(0, "SELECT 1", HANG), item(1, "SELECT 1", "SELECT 1")], music, workers=2,
                    executor="process", timeout_s=0.5)
    assert [q.status for q in report.per_question] == [Status.PRED_TIMEOUT, Status.OK]


def test_gold_results_are_cached_in_memory_and_on_disk(music, tmp_path: Path):
    cache_dir = tmp_path / "cache"
    items = [item(i, "SELECT name FROM singer", "SELECT name FROM singer") for i in range(3)]
    first = GoldCache(cache_dir)
    spider(items, music, cache=first, workers=1)
    assert (first.misses, first.hits) == (1, 2)
    assert list(cache_dir.rglob("*.marshal"))
    second = GoldCache(cache_dir)
    report = spider(items, music, cache=second)
    assert second.misses == 0
    assert all(q.ex for q in report.per_question)


def test_ves_rewards_correct_predictions_only(music):
    report = spider([item(0, "SELECT name FROM singer", "SELECT name FROM singer"),
                     item(1, "SELECT name FROM singer", "SELECT age FROM singer"),
                     item(2, "SELECT name FROM singer", "SELEC")], music, ves_runs=5, workers=1)
    rewards = [q.ves_reward for q in report.per_question]
    assert rewards[0] in (0.25, 0.5, 0.75, 1.0, 1.25)
    assert rewards[1:] == [0.0, 0.0]
    assert report.totals.ves is not None and 0 < report.totals.ves <= 100 * 1.25 ** 0.5 / 3 + 1e-9
    assert spider([item(0, "SELECT 1", "SELECT 1")], music).totals.ves is None


def test_a_prediction_that_is_the_gold_query_is_not_run_twice_unless_it_can_vary(music, monkeypatch):
    from annotations.evaluation import runner

    ran: list[str] = []
    real = runner.run_query
    monkeypatch.setattr(runner, "run_query", lambda conn, sql, limits: ran.append(sql) or real(conn, sql, limits))
    report = spider([item(0, "SELECT name FROM singer WHERE age > 40", "SELECT name FROM singer WHERE age > 40"),
                     item(1, "SELECT abs(random()) % 1000000000 FROM singer",
                          "SELECT abs(random()) % 1000000000 FROM singer")], music, workers=1)
    assert ran.count("SELECT name FROM singer WHERE age > 40") == 1  # the gold's rows serve the prediction
    assert ran.count("SELECT abs(random()) % 1000000000 FROM singer") == 2  # executed as the official script does
    assert report.per_question[0].ex is True
    assert report.per_question[1].ex is False  # two draws of random() differ, as they do for the official script
