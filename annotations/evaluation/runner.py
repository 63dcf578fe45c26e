"""Run gold and predicted queries and score them: ``evaluate()``.

Every query goes through ``agent.sql``'s read-only SQLite connector, with a
per-query timeout and row/byte caps; a result cut by a cap is an error, never
a prefix compared as if it were whole. Gold results are computed once per
(database file, rewritten gold SQL) and kept in memory, and on disk when a
cache directory is given. Questions run on a thread pool (sqlite releases the
GIL while it steps; one connector per thread and database file) or, with
``executor="process"``, on worker processes, which also spreads the
Python-side parsing over the cores.
"""

from __future__ import annotations

import hashlib
import marshal
import multiprocessing
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from agent.sql import Limits, QueryTimeout, ResultTooLarge, SQLError
from agent.sql.base import Connector, human_bytes
from agent.sql.sandbox import SQLiteSandbox
from agent.sql.sqlite import SQLiteConnector

from .compare import (
    bird_results_equal,
    fix_spaced_operators,
    remove_distinct,
    replace_cur_year,
    soft_f1,
    spider_order_matters,
    spider_results_equal,
)
from .records import SCORED_STATUSES, Aggregate, EvalItem, EvalReport, QuestionResult, Status
from .sqlstats import TABLE_BUCKETS, GoldStats, gold_stats, table_bucket
from .ves import r_ves, time_ratio, ves_reward

Mode = Literal["spider", "bird"]
DbResolver = Callable[[str], Sequence[str | os.PathLike[str]]]
Row = tuple[Any, ...]

DEFAULT_TIMEOUT_S = {"spider": 60.0, "bird": 30.0}  # Spider's nominal TIMEOUT, BIRD's meta_time_out
DEFAULT_MAX_ROWS = 1_000_000
# Python memory of one result kept for comparison; with the query process's own bound this keeps one
# query under 100 MB of growth in the evaluating process (see agent/sql/sqlite.py).
DEFAULT_MAX_BYTES = 40_000_000


# --- database resolution ------------------------------------------------------------


def suite_files(folder: str | os.PathLike[str]) -> tuple[Path, ...]:
    """Every ``*.sqlite`` file of one database's folder (a Spider test suite holds several); none if missing."""
    folder = Path(folder)
    if not folder.is_dir():
        return ()
    return tuple(sorted(p for p in folder.iterdir() if p.suffix == ".sqlite" and p.is_file()))


def spider_db_resolver(database_dir: str | os.PathLike[str]) -> DbResolver:
    """Every ``*.sqlite`` file in ``database_dir/<db_id>/``; none if missing."""
    root = Path(database_dir)
    return lambda db_id: suite_files(root / db_id)


def bird_db_resolver(database_dir: str | os.PathLike[str]) -> DbResolver:
    """``database_dir/<db_id>/<db_id>.sqlite``, BIRD's layout."""
    root = Path(database_dir)

    def resolve(db_id: str) -> tuple[Path, ...]:
        path = root / db_id / f"{db_id}.sqlite"
        return (path,) if path.is_file() else ()

    return resolve


def db_fingerprint(path: str | os.PathLike[str]) -> str:
    # Path, size and mtime: cheap on multi-GB BIRD files, and changes when the file is replaced.
    p = Path(path).resolve()
    st = p.stat()
    return hashlib.sha1(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]


# --- executing ------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One query on one database file: rows, or why there are none."""

    rows: tuple[Row, ...] | None
    kind: str  # "ok", "error", "timeout", "too_large"
    error: str = ""
    ms: float = 0.0


def run_query(conn: Connector, sql: str, limits: Limits) -> Outcome:
    try:
        res = conn.execute(sql, limits=limits)
    except QueryTimeout as exc:
        return Outcome(None, "timeout", str(exc))
    except ResultTooLarge as exc:
        return Outcome(None, "too_large", str(exc))
    except SQLError as exc:
        return Outcome(None, "error", str(exc) or type(exc).__name__)
    except Exception as exc:  # noqa: BLE001 - a model's SQL may break the parser (RecursionError, MemoryError...)
        return Outcome(None, "error", f"{type(exc).__name__}: {exc}")
    if res.truncated_bytes or (res.truncated and len(res.rows) >= limits.max_rows):
        return Outcome(None, "too_large", f"result too large (limit {limits.max_rows} rows, "
                                          f"{human_bytes(limits.max_bytes)})", res.elapsed_ms)
    if res.truncated:  # the deadline passed while rows were being fetched
        return Outcome(None, "timeout", f"Query stopped after {limits.timeout_s:g} s (time limit).", res.elapsed_ms)
    return Outcome(tuple(res.rows), "ok", "", res.elapsed_ms)


class _Connections:
    """One read-only connector per (thread, file): connectors are not thread-safe.

    The connectors of one thread share one query process (``SQLiteSandbox``), whatever the number of files.
    """

    def __init__(self) -> None:
        self._local = threading.local()
        self._all: list[Connector] = []
        self._sandboxes: list[SQLiteSandbox] = []
        self._lock = threading.Lock()

    def get(self, path: str) -> Connector:
        conns = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        conn = conns.get(path)
        if conn is None:
            sandbox = getattr(self._local, "sandbox", None)
            if sandbox is None:
                sandbox = self._local.sandbox = SQLiteSandbox()
                with self._lock:
                    self._sandboxes.append(sandbox)
            conn = conns[path] = SQLiteConnector(path, sandbox=sandbox)
            with self._lock:
                self._all.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
            for sandbox in self._sandboxes:
                sandbox.close()
            self._sandboxes.clear()


class GoldCache:
    """Gold outcomes by (database fingerprint, SQL): computed once, shared by threads.

    With ``directory``, successful results also persist as ``marshal`` files
    (plain values only, no code), keyed by the fingerprint, the SQL and the
    Python version (marshal's format is version-specific).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory else None
        self._memory: dict[str, Outcome] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(fingerprint: str, sql: str) -> str:
        tag = f"{fingerprint}\0{sql}\0{sys.version_info[:2]}"
        return hashlib.sha256(tag.encode("utf-8", "surrogatepass")).hexdigest()

    def get(self, key: str, compute: Callable[[], Outcome]) -> Outcome:
        with self._guard:
            found = self._memory.get(key)
            if found is not None:
                self.hits += 1
                return found
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            found = self._memory.get(key)
            if found is None:
                found = self._load(key)
                if found is None:
                    found = compute()
                    self._store(key, found)
                    self.misses += 1
                else:
                    self.hits += 1
                self._memory[key] = found
            else:
                self.hits += 1
            return found

    def _path(self, key: str) -> Path | None:
        return self.directory / key[:2] / f"{key}.marshal" if self.directory else None

    def _load(self, key: str) -> Outcome | None:
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            rows, ms = marshal.loads(path.read_bytes())
        except (ValueError, EOFError, TypeError):
            return None  # a damaged entry is recomputed
        return Outcome(tuple(rows), "ok", "", ms)

    def _store(self, key: str, outcome: Outcome) -> None:
        path = self._path(key)
        if path is None or outcome.rows is None:
            return  # failures (a timeout may be transient) stay in memory only
        try:
            data = marshal.dumps((outcome.rows, outcome.ms))
        except ValueError:
            return  # a value marshal cannot hold
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)


# --- rewriting as the official scripts do ---------------------------------------------------


def spider_rewrite_gold(sql: str, *, keep_distinct: bool = False) -> str:
    sql = fix_spaced_operators(sql)
    return sql if keep_distinct else remove_distinct(sql)


def spider_rewrite_pred(sql: str, *, keep_distinct: bool = False, value_placeholder: bool = True) -> str:
    # The official loop turns the placeholder "value" (any occurrence, case-sensitive) into 1.
    if value_placeholder:
        sql = sql.replace("value", "1")
    return spider_rewrite_gold(sql, keep_distinct=keep_distinct)


_VOLATILE = re.compile(r"random|now|current_|julianday|strftime|changes|last_insert", re.IGNORECASE)


@lru_cache(maxsize=8192)
def _gold_stats(sql: str, with_hardness: bool) -> GoldStats:
    # Many questions share a gold query (Spider pairs paraphrases): parse each once.
    return gold_stats(sql, hardness=with_hardness)


# --- evaluating -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Settings:
    mode: Mode
    limits: Limits
    keep_distinct: bool
    value_placeholder: bool
    ves_runs: int


def evaluate(
    items: Sequence[EvalItem],
    *,
    mode: Mode,
    db_resolver: DbResolver,
    workers: int = 2,
    timeout_s: float | None = None,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    keep_distinct: bool = False,
    value_placeholder: bool = True,
    ves_runs: int = 0,
    cache: GoldCache | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    executor: Literal["thread", "process"] = "thread",
) -> EvalReport:
    """Score predictions against gold queries by execution.

    ``mode="spider"``: test-suite EX (columns unordered, rows ordered only when
    the gold has ORDER BY, every database file of the db must agree; DISTINCT
    removed unless ``keep_distinct``; ``value`` in predictions read as 1
    unless ``value_placeholder=False``). ``mode="bird"``: set equality of rows.
    Soft-F1 is computed in both modes; R-VES only when ``ves_runs`` > 0 (time
    each correct pair that many times; use ``workers=1`` for stable timings).

    ``executor="process"`` spreads questions over ``workers`` processes, which
    also parallelises the Python-side parsing; keep the default threads
    inside daemonic workers (Celery prefork children cannot start processes).
    Worker processes each keep their own in-memory gold cache; ``cache_dir``
    (or a ``cache`` with a directory) shares gold results between them and runs.
    """
    if mode not in ("spider", "bird"):
        raise ValueError("mode must be 'spider' or 'bird'")
    if executor not in ("thread", "process"):
        raise ValueError("executor must be 'thread' or 'process'")
    settings = _Settings(
        mode=mode,
        limits=Limits(timeout_s=timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S[mode],
                      max_rows=max_rows, max_bytes=max_bytes, count_cap=0),
        keep_distinct=keep_distinct,
        value_placeholder=value_placeholder,
        ves_runs=max(0, ves_runs),
    )
    gold_cache = cache if cache is not None else GoldCache(cache_dir)
    fingerprints: dict[str, str] = {}
    files_by_db: dict[str, tuple[str, ...]] = {}
    for item in items:
        if item.db_id not in files_by_db:
            files = tuple(str(Path(f)) for f in db_resolver(item.db_id))
            files_by_db[item.db_id] = files
            for f in files:
                fingerprints[f] = db_fingerprint(f)

    started = time.perf_counter()
    if executor == "process" and workers > 1 and len(items) > 1:
        results = _evaluate_in_processes(items, files_by_db, settings, fingerprints, gold_cache.directory,
                                         workers, progress)
    else:
        results = _evaluate_in_threads(items, files_by_db, settings, fingerprints, gold_cache, workers, progress)
    return build_report(mode, results, elapsed_s=time.perf_counter() - started,
                        ves_computed=settings.ves_runs > 0)


def _score_safely(item: EvalItem, files: tuple[str, ...], s: _Settings, conns: _Connections, cache: GoldCache,
                  fingerprints: dict[str, str]) -> QuestionResult:
    try:
        return _score(item, files, s, conns, cache, fingerprints)
    except Exception as exc:  # noqa: BLE001 - one broken question must not stop a run
        return QuestionResult(item.index, item.db_id, Status.PRED_ERROR, False, soft_f1=0.0,
                              error=f"evaluator failure: {type(exc).__name__}: {exc}")


def _evaluate_in_threads(items: Sequence[EvalItem], files_by_db: dict[str, tuple[str, ...]], s: _Settings,
                         fingerprints: dict[str, str], cache: GoldCache, workers: int,
                         progress: Callable[[int, int], None] | None) -> list[QuestionResult]:
    conns = _Connections()
    done = 0
    done_lock = threading.Lock()

    def one(item: EvalItem) -> QuestionResult:
        nonlocal done
        result = _score_safely(item, files_by_db[item.db_id], s, conns, cache, fingerprints)
        if progress is not None:
            with done_lock:
                done += 1
                progress(done, len(items))
        return result

    try:
        if workers <= 1:
            return [one(item) for item in items]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="t2s-eval") as pool:
            return list(pool.map(one, items))
    finally:
        conns.close()


def _score_chunk(chunk: list[tuple[EvalItem, tuple[str, ...]]], s: _Settings, fingerprints: dict[str, str],
                 cache_dir: Path | None) -> list[QuestionResult]:
    """Run in a worker process: its own connectors and in-memory gold cache (the disk cache is shared)."""
    conns = _Connections()
    cache = GoldCache(cache_dir)
    try:
        return [_score_safely(item, files, s, conns, cache, fingerprints) for item, files in chunk]
    finally:
        conns.close()


def _evaluate_in_processes(items: Sequence[EvalItem], files_by_db: dict[str, tuple[str, ...]], s: _Settings,
                           fingerprints: dict[str, str], cache_dir: Path | None, workers: int,
                           progress: Callable[[int, int], None] | None) -> list[QuestionResult]:
    # Contiguous chunks keep questions sharing a gold query (Spider's paraphrase pairs) in one process.
    size = max(1, -(-len(items) // (workers * 4)))
    chunks = [[(it, files_by_db[it.db_id]) for it in items[i:i + size]] for i in range(0, len(items), size)]
    results: list[QuestionResult] = []
    # Fork when the platform has it: workers start at once with everything imported.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(_score_chunk, chunk, s, fingerprints, cache_dir): chunk for chunk in chunks}
        for future in as_completed(futures):
            try:
                results.extend(future.result())
            except Exception as exc:  # noqa: BLE001 - a worker killed by a query (e.g. out of memory)
                results.extend(QuestionResult(it.index, it.db_id, Status.PRED_ERROR, False, soft_f1=0.0,
                                              error=f"evaluation worker failed: {type(exc).__name__}")
                               for it, _ in futures[future])
            if progress is not None:
                progress(len(results), len(items))
    return results


def _score(item: EvalItem, files: tuple[str, ...], s: _Settings, conns: _Connections, cache: GoldCache,
           fingerprints: dict[str, str]) -> QuestionResult:
    stats = _gold_stats(item.gold_sql, s.mode == "spider")
    base: dict[str, Any] = {
        "index": item.index, "db_id": item.db_id, "join_count": stats.join_count,
        "table_count": stats.table_count, "hardness": stats.hardness, "difficulty": item.difficulty,
    }
    if not files:
        return QuestionResult(status=Status.NOT_EXECUTABLE, ex=None, error="database not available", **base)

    if s.mode == "spider":
        rewritten = spider_rewrite_gold(item.gold_sql, keep_distinct=s.keep_distinct)
        gold_sql, order_matters = replace_cur_year(rewritten), spider_order_matters(rewritten)
    else:
        gold_sql, order_matters = item.gold_sql, False

    golds: list[Outcome] = []
    for f in files:
        outcome = cache.get(GoldCache.key(fingerprints[f], gold_sql),
                            lambda f=f: run_query(conns.get(f), gold_sql, s.limits))
        if outcome.rows is None:
            return QuestionResult(status=Status.GOLD_ERROR, ex=None,
                                  error=f"gold query failed on {Path(f).name}: {outcome.error}", **base)
        golds.append(outcome)
    base["gold_rows"] = len(golds[0].rows or ())
    base["gold_ms"] = golds[0].ms

    if item.pred_sql is None:
        return QuestionResult(status=Status.PRED_ERROR, ex=False, soft_f1=0.0,
                              ves_reward=0.0 if s.ves_runs else None,
                              error=item.pred_note or "no prediction", **base)
    if s.mode == "spider":
        pred_sql = replace_cur_year(spider_rewrite_pred(item.pred_sql, keep_distinct=s.keep_distinct,
                                                        value_placeholder=s.value_placeholder))
    else:
        pred_sql = item.pred_sql

    correct = True
    f1: float | None = None
    # A prediction that is the gold query itself (after the same rewriting) returns the gold's rows on the
    # same read-only file: the result is reused rather than executed twice, unless the text can vary
    # between executions (random(), the current time).
    reuse_gold = pred_sql == gold_sql and not _VOLATILE.search(pred_sql)
    for f, gold in zip(files, golds, strict=True):
        pred = gold if reuse_gold else run_query(conns.get(f), pred_sql, s.limits)
        if pred.rows is None:
            status = Status.PRED_TIMEOUT if pred.kind == "timeout" else Status.PRED_ERROR
            return QuestionResult(status=status, ex=False, soft_f1=0.0 if f1 is None else f1,
                                  ves_reward=0.0 if s.ves_runs else None, error=pred.error, **base)
        assert gold.rows is not None
        if f1 is None:
            f1 = soft_f1(gold.rows, pred.rows)
            base["pred_rows"] = len(pred.rows)
            base["pred_ms"] = pred.ms
        if s.mode == "spider":
            same = spider_results_equal(gold.rows, pred.rows, order_matters=order_matters)
        else:
            same = bird_results_equal(gold.rows, pred.rows)
        if not same:
            correct = False
            break  # like the official script, the first disagreeing database decides

    reward: float | None = None
    if s.ves_runs:
        reward = _ves(conns.get(files[0]), gold_sql, pred_sql, s) if correct else 0.0
    return QuestionResult(status=Status.OK, ex=correct, soft_f1=f1, ves_reward=reward, **base)


def _ves(conn: Connector, gold_sql: str, pred_sql: str, s: _Settings) -> float:
    gold_times: list[float] = []
    pred_times: list[float] = []
    for _ in range(s.ves_runs):
        # Alternate, as the official loop does, so drift hits both sides alike.
        pred = run_query(conn, pred_sql, s.limits)
        gold = run_query(conn, gold_sql, s.limits)
        if pred.rows is None or gold.rows is None:
            return 0.0
        pred_times.append(pred.ms)
        gold_times.append(gold.ms)
    return ves_reward(time_ratio(gold_times, pred_times))


# --- aggregating ---------------------------------------------------------------------------------


def aggregate(results: Iterable[QuestionResult], *, ves_computed: bool = False) -> Aggregate:
    results = list(results)
    scored = [r for r in results if r.status in SCORED_STATUSES]
    correct = sum(1 for r in scored if r.ex)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status.value] = counts.get(r.status.value, 0) + 1
    f1s = [r.soft_f1 or 0.0 for r in scored]
    return Aggregate(
        questions=len(results),
        scored=len(scored),
        correct=correct,
        ex=100 * correct / len(scored) if scored else None,
        soft_f1=100 * sum(f1s) / len(f1s) if f1s else None,
        ves=r_ves([r.ves_reward or 0.0 for r in scored]) if ves_computed else None,
        status_counts=counts,
    )


def build_report(mode: Mode, results: Sequence[QuestionResult], *, elapsed_s: float = 0.0,
                 ves_computed: bool = False) -> EvalReport:
    results = sorted(results, key=lambda r: r.index)
    by_level: dict[str, list[QuestionResult]] = {}
    for r in results:
        key = (r.hardness if mode == "spider" else r.difficulty) or "unknown"
        by_level.setdefault(key, []).append(r)
    level_order = ("easy", "medium", "hard", "extra") if mode == "spider" else ("simple", "moderate", "challenging")
    levels = [k for k in level_order if k in by_level] + sorted(k for k in by_level if k not in level_order)
    by_tables: dict[str, list[QuestionResult]] = {}
    for r in results:
        by_tables.setdefault(table_bucket(r.table_count) or "unknown", []).append(r)
    buckets = [b for b in TABLE_BUCKETS if b in by_tables] + (["unknown"] if "unknown" in by_tables else [])
    return EvalReport(
        mode=mode,
        per_question=tuple(results),
        totals=aggregate(results, ves_computed=ves_computed),
        by_difficulty={k: aggregate(by_level[k], ves_computed=ves_computed) for k in levels},
        by_tables={k: aggregate(by_tables[k], ves_computed=ves_computed) for k in buckets},
        elapsed_s=elapsed_s,
    )
