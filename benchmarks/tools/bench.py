"""Speed of the tools: `python -m benchmarks.tools.bench [--spider DIR] [--no-write] [--no-baselines]`.

For (a) the largest Spider dev database (by file size) and (b) a generated
database (benchmarks/tools/gen_db.py: 40 tables, 320 columns, 2.4 M text
cells), it prints per tool the index build time and size, query latency
p50/p95 through ToolBox.run (index loading excluded, reported apart) and peak
memory (max RSS of a fresh process doing only that step), then compares
SearchValue approaches: the shipped FTS5 index against a LIKE scan of the
target, bm25s and rank-bm25 (value_baselines.py) on the same queries. Last,
what the per-query PostgreSQL role check adds to ExecuteSQL (pg_role_check.py;
skipped when no PostgreSQL server answers).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.sql import connect
from agent.tools import ToolBox, build_indexes, read_manifest
from agent.tools.text import fold, split_name

from . import gen_db, pg_role_check
from .report import machine, stamp, table, write_section
from .spider import DEFAULT_SPIDER, perturb_lower, perturb_partial, perturb_typo

N_QUERIES = 200
N_SLOW = 20  # queries for the slow baselines (LIKE scan, rank-bm25)
BASELINE_TIMEOUT_S = 240


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _in_child(fn: Callable[..., dict[str, Any]], *args: Any, timeout: float | None = None) -> dict[str, Any]:
    """Run ``fn`` in a fresh process so its peak memory is its own."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        pending = pool.apply_async(fn, args)
        try:
            result = pending.get(timeout)
        except mp.TimeoutError:
            return {"timeout": timeout}
        pool.close()
        pool.join()
        return result


def _pcts(ms: list[float]) -> tuple[float, float]:
    ordered = sorted(ms)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


# --- steps run in child processes -------------------------------------------------------------------------


def step_build(db_path: str, index_dir: str) -> dict[str, Any]:
    with connect("sqlite", db_path) as db:
        manifest = build_indexes(db, Path(index_dir))
    return {"manifest": manifest.to_dict(), "rss_mb": _rss_mb()}


def value_queries(index_dir: str, n: int = N_QUERIES) -> list[tuple[str, str, str, str]]:
    """(variant, query, table, cell) drawn from the indexed cells with a fixed seed."""
    manifest = read_manifest(Path(index_dir))
    assert manifest is not None
    conn = sqlite3.connect(Path(index_dir) / manifest.version / "values.sqlite")
    total = conn.execute("SELECT MAX(id) FROM cells").fetchone()[0]
    rng = random.Random(7)
    out: list[tuple[str, str, str, str]] = []
    while len(out) < n:
        row = conn.execute("SELECT c.value, k.tbl FROM cells c JOIN cols k ON k.id = c.col_id WHERE c.id = ?",
                           (rng.randint(1, total),)).fetchone()
        if row is None or len(row[0]) > 60:  # people search for names and short values, not paragraphs
            continue
        value, tbl = row
        for variant, query in (("as written", value), ("lower-cased", perturb_lower(value)),
                               ("one typo", perturb_typo(value, rng)), ("partial", perturb_partial(value))):
            if query:
                out.append((variant, query, tbl, value))
    conn.close()
    return out[:n]


def step_queries(db_path: str, index_dir: str) -> dict[str, Any]:
    rng = random.Random(11)
    with connect("sqlite", db_path) as db:
        t0 = time.perf_counter()
        tools = ToolBox(db, Path(index_dir))
        schema = tools.schema
        out: dict[str, Any] = {}
        cols = [(t.name, c.name) for t in schema.tables for c in t.columns]
        loads = {}
        t1 = time.perf_counter()
        tools.run("SearchColumn", ["warm up"])
        loads["SearchColumn"] = (time.perf_counter() - t1) * 1000
        t1 = time.perf_counter()
        tools.run("SearchValue", ["warm up"])
        loads["SearchValue"] = (time.perf_counter() - t1) * 1000
        t1 = time.perf_counter()
        tools.run("FindShortestPath", [".".join(cols[0]), ".".join(cols[-1])])
        loads["FindShortestPath"] = (time.perf_counter() - t1) * 1000
        loads["ToolBox"] = (t1 - t0) * 1000
        out["load_ms"] = loads
        phrases = []
        for _ in range(N_QUERIES):
            t, c = rng.choice(cols)
            phrases.append(f"{split_name(c)} of the {split_name(t)}" if rng.random() < 0.5 else split_name(c))
        queries = value_queries(index_dir)
        pairs = [(".".join(rng.choice(cols)), ".".join(rng.choice(cols))) for _ in range(N_QUERIES)]
        calls: dict[str, list[tuple[str, list[Any]]]] = {
            "SearchColumn": [("SearchColumn", [p]) for p in phrases],
            "SearchValue": [("SearchValue", [q]) for _v, q, _t, _c in queries],
            "FindShortestPath": [("FindShortestPath", [a, b]) for a, b in pairs],
        }
        for tool, batch in calls.items():
            ms = []
            for name, args in batch:
                t1 = time.perf_counter()
                result = tools.run(name, args)
                ms.append((time.perf_counter() - t1) * 1000)
                assert result.ok or name == "FindShortestPath", result.observation
            out[tool] = ms
        hits: dict[str, list[bool]] = {}
        for (variant, query, _t, cell), (_n, _a) in zip(queries, calls["SearchValue"], strict=True):
            observation = tools.run("SearchValue", [query]).observation
            top5 = [line for line in observation.splitlines() if " = '" in line][:5]
            hits.setdefault(variant, []).append(any(
                fold(line.split(" = ", 1)[1][1:-1].replace("''", "'")) == fold(cell[:100]) for line in top5))
        out["value_recall"] = {v: sum(h) / len(h) for v, h in hits.items()}
    out["rss_mb"] = _rss_mb()
    return out


def step_baseline(kind: str, db_path: str, index_dir: str, n: int) -> dict[str, Any]:
    from agent.tools.value_index import iter_cells

    from .value_baselines import BM25sSearcher, FTS5Searcher, LikeScanSearcher, RankBM25Searcher

    queries = value_queries(index_dir)
    step = max(1, len(queries) // n)
    sample = queries[::step][:n]
    with connect("sqlite", db_path) as db:
        schema = db.introspect(with_stats=False)
        t0 = time.perf_counter()
        searcher: Any
        if kind == "like":
            searcher = LikeScanSearcher(Path(db_path), schema)
        elif kind == "fts5":
            manifest = read_manifest(Path(index_dir))
            assert manifest is not None
            searcher = FTS5Searcher(Path(index_dir) / manifest.version / "values.sqlite")
        else:
            cells = list(iter_cells(db, schema))
            searcher = BM25sSearcher(cells) if kind == "bm25s" else RankBM25Searcher(cells)
        build_s = time.perf_counter() - t0
    ms = []
    hits = []
    for _variant, query, _t, cell in sample:
        t1 = time.perf_counter()
        found = searcher.search(query, 10)
        ms.append((time.perf_counter() - t1) * 1000)
        hits.append(any(fold(v) == fold(cell) for _t2, _c, v in found[:5]))
    return {"build_s": build_s, "ms": ms, "recall": sum(hits) / len(hits), "n": len(sample), "rss_mb": _rss_mb()}


# --- driver ---------------------------------------------------------------------------------------------


def largest_spider_db(root: Path) -> Path:
    return max((root / "database").glob("*/*.sqlite"), key=lambda p: p.stat().st_size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spider", type=Path, default=DEFAULT_SPIDER)
    parser.add_argument("--generated", type=Path, default=None, help="where to cache the generated database")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--no-baselines", action="store_true", help="skip bm25s and rank-bm25 (slow to build)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    t0 = time.perf_counter()
    generated = gen_db.generate(args.generated)
    gen_s = time.perf_counter() - t0
    targets = [("(a) " + largest_spider_db(args.spider).parent.name, largest_spider_db(args.spider)),
               ("(b) generated", generated)]
    body = ["## Speed\n",
            f"Command: `python -m benchmarks.tools.bench`; date {stamp()}; machine {machine()}.",
            f"(a) is the largest Spider dev database by file size; (b) is generated by "
            f"benchmarks/tools/gen_db.py ({gen_db.TABLES} tables x {gen_db.ROWS} rows, {generated.stat().st_size // 2**20} "
            f"MiB, cached at {generated}; this run spent {gen_s:.0f} s generating it, 0 when cached). Latencies are "
            f"through ToolBox.run after the indexes are loaded ({N_QUERIES} calls per tool); peak memory is "
            "the max RSS of a fresh process doing only that step (Python itself is ~30 MB).\n"]
    summary_rows: list[list[object]] = []
    compare_rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="t2s-bench-") as tmp:
        for label, db_path in targets:
            index_dir = str(Path(tmp) / db_path.stem)
            built = _in_child(step_build, str(db_path), index_dir)
            m = built["manifest"]
            q = _in_child(step_queries, str(db_path), index_dir)
            counts = m["counts"]
            print(f"{label}: built in {m['build_seconds']['total']:.1f} s, {counts}", flush=True)
            sizes = m["sizes"]
            secs = m["build_seconds"]
            for tool, size_keys, sec_keys in (("SearchColumn", ["columns", "schema"], ["columns", "schema"]),
                                              ("SearchValue", ["values"], ["values"]),
                                              ("FindShortestPath", ["graph"], ["graph"])):
                p50, p95 = _pcts(q[tool])
                summary_rows.append([
                    label, tool, f"{sum(secs.get(k, 0) for k in sec_keys):.2f}",
                    _size(sum(sizes.get(k, 0) for k in size_keys)), f"{q['load_ms'][tool]:.0f}",
                    f"{p50:.2f}", f"{p95:.2f}"])
            summary_rows.append([label, "all (build process / query process)", f"{secs['total']:.2f}",
                                 _size(sum(sizes.values())), f"{q['load_ms']['ToolBox']:.0f}",
                                 f"peak RSS {built['rss_mb']:.0f} MB", f"peak RSS {q['rss_mb']:.0f} MB"])
            body_counts = (f"{label}: {counts['tables']} tables, {counts['columns']} columns, "
                           f"{counts['text_columns']} text columns, {counts['text_cells']:,} text cells, "
                           f"{counts['cells']:,} distinct (column, cell) pairs, {counts['terms']:,} terms, "
                           f"{counts['foreign_keys']} foreign keys. SearchValue recall@5 on its own sampled "
                           "queries: " + ", ".join(f"{v} {100 * r:.0f}%" for v, r in q["value_recall"].items()))
            body.append(body_counts + "\n")
            kinds = ["fts5", "like"] + ([] if args.no_baselines else ["bm25s", "rank-bm25"])
            for kind in kinds:
                n = N_QUERIES if kind in ("fts5", "bm25s") else N_SLOW
                res = _in_child(step_baseline, kind, str(db_path), index_dir, n, timeout=BASELINE_TIMEOUT_S)
                if "timeout" in res:
                    compare_rows.append([label, kind, f"> {BASELINE_TIMEOUT_S} s (stopped)", "-", "-", "-", "-"])
                    continue
                p50, p95 = _pcts(res["ms"])
                build = f"{secs['values']:.1f} (index file)" if kind == "fts5" else (
                    "none" if kind == "like" else f"{res['build_s']:.1f} (in memory)")
                compare_rows.append([label, kind, build, f"{p50:.2f}", f"{p95:.2f}",
                                     f"{100 * res['recall']:.0f}% (n={res['n']})", f"{res['rss_mb']:.0f}"])
                print(compare_rows[-1], flush=True)
    body.append(table(["database", "tool", "build s", "index size", "load ms (first call)", "p50 ms", "p95 ms"],
                      summary_rows))
    body.append("\n### SearchValue approaches on the same sampled queries\n\n"
                "Queries: cells of up to 60 characters sampled from the index, each as written, lower-cased, "
                "with one typo and partial (see eval_quality for the perturbations); recall@5 = the sampled "
                "cell among the first five results. The LIKE scan and rank-bm25 are timed on "
                f"{N_SLOW} of them. Peak RSS covers building (for in-memory approaches) and querying.\n")
    body.append(table(["database", "approach", "build s", "p50 ms", "p95 ms", "recall@5", "peak RSS MB"],
                      compare_rows))
    body.append(f"\nTotal benchmark run time {time.perf_counter() - started:.0f} s.")
    text = "\n".join(body)
    print(text)
    if not args.no_write:
        write_section("speed", text)
    try:
        role_check = pg_role_check.section()
    except pg_role_check.Unavailable as exc:
        print(f"PostgreSQL role check: skipped ({exc})")
    else:
        print(role_check)
        if not args.no_write:
            write_section("pg-role-check", role_check)
    return 0


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


if __name__ == "__main__":
    sys.exit(main())
