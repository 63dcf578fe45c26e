"""Execution-based evaluation of Text-to-SQL predictions (Spider test-suite EX, BIRD EX, Soft-F1, R-VES).

Pure Python, no Django: usable from scripts, Celery tasks and the app alike.

    from annotations.evaluation import (evaluate, load_spider_gold_sql, load_spider_predictions,
                                        pair_items, spider_db_resolver)
    gold = load_spider_gold_sql("dev_gold.sql")
    preds = load_spider_predictions("pred.txt")
    items, issues = pair_items(gold, preds)
    report = evaluate(items, mode="spider", db_resolver=spider_db_resolver("database"))
    report.totals.ex, report.totals.scored

Deliberate differences from the official scripts (decisions are otherwise the same;
``python -m benchmarks.eval.check_official`` checks it question by question):

Spider (test-suite-sql-eval ``evaluation.py --etype exec``, defaults: no --plug_value, no --keep_distinct)
- Queries run through agent.sql's read-only connector: only single read-only statements run
  (anything else is a prediction error, never executed), and invalid UTF-8 in text decodes
  with U+FFFD where the official script drops the bytes.
- The per-query timeout is enforced (60 s default). The official TIMEOUT wraps a synchronous
  call in asyncio and never fires, so a slow prediction is waited for indefinitely.
- Result size is capped (1,000,000 rows / 256 MB by default); a prediction past the cap is an
  error instead of exhausting memory.
- A gold query that fails is reported as ``gold_error`` and left out of the figures; the
  official script stops with an AssertionError. All gold runs of a question come first,
  so a gold failure on any database file of the db is found even when the prediction
  would have failed earlier.
- Questions whose database is missing (wta_1) are ``not_executable`` and left out; the
  official script would create an empty file there and crash.
- Only files whose suffix is ``.sqlite`` make up a db's test suite; the official script
  takes every name containing ".sqlite" (``x.sqlite-journal`` too).
- Column permutations are searched exhaustively over columns with equal value bags,
  instead of a random sample of 20 rows pruning the candidates: both only drop
  impossible permutations, so decisions agree, ours without randomness.
- The quick-rejection step is reproduced as is, including its sort key str(v) + str(type(v)),
  which for rows mixing 1 and 1.0 with nearby strings can reject equal results.
- Blank lines in a prediction file separate interactions (as in the official reader) unless
  ``blank_lines="keep"``; a line with more than one tab is reported and scored as a
  prediction error instead of silently cut at the first tab.
- Hardness comes from our sqlglot reading of the gold query (``sqlstats.spider_hardness``),
  reproducing the official counting rules and parser quirks; it agrees on all 1034 Spider dev
  queries and the 322 of evaluation_examples. A gold query sqlglot cannot parse gets no
  hardness ("unknown" in the breakdown) where the official parser may still rate it.
- Soft-F1 is also reported in Spider mode (the official Spider script has no such metric).

BIRD mini-dev (``evaluation_ex.py``, ``evaluation_f1.py``, ``evaluation_ves.py``)
- The 30 s timeout applies to each query; the official one covers prediction and gold together.
- An empty or non-string prediction is a prediction error; the official script runs " " and,
  since that returns no rows, counts it correct when the gold result is empty.
- Predictions are keyed by their JSON key (the question index); the official reader uses
  the order of entries. Both agree for files written as {"0": ..., "1": ...}. Queries always
  run on the gold question's database; the official reader falls back to "financial" for an
  entry without the separator (and runs on the gold's database anyway).
- A gold failure is ``gold_error`` (excluded); the official scripts count it as a wrong answer.
- R-VES: timings come from the connector (execution and fetch, not connection set-up);
  when all time ratios are equal the official outlier filter keeps none and the question
  scores 0 (division by zero caught); we keep them all.
- VES correctness uses the mode's EX decision (set equality in BIRD mode, as official).
"""

from __future__ import annotations

from .compare import bird_results_equal, remove_distinct, soft_f1, spider_results_equal
from .formats import (
    BIRD_SEPARATOR,
    MAX_PREDICTION_CHARS,
    MAX_PREDICTION_ENTRIES,
    PredictionFileTooLarge,
    iter_bird_dev,
    iter_json_array,
    iter_spider_dev,
    load_bird_dev,
    load_bird_predictions,
    load_spider_dev,
    load_spider_gold_sql,
    load_spider_predictions,
    pair_items,
    parse_bird_predictions,
    parse_spider_predictions,
)
from .records import (
    SCORED_STATUSES,
    Aggregate,
    EvalItem,
    EvalReport,
    GoldItem,
    ParseIssue,
    Prediction,
    PredictionSet,
    QuestionResult,
    Status,
)
from .runner import (
    GoldCache,
    aggregate,
    bird_db_resolver,
    build_report,
    evaluate,
    spider_db_resolver,
)
from .sqlstats import (
    BIRD_DIFFICULTIES,
    DIFFICULTY_ORDER,
    HARDNESS_LEVELS,
    TABLE_BUCKETS,
    CellValueStats,
    GoldStats,
    PaperCellValueStats,
    cell_value_stats,
    constraint_values,
    gold_stats,
    join_count,
    paper_cell_value_stats,
    paper_constraint_values,
    spider_hardness,
    table_bucket,
    table_count,
)
from .ves import drop_outliers, r_ves, time_ratio, ves_reward

__all__ = [
    "BIRD_DIFFICULTIES", "BIRD_SEPARATOR", "DIFFICULTY_ORDER", "HARDNESS_LEVELS", "SCORED_STATUSES", "TABLE_BUCKETS", "Aggregate", "CellValueStats", "EvalItem", "EvalReport",
    "GoldCache", "GoldItem", "GoldStats", "gold_stats",
    "ParseIssue", "Prediction", "PredictionSet", "QuestionResult", "Status", "aggregate", "bird_db_resolver",
    "bird_results_equal", "build_report", "cell_value_stats", "constraint_values", "PaperCellValueStats",
    "paper_cell_value_stats", "paper_constraint_values", "drop_outliers", "evaluate",
    "MAX_PREDICTION_CHARS", "MAX_PREDICTION_ENTRIES", "PredictionFileTooLarge", "iter_bird_dev", "iter_json_array", "iter_spider_dev", "join_count", "load_bird_dev", "load_bird_predictions", "load_spider_dev", "load_spider_gold_sql",
    "load_spider_predictions", "pair_items", "parse_bird_predictions", "parse_spider_predictions", "r_ves",
    "remove_distinct", "soft_f1", "spider_db_resolver", "spider_hardness", "spider_results_equal",
    "table_bucket", "table_count", "time_ratio", "ves_reward",
]
