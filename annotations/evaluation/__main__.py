"""Command line: score a prediction file.

    python -m annotations.evaluation spider --gold dev_gold.sql --pred pred.txt --db database/
    python -m annotations.evaluation bird --gold dev.json --pred predict_dev.json --db dev_databases/ [--ves-runs 10]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from .formats import (
    load_bird_dev,
    load_bird_predictions,
    load_spider_gold_sql,
    load_spider_predictions,
    pair_items,
)
from .runner import bird_db_resolver, evaluate, spider_db_resolver


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m annotations.evaluation", description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("spider", "bird"))
    parser.add_argument("--gold", required=True, help="Spider dev_gold.sql, or BIRD dev.json / mini-dev .jsonl")
    parser.add_argument("--pred", required=True, help="Spider text predictions, or BIRD JSON predictions")
    parser.add_argument("--db", required=True, help="folder holding <db_id>/<db_id>.sqlite")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--executor", choices=("process", "thread"), default="process",
                        help="processes also parallelise parsing; threads suit daemonic callers")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per query (60 Spider, 30 BIRD)")
    parser.add_argument("--keep-distinct", action="store_true")
    parser.add_argument("--ves-runs", type=int, default=0)
    parser.add_argument("--cache-dir", default=None, help="persist gold results here")
    parser.add_argument("--json", action="store_true", help="print every question's result as JSON lines")
    args = parser.parse_args(argv)

    # A file past a limit, malformed or unreadable is one line on stderr naming it, not a traceback.
    path = args.gold
    try:
        gold = load_spider_gold_sql(path) if args.mode == "spider" else load_bird_dev(path)
        path = args.pred
        load = load_spider_predictions if args.mode == "spider" else load_bird_predictions
        preds = load(path, keep=lambda i: i < len(gold))  # predictions past the gold are counted, not kept
    except (OSError, ValueError) as exc:
        print(f"error: {path}: {exc}", file=sys.stderr)
        return 2
    resolver = spider_db_resolver(args.db) if args.mode == "spider" else bird_db_resolver(args.db)
    items, issues = pair_items(gold, preds)
    for issue in (*preds.issues, *issues):
        print(f"warning: {args.pred}: {issue}", file=sys.stderr)
    report = evaluate(items, mode=args.mode, db_resolver=resolver, workers=args.workers, timeout_s=args.timeout,
                      keep_distinct=args.keep_distinct, ves_runs=args.ves_runs, cache_dir=args.cache_dir,
                      executor=args.executor)
    if args.json:
        for q in report.per_question:
            print(json.dumps(asdict(q)))
    print(report.summary())
    for title, groups in (("by difficulty", report.by_difficulty), ("by tables", report.by_tables)):
        print(title + ":")
        for key, agg in groups.items():
            ex = "n/a" if agg.ex is None else f"{agg.ex:.2f}"
            print(f"  {key:<12} EX {ex:>6} over {agg.scored} of {agg.questions}")
    t = report.totals
    if t.soft_f1 is not None:
        print(f"Soft-F1 {t.soft_f1:.2f}" + ("" if t.ves is None else f"; R-VES {t.ves:.2f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
