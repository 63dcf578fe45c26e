"""Datasets, runs and their evaluation (writes). The scoring itself is annotations.evaluation (no Django)."""

from __future__ import annotations

import csv
import io
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Count, Min, Q, Sum
from django.utils import timezone

from agent import services as agent_services
from agent.hygiene import clean_instance
from agent.metrics import f_nc
from agent.models import AgentSession, Database, LLMEndpoint, Turn
from agent.services import audit, handover, spend
from agent.services import locations as agent_locations
from agent.services import sessions as session_services
from agent.services.jobs import enqueue_on_commit
from agent.services.rows import instance_from_row
from agent.strategies import STRATEGIES, create_strategy
from agent.textclean import JSONTooDeep, clean_text, json_loads
from annotations import policies
from annotations.conf import annotations_settings
from annotations.evaluation import (
    EvalItem,
    GoldItem,
    PredictionFileTooLarge,
    evaluate,
    gold_stats,
    iter_bird_dev,
    iter_spider_dev,
    parse_bird_predictions,
    parse_spider_predictions,
)
from annotations.evaluation.runner import suite_files
from annotations.exemplars.selectors import few_shot_for_version
from annotations.labels.version import labels_changed
from annotations.models import ExemplarSetVersion
from annotations.runs.models import NO_PREDICTION, Dataset, DatasetQuestion, MissingPredictions, Run, RunItem
from annotations.runs.patches import patches_for
from annotations.runs.pools import pool_from_spec, question_key
from annotations.runs.sampling import new_seed, sample_questions

logger = logging.getLogger(__name__)
DISPATCH_TASK = "annotations.tasks.dispatch_run"
EVALUATE_TASK = "annotations.tasks.evaluate_run"


# --- datasets ---------------------------------------------------------------------------


def _iter_generic(path: Path) -> Iterator[GoldItem]:
    """JSONL or CSV with question, gold SQL (``sql``/``query``/``gold_sql``/``SQL``), database, optional evidence.

    Read as a stream (one line or CSV record at a time), so a file of any size takes constant memory;
    a malformed record raises ValidationError naming its line or record number.
    """
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        if path.suffix.lower() == ".csv":
            reader = csv.DictReader(handle)
            rows: Iterator[tuple[int, Any]] = ((reader.line_num, row) for row in reader)
        else:
            rows = _jsonl_rows(path, handle)
        try:
            for i, (lineno, row) in enumerate(rows):
                if not isinstance(row, dict):
                    raise ValidationError(f"{path.name}: line {lineno}: expected a JSON object")
                sql = next((row[k] for k in ("sql", "query", "gold_sql", "SQL") if row.get(k)), None)
                db_id = row.get("database") or row.get("db_id") or row.get("db")
                if not sql or not db_id or not row.get("question"):
                    raise ValidationError(f"{path.name}: record {i + 1}: needs question, gold SQL and database")
                yield GoldItem(index=i, db_id=str(db_id), sql=str(sql).strip(), question=str(row["question"]),
                               evidence=str(row.get("evidence") or ""), difficulty=row.get("difficulty"))
        except csv.Error as exc:
            raise ValidationError(f"{path.name}: record near line {reader.line_num}: {exc}") from None


def _jsonl_rows(path: Path, handle: Any) -> Iterator[tuple[int, Any]]:
    for lineno, line in enumerate(handle, start=1):
        if line.strip():
            try:
                yield lineno, json_loads(line)
            except JSONTooDeep as exc:
                raise ValidationError(f"{path.name}: line {lineno}: {exc}") from None
            except json.JSONDecodeError as exc:
                raise ValidationError(f"{path.name}: line {lineno}: not JSON ({exc.msg})") from None


def _layout(kind: str, path: Path) -> tuple[Callable[[], Iterable[GoldItem]], Path | None]:
    """A function giving the questions (read anew at each call) and the folder holding
    ``<db_id>/<db_id>.sqlite`` for the dataset at ``path``."""
    if kind == Dataset.Kind.SPIDER:
        dev = path / "dev.json" if path.is_dir() else path
        return lambda: iter_spider_dev(dev), dev.parent / "database"  # streamed, once per pass
    if kind == Dataset.Kind.BIRD:
        dev = path / "dev.json" if path.is_dir() else path
        if not dev.exists() and path.is_dir():
            dev = next(iter(sorted(path.glob("*.json*"))), dev)
        folder = next((dev.parent / d for d in ("dev_databases", "databases", "database")
                       if (dev.parent / d).is_dir()), None)
        return lambda: iter_bird_dev(dev), folder
    return lambda: _iter_generic(path), (path.parent / "database") if (path.parent / "database").is_dir() else None


def _descriptions(db_folder: Path) -> dict[tuple[str, str], str]:
    """BIRD's database_description/<table>.csv: column descriptions that feed SearchColumn."""
    out: dict[tuple[str, str], str] = {}
    for csv_path in sorted((db_folder / "database_description").glob("*.csv")):
        text = csv_path.read_bytes().decode("utf-8", errors="replace")
        for row in csv.DictReader(io.StringIO(text)):
            column = (row.get("original_column_name") or "").strip()
            desc = " ".join(filter(None, [(row.get("column_description") or "").strip(),
                                          (row.get("value_description") or "").strip()]))
            if column and desc:
                out[(csv_path.stem, column)] = desc
    return out


ImportProgress = Callable[[int, int], None]
IMPORT_BATCH = 2000


def dataset_import(*, kind: str, path: str | Path, name: str, register_databases: bool = True,
                   build_indexes: bool = True, progress: ImportProgress | None = None, user=None,
                   patches: Sequence[str] = (), repoint: bool = True) -> Dataset:
    """Import (or re-import, idempotently) a dataset and register its databases under their db_id.

    ``patches`` names optional corrections of its databases (``annotations.runs.patches``, e.g. Spider's
    ``flight_2`` foreign key); the dataset records them and each patched database carries its keys.

    Streaming and all-or-nothing: a JSONL/CSV file is read twice as a stream and never held in memory
    (a 1 M-line file imports in well under 200 MB). The first pass checks every record, so a malformed
    one (bad JSON, JSON nested deeper than ``agent.textclean.MAX_JSON_DEPTH``, a missing field) raises
    ``ValidationError`` naming its line before anything is written. The second pass writes questions
    in batches of ``IMPORT_BATCH``.

    ``progress(done, total)`` is called with ``(0, total)`` once the file is checked, then after every
    batch written, from the importing thread; e.g. a Celery task passes
    ``lambda done, total: self.update_state(state="PROGRESS", meta={"done": done, "total": total})``.

    On PostgreSQL the writes are one transaction. On the embedded SQLite app database each batch is
    its own short transaction, so logins and pages keep writing between batches (SQLite has one writer);
    a failure while writing a *new* dataset deletes it again, so nothing half-imported stays visible.

    ``user``: the account importing through the web; the folder must then be inside a data directory, with the
    same single refusal message as database registration (``agent/services/locations.py``).

    ``repoint=False`` (browser uploads) refuses a db_id already registered elsewhere instead of re-pointing it,
    so an upload can never move someone else's registration to its own file.
    """
    if user is not None:
        path = agent_locations.data_path(str(path))
    path = Path(path).expanduser().resolve()
    if kind not in Dataset.Kind.values:
        raise ValidationError(f"Unknown dataset kind {kind!r}; expected one of {', '.join(Dataset.Kind.values)}")
    try:
        chosen = patches_for(kind, list(patches))
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    fk_patches: dict[str, list[dict]] = {}
    for patch in chosen:
        fk_patches.setdefault(patch.db_id, []).extend(patch.key_dicts())
    if not path.exists():
        raise ValidationError(f"No such file or folder: {path}")
    try:
        items_of, db_root = _layout(kind, path)
        total = 0
        db_ids: set[str] = set()
        for item in items_of():  # first pass: check everything before writing anything
            total += 1
            db_ids.add(item.db_id)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValidationError(f"Cannot read {kind} data at {path}: {exc}") from None
    if progress:
        progress(0, total)
    if not repoint and register_databases and db_root is not None:
        taken = [db_id for db_id, location in Database.objects.filter(name__in=db_ids).values_list("name", "location")
                 if (db_root / db_id / f"{db_id}.sqlite").is_file()
                 and location != str((db_root / db_id / f"{db_id}.sqlite").resolve())]
        if taken:
            raise ValidationError(f"Databases already registered under these names: {', '.join(sorted(taken))}. "
                                  "Nothing was imported; rename them or ask a Data admin.")
    databases: dict[str, Database | None] = {}
    for db_id in sorted(db_ids):
        sqlite = db_root / db_id / f"{db_id}.sqlite" if db_root else None
        existing = Database.objects.filter(name=db_id).first()
        if sqlite is not None and sqlite.is_file() and register_databases:
            descriptions = {f"{t}.{c}": d for (t, c), d in _descriptions(sqlite.parent).items()}
            keys = fk_patches.get(db_id, [])
            if existing is None or existing.location != str(sqlite) or existing.column_descriptions != descriptions \
                    or (existing.foreign_key_patches or []) != keys:
                existing = agent_services.database_register(
                    name=db_id, location=str(sqlite), description=f"{kind} database {db_id}",
                    column_descriptions=descriptions, foreign_key_patches=keys,
                    refresh="sync" if build_indexes else "async", user=user)
        databases[db_id] = existing if existing is not None and (sqlite is None or sqlite.is_file()) else None
    embedded = connection.vendor == "sqlite"
    created = not Dataset.objects.filter(name=name).exists()
    try:
        with nullcontext() if embedded else transaction.atomic():
            dataset = _write_questions(kind, path, name, items_of, databases, total, progress,
                                       [p.name for p in chosen])
    except BaseException:
        if embedded and created:
            Dataset.objects.filter(name=name).delete()
        raise
    return dataset


def _write_questions(kind: str, path: Path, name: str, items_of: Callable[[], Iterable[GoldItem]],
                     databases: dict[str, Database | None], total: int,
                     progress: ImportProgress | None, patches: list[str]) -> Dataset:
    with transaction.atomic():
        dataset, _ = Dataset.objects.update_or_create(
            name=name, defaults={"kind": kind, "source_path": str(path), "patches": patches})
    stats_of = lru_cache(maxsize=8192)(lambda sql: gold_stats(sql, hardness=kind != Dataset.Kind.BIRD))
    done = 0
    for batch in _batched(items_of(), IMPORT_BATCH):
        with transaction.atomic():
            existing = dict(dataset.questions.filter(index__in=[i.index for i in batch]).values_list("index", "pk"))
            new = []
            for item in batch:
                stats = stats_of(item.sql)
                fields = {"db_id": item.db_id, "database": databases.get(item.db_id), "question": item.question,
                          "evidence": item.evidence or "", "gold_sql": item.sql,
                          "difficulty": item.difficulty or stats.hardness or "",
                          "table_count": stats.table_count, "join_count": stats.join_count}
                row = clean_instance(DatasetQuestion(dataset=dataset, index=item.index, **fields))
                if item.index in existing:
                    DatasetQuestion.objects.filter(pk=existing[item.index]).update(
                        **{f: getattr(row, f) for f in fields if f != "database"}, database=fields["database"])
                else:
                    new.append(row)
            DatasetQuestion.objects.bulk_create(new)
        done += len(batch)
        if progress:
            progress(done, total)
    with transaction.atomic():
        dataset.questions.filter(index__gte=total).delete()
        dataset.question_count = total
        dataset.executable_count = dataset.questions.filter(database__isnull=False).count()
        dataset.save()
    labels_changed()  # a re-import may change the database, difficulty or joins the label queues filter on
    return dataset


def _batched(items: Iterable[GoldItem], size: int) -> Iterator[list[GoldItem]]:
    batch: list[GoldItem] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def db_resolver_for(dataset: Dataset):
    """db_id -> every .sqlite file of its folder (Spider test suites hold several)."""
    locations = {q.db_id: q.database.location for q in
                 dataset.questions.select_related("database").filter(database__engine="sqlite")}
    return lambda db_id: suite_files(Path(locations[db_id]).parent) if db_id in locations else ()


# --- runs -------------------------------------------------------------------------------


def run_import_predictions(*, dataset: Dataset, text: str | Iterable[str], fmt: str, name: str, source_file: str = "",
                           user=None, evaluate_later: bool = False, missing: str | None = None) -> Run:
    """An external system's predictions as a Run. Malformed lines are kept as issues, the rest imported.

    A file with fewer predictions than the dataset has questions is never scored silently: the counts are
    stored (``config["predictions"]``) and ``missing`` says how the questions without a prediction count,
    ``"wrong"`` (in the denominator, as failed predictions) or ``"subset"`` (left out: only the given
    questions are scored). Without a choice such a run stays pending until ``run_choose_missing``.

    ``evaluate_later`` queues its evaluation after commit (the web upload); otherwise the caller evaluates.
    ``text``: the file's text, or an open text file (Spider's format is then read a line at a time).
    """
    if missing not in (None, *MissingPredictions.values):
        raise ValidationError(f"Unknown choice for missing predictions {missing!r}; expected wrong or subset")
    questions = {q.index: q for q in dataset.questions.all()}
    keep = questions.__contains__  # predictions past the questions are counted, never held
    try:
        if fmt == "spider":
            parsed = parse_spider_predictions(text, keep=keep)
        elif fmt == "bird":  # streamed a chunk at a time, with bounded entries
            parsed = parse_bird_predictions(text, keep=keep)
        else:
            raise ValidationError(f"Unknown prediction format {fmt!r}; expected spider or bird")
    except UnicodeDecodeError:
        raise ValidationError("The file is not UTF-8 text.") from None
    except PredictionFileTooLarge as exc:
        raise ValidationError(f"The file is refused, nothing was imported: {exc}.") from None
    except ValueError as exc:
        raise ValidationError(f"Not a {fmt.upper() if fmt == 'bird' else fmt.title()} prediction file: {exc}") from None
    by_index = parsed.by_index()
    issues = [{"line": i.line, "message": i.message} for i in parsed.issues]
    if parsed.ignored:
        issues.append({"line": 0, "message": f"{parsed.ignored} predictions past the dataset's "
                                             f"{len(questions)} questions were ignored"})
    given = [i for i in questions if i in by_index]
    if not given:  # nothing to score: a wrong file, not a short one (no run is stored)
        found = "; ".join(f"line {i['line']}: {i['message']}" for i in issues[:3])
        raise ValidationError(f"No prediction in the file matches a question of {dataset.name}"
                              + (f" ({found})." if found else "."))
    counts = {"questions": len(questions), "given": len(given), "missing": len(questions) - len(given),
              "malformed": sum(1 for i in given if by_index[i].sql is None), "extra": parsed.ignored}
    with transaction.atomic():
        run = Run.objects.create(name=name, dataset=dataset, source=Run.Source.IMPORTED, source_file=source_file,
                                 config={"format": fmt, "predictions": counts}, import_issues=issues,
                                 created_by=user)
        RunItem.objects.bulk_create([
            clean_instance(RunItem(run=run, question=q,
                    predicted_sql=(by_index[i].sql or "") if i in by_index else "",
                    prediction_note="" if i in by_index and by_index[i].sql is not None
                    else ("malformed line" if i in by_index else NO_PREDICTION)))
            for i, q in questions.items()
        ])
        if counts["missing"] and missing:
            run = run_choose_missing(run=run, choice=missing, evaluate_later=evaluate_later)
        elif evaluate_later and not counts["missing"]:
            run_evaluate_queue(run=run)
    return run


def run_awaits_missing_choice(run: Run) -> bool:
    """An imported run with questions the file does not predict, whose scoring choice is not made yet."""
    counts = (run.config or {}).get("predictions") or {}
    return run.source == Run.Source.IMPORTED and bool(counts.get("missing")) and not run.missing_predictions


def run_choose_missing(*, run: Run, choice: str, evaluate_later: bool = True) -> Run:
    """Record how a short prediction file's missing questions count, then (``evaluate_later``) queue scoring.

    ``subset`` removes the questions without a prediction from the run (it covers the given subset, as a
    sampled run of our strategies does); malformed lines stay in and count as failed predictions either way.
    """
    if choice not in MissingPredictions.values:
        raise ValidationError(f"Unknown choice {choice!r}; expected wrong or subset")
    if not run_awaits_missing_choice(run):
        raise ValidationError("This run has no missing predictions awaiting a choice.")
    with transaction.atomic():
        if choice == MissingPredictions.SUBSET:
            run.items.filter(predicted_sql="", prediction_note=NO_PREDICTION).delete()
        run.missing_predictions = choice
        run.save(update_fields=["missing_predictions"])
        if evaluate_later:
            run_evaluate_queue(run=run)
    return run


def run_evaluate_queue(*, run: Run) -> None:
    """Mark the run evaluating and queue its evaluation after commit."""
    if run_awaits_missing_choice(run):
        raise ValidationError("Choose first how the questions without a prediction are scored.")
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(status=Run.Status.EVALUATING)
        enqueue_on_commit(EVALUATE_TASK, run.pk)


def run_evaluate(*, run: Run, workers: int = 2) -> Run:
    """Score every item (execution accuracy, Soft-F1) and store per-question results and the breakdowns."""
    Run.objects.filter(pk=run.pk).update(status=Run.Status.EVALUATING)
    items = list(run.items.select_related("question"))
    eval_items = [EvalItem(index=it.question.index, db_id=it.question.db_id, gold_sql=it.question.gold_sql,
                           pred_sql=it.predicted_sql or None, difficulty=it.question.difficulty or None,
                           pred_note=it.prediction_note) for it in items]
    try:
        report = evaluate(eval_items, mode=run.dataset.eval_mode, db_resolver=db_resolver_for(run.dataset),
                          workers=workers, cache_dir=annotations_settings.GOLD_CACHE_DIR)
    except Exception as exc:  # the run keeps its predictions; the failure is shown on it
        logger.exception("evaluation of run %s failed", run.pk)
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED,
                                             error=clean_text(f"Evaluation failed: {exc}"))
        run.refresh_from_db()
        return run
    by_index = {r.index: r for r in report.per_question}
    feedback = _hdsp_feedback(items)
    for item in items:
        r = by_index[item.question.index]
        item.eval_status, item.ex, item.soft_f1 = r.status.value, r.ex, r.soft_f1
        item.error, item.gold_rows, item.pred_rows, item.pred_ms = r.error[:2000], r.gold_rows, r.pred_rows, r.pred_ms
        item.f_nc = round(f_nc(item.predicted_sql, item.question.gold_sql), 4) if item.predicted_sql else None
        item.f_sc = feedback.get(item.session_id)
        clean_instance(item)
    RunItem.objects.bulk_update(items, ["eval_status", "ex", "soft_f1", "error", "gold_rows", "pred_rows",
                                        "pred_ms", "f_nc", "f_sc"], batch_size=500)
    run.totals = _aggregate_dict(report.totals)
    run.breakdowns = {"difficulty": {k: _aggregate_dict(v) for k, v in report.by_difficulty.items()},
                      "tables": {k: _aggregate_dict(v) for k, v in report.by_tables.items()}}
    run.status, run.error, run.evaluated_at = Run.Status.DONE, "", timezone.now()
    run.save(update_fields=["totals", "breakdowns", "status", "error", "evaluated_at"])
    labels_changed()  # the failures changed: what blind queues hide, which labels count
    return run


def _hdsp_feedback(items: Sequence[RunItem]) -> dict[int, int]:
    """f_sc from the last feedback turn of each HDSP session (the LLM's expected answer type vs the result)."""
    session_ids = [i.session_id for i in items if i.session_id]
    out: dict[int, int] = {}
    for turn in Turn.objects.filter(session_id__in=session_ids, kind="feedback").order_by("session_id", "index"):
        if isinstance(turn.extra, dict) and turn.extra.get("f_sc") is not None:
            out[turn.session_id] = int(turn.extra["f_sc"])
    return out


def _aggregate_dict(agg) -> dict[str, Any]:
    return {"questions": agg.questions, "scored": agg.scored, "correct": agg.correct, "ex": agg.ex,
            "soft_f1": agg.soft_f1, "status_counts": dict(agg.status_counts)}


def questions_for(dataset: Dataset, *, db_ids: Sequence[str] = (), limit: int | None = None, sample: str = "first",
                  seed: int | None = None) -> list[DatasetQuestion]:
    """The questions a run covers (``annotations.runs.sampling``): all, the first ``limit``, or a seeded random
    ``limit`` of them."""
    try:
        return sample_questions(dataset.questions.all(), db_ids=db_ids, limit=limit, mode=sample, seed=seed)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


# --- runs of our own strategies -------------------------------------------------------------

DEFAULT_RUN_CONCURRENCY = 4
UNFINISHED_SESSION = ("queued", "running")
RETRYABLE_SESSION = ("failed", "llm_error", "cancelled")


def run_create_agent(*, dataset: Dataset, name: str, strategy: str = "interactive_t2s",
                     options: dict | None = None, exemplar_set_version=None, zero_shot: bool = False,
                     paper_replica: bool = False, user=None,
                     db_ids: Sequence[str] = (), limit: int | None = None, max_concurrency: int | None = None,
                     spend_cap: float | None = None, pool: str | None = None, sample: str = "first",
                     seed: int | None = None) -> Run:
    """A run of one of our strategies over (a sample of) a dataset: one agent session per question.

    ``pool`` (see ``annotations.runs.pools``) is the example pool of retrieving strategies; it is resolved
    and stored once, recorded in the run's snapshot, and each session leaves its own question out.
    Without a chosen exemplar set the Interactive-T2S agent gets the paper's set for the dataset (Spider;
    BIRD with or without evidence as ``options["use_evidence"]`` says), unless ``zero_shot``.

    ``sample``: with a ``limit``, ``"first"`` N questions or a ``"random"`` N drawn with ``seed`` (one is drawn
    and stored when none is given), so the same sample can be run again.

    Sessions are started by ``run_dispatch`` a few at a time (the endpoint's concurrency limit), so a
    1000-question run does not flood the LLM; a spend cap stops starting new ones once reached.
    """
    if strategy not in STRATEGIES:
        raise ValidationError({"strategy": [f"Unknown strategy; choose one of {', '.join(sorted(STRATEGIES))}."]})
    if paper_replica:
        if strategy != session_services.DEFAULT_EXEMPLARS_STRATEGY or zero_shot:
            raise ValidationError("The paper-replica preset is the Interactive-T2S agent with the paper's exemplars.")
        options = {**dict(options or {}), **session_services.PAPER_REPLICA_OPTIONS}
    endpoint = session_services.default_llm_endpoint()
    if endpoint is None:
        raise ValidationError({"llm": ["No LLM endpoint is configured (see README)."]})
    session_services.check_option_types(strategy, options or {})
    try:
        defaults = create_strategy(strategy, {}).config.to_dict()
        create_strategy(strategy, spend.bounded_options(options or {}, endpoint=endpoint, defaults=defaults))
    except (TypeError, ValueError) as exc:
        raise ValidationError({"options": [str(exc)]}) from None
    if sample == "random" and limit and seed is None:
        seed = new_seed()
    questions = questions_for(dataset, db_ids=db_ids, limit=limit, sample=sample, seed=seed)
    if not questions:
        raise ValidationError("No question matches this selection.")
    pool_snapshot = None
    if pool:
        # Through the web and the API, a pool is drawn only from datasets and runs the launcher may see.
        source, examples = (pool_from_spec(pool) if user is None else
                            pool_from_spec(pool, datasets=policies.visible_datasets(user),
                                           runs=policies.visible_runs(user)))
        stored = session_services.example_pool_store(source=source, examples=examples)
        pool_snapshot = {**session_services.example_pool_snapshot(stored), "spec": pool}
    concurrency = spend.run_concurrency(max_concurrency, endpoint=endpoint)
    choice = "chosen" if exemplar_set_version is not None else "zero-shot"
    if exemplar_set_version is None and not zero_shot and strategy == session_services.DEFAULT_EXEMPLARS_STRATEGY:
        from annotations.exemplars.paper_sets import default_version

        exemplar_set_version = default_version(dataset=dataset,
                                               use_evidence=bool((options or {}).get("use_evidence", True)))
        choice = "default" if exemplar_set_version is not None else "zero-shot (no paper set published)"
    with transaction.atomic():
        run = Run.objects.create(
            name=name, dataset=dataset, source=Run.Source.AGENT, strategy=strategy, status=Run.Status.RUNNING,
            created_by=user,
            config={"options": dict(options or {}), "llm": session_services.llm_snapshot(endpoint),
                    "exemplar_set_version": exemplar_set_version.pk if exemplar_set_version else None,
                    "exemplars_choice": choice, "preset": "paper-replica" if paper_replica else None,
                    "max_concurrency": concurrency, "spend_cap": spend_cap, "example_pool": pool_snapshot,
                    "sample": {"db_ids": list(db_ids), "limit": limit,
                               "mode": sample if limit and sample != "all" else "all",
                               "seed": seed if limit and sample == "random" else None}})
        RunItem.objects.bulk_create([
            RunItem(run=run, question=q, prediction_note="" if q.database_id else "database not available here")
            for q in questions])
        audit.record(action=audit.Action.RUN_LAUNCH, target_type="run", target=run.name, target_id=run.pk,
                     actor=user, details={"dataset": dataset.name, "strategy": strategy, "questions": len(questions),
                                          "endpoint": run.config["llm"].get("endpoint"),
                                          "model": run.config["llm"].get("model"),
                                          "max_concurrency": concurrency, "spend_cap": spend_cap})
        _dispatch_after_commit(run)
    return run


def _dispatch_after_commit(run: Run) -> None:
    enqueue_on_commit(DISPATCH_TASK, run.pk)


@lru_cache(maxsize=16)
def _version_few_shot(version_id: int):
    """A published exemplar set version as session data, once per process (versions are immutable)."""
    found = ExemplarSetVersion.objects.select_related("exemplar_set").filter(pk=version_id).first()
    return few_shot_for_version(found) if found is not None else None


# A database still being introspected or indexed (just imported) is waited for, not failed.
_PREPARING_STATUS = (Database.Status.PENDING, Database.Status.INTROSPECTING)
_PREPARING_INDEX = (Database.IndexStatus.QUEUED, Database.IndexStatus.BUILDING)


def run_dispatch(*, run: Run) -> bool:
    """Collect finished sessions' predictions, start sessions up to the run's concurrency, and queue the
    evaluation once nothing is left. Returns True while the run still has work in flight.

    Called by the ``dispatch_run`` poll (a safety net, and the launch) and, through ``run_session_finished``,
    when one of the run's sessions ends. Its cost does not grow with the run: it reads the items that hold a
    session not yet collected (at most the concurrency) and the next waiting ones, never the JSON columns,
    and writes in bulk. The run's row is locked for the pass, so two dispatchers of one run (a poll and a
    finished session, in any workers) never start more than the concurrency.
    """
    more = _dispatch(run.pk, wait=True)
    return True if more is None else more


# A finished session fills its slot only once this share of the slots its run holds is free, and at most
# DISPATCH_BATCH_MAX (1 slot up to 7 held, 2 up to 11, 3 up to 15, then 4): a pass then starts several sessions
# for little more than the cost of one. The last session in flight always passes.
DISPATCH_BATCH_SHARE = 4
DISPATCH_BATCH_MAX = 4
# ... and a free slot waits that long at most for the others: then it is filled alone. Without the bound, the
# last session of a wave of an LLM-bound run (sessions in step, ending within a second of each other) left its
# slot empty until the next wave ended, 3 s later: one question ran a whole session late and bench-runs step 3
# fell from 91-93 % to 81-82 % of its ideal in about one run in three (2026-11-25), and probably why batches
# of 8 had given 67 % there. Bounded, batches of 4 halved step 2's passes (578 -> 345) and cost step 3 nothing.
DISPATCH_BATCH_WAIT_S = 0.05
# How many times a finished session's thread tries to fill its slot when another pass holds the run (then the
# run's poll is the safety net).
DISPATCH_SKIPPED_TRIES = 4


# Runs that a thread of this process is passing over (run id -> such threads). A finished session whose run
# is in here leaves at once, as one that finds the run's row locked does, without asking the database: in
# bench-runs most finished sessions that wanted a pass found it held by a sibling thread of the same worker,
# and learning it from the database (a transaction and a locking read) cost each about 0.35 ms of CPU.
_passing: dict[int, int] = {}
_passing_lock = threading.Lock()
# The run of each session this process's passes started: when it finishes while a sibling thread passes over
# that run, it leaves without even counting (the holder counts after its pass, and sees its end, committed
# before). Two in three finished sessions of bench-runs' step 2 found a sibling passing. Bounded: a session
# that never finishes here (re-delivered elsewhere) only loses the shortcut when the map is cleared.
_started_runs: dict[int, int] = {}
_STARTED_RUNS_MAX = 100_000


def _dispatch(run_id: int, *, wait: bool) -> bool | None:
    """Passes over the run until no finished session is left behind by a pass that skipped its own: whether
    work is still in flight, or None when a pass was skipped for another thread or worker holding the run.

    ``wait=False`` (a finished session): when another thread or worker holds the run for a pass, return at
    once instead of queueing up behind it. The holder looks again once it has let go of the run (in this
    process and in the database), with the same rule as a finished session (``_needs_pass``), and passes
    again if a batch is waiting: a session whose own pass was skipped had committed its end before it looked
    for a holder, so that look sees it.
    """
    while True:
        with _passing_lock:
            if not wait and _passing.get(run_id):
                return None  # a sibling thread holds the run; it looks again after its pass
            _passing[run_id] = _passing.get(run_id, 0) + 1
        try:
            more = _dispatch_pass(run_id, skip_locked=not wait)
        finally:
            with _passing_lock:
                if _passing[run_id] == 1:
                    del _passing[run_id]
                else:
                    _passing[run_id] -= 1
        if more is None:
            return None  # another process holds the run; it looks again after its pass
        if not more or _needs_pass(run_id=run_id) is None:
            return more
        wait = False


def _needs_pass(*, run_id: int | None = None, session_id: int | None = None) -> int | None:
    """The run (given, or the session's) when its finished, uncollected sessions make a batch (or are all it
    holds, or free a slot for each question still waiting), else None. One read, without the run's lock."""
    slots = _free_slots(run_id=run_id, session_id=session_id)
    return None if slots is None or slots[1] else slots[0]


def _free_slots(*, run_id: int | None = None, session_id: int | None = None) -> tuple[int, bool] | None:
    """(the run, given or the session's; whether its finished, uncollected sessions are short of a batch
    that questions wait for) when they make a pass worth it now or after a wait, else None. (No question
    waiting: finished sessions are only to collect, and that waits for a batch or the run's last session.)
    One read, without the run's lock.

    Written in SQL: it runs once per finished session, and the ORM took about 1 ms of CPU to build it, ten
    times what the database took to answer. The literal empty strings let PostgreSQL use the partial index
    of uncollected items (``runitem_uncollected``).
    """
    with connection.cursor() as cursor:
        if run_id is not None:
            cursor.execute(_count_sql("%s"), [run_id])
        else:
            cursor.execute(_count_sql(f"(SELECT run_id FROM {RunItem._meta.db_table} WHERE session_id = %s LIMIT 1)"),
                           [session_id])
        row = cursor.fetchone()
    if row is None:
        return None  # not a run's session, or nothing of its run is in flight
    found, held, finished, waiting = row
    finished = int(finished or 0)
    if not finished:
        return None
    batch = max(1, min(DISPATCH_BATCH_MAX, held // DISPATCH_BATCH_SHARE))
    # Fewer questions waiting than a batch (the last ones): a free slot is enough. Waiting for a second one
    # left the last question of an LLM-bound run idle for a whole session (bench-runs step 3: 77 % instead of
    # 85-87 % of its ideal in the runs where it happened).
    if finished >= held or finished >= batch or 0 < waiting < batch:
        return found, False
    return (found, True) if waiting else None


@lru_cache(maxsize=2)
def _count_sql(run: str) -> str:
    # Built once, with the unfinished statuses as literals (constants of this module): two parameters fewer to
    # quote at every finished session (about 0.03 of 0.1 ms of CPU). The questions still waiting are counted
    # up to a batch only, so the count does not grow with the run.
    statuses = ", ".join(f"'{status}'" for status in UNFINISHED_SESSION)
    items = RunItem._meta.db_table
    return (f"WITH r AS (SELECT {run} AS id) "
            f"SELECT r.id, COUNT(*), SUM(CASE WHEN s.status IN ({statuses}) THEN 0 ELSE 1 END), "
            f"(SELECT COUNT(*) FROM (SELECT 1 FROM {items} w WHERE w.run_id = r.id AND w.session_id IS NULL "
            f"AND w.predicted_sql = '' AND w.prediction_note = '' LIMIT {int(DISPATCH_BATCH_MAX)}) AS w) "
            f"FROM r JOIN {items} i ON i.run_id = r.id AND i.predicted_sql = '' AND i.prediction_note = '' "
            f"JOIN {AgentSession._meta.db_table} s ON s.id = i.session_id GROUP BY r.id")


def _dispatch_pass(run_id: int, *, skip_locked: bool) -> bool | None:
    """One pass under the run's lock: whether work is still in flight; None when ``skip_locked`` found the
    run held by another dispatcher."""
    with transaction.atomic():
        locked = _locked_run(run_id, skip_locked=skip_locked)
        if locked is None:
            # SKIP LOCKED found no row: held by another dispatcher (or deleted: nothing to do either way).
            return None if skip_locked and connection.features.has_select_for_update_skip_locked else False
        run, stale_mark, endpoint = locked
        if run.status != Run.Status.RUNNING:
            return False
        if stale_mark:
            # What the revival sweep reads; at most one write a second however often sessions finish.
            Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())
        in_flight = _in_flight(run.pk)
        labels = _SESSION_LABELS
        done = [_ItemWrite(pk, session_id, final_sql, "" if final_sql else f"agent: {labels.get(status, status)}")
                for pk, session_id, status, final_sql in in_flight if status not in UNFINISHED_SESSION]
        active = len(in_flight) - len(done)
        cap = run.config.get("spend_cap")
        if cap is not None:
            spent = run.items.filter(session__isnull=False).aggregate(s=Sum("session__cost"))["s"] or 0
            if spent >= cap:
                _waiting(run.pk).update(prediction_note=f"not run: spend cap ${cap:g} reached")
        capacity = max(0, run.config.get("max_concurrency", DEFAULT_RUN_CONCURRENCY) - active)
        started: list[_ItemWrite] = []
        refused: list[_ItemWrite] = []
        if capacity:
            with handover.passing(run.pk):  # threads of this process waiting on the run get one each
                started, refused = _start_sessions(run, _next_waiting(run.pk, capacity), endpoint)
            if len(_started_runs) > _STARTED_RUNS_MAX:
                _started_runs.clear()
            _started_runs.update((item.session_id, run.pk) for item in started)
        _write_items(done + started + refused)
        if active + len(started) or _waiting(run.pk).exists():
            return True
        run_evaluate_queue(run=run)
    return False


_SESSION_LABELS = dict(AgentSession.Status.choices)  # what a collected item's note names (read at every pass)


def _locked_run(run_id: int, *, skip_locked: bool) -> tuple[Run, bool, tuple] | None:
    """The run's row locked for the pass (``FOR UPDATE``, ``SKIP LOCKED`` when asked; SQLite has one writer),
    with only what a pass reads of it (status, strategy, config, launcher; the rest deferred), whether its
    ``dispatched_at`` is older than a second, and the columns of the LLM endpoint record its snapshot names
    (``session_services.endpoint_columns``; all NULL when there is none). None: no row (or, skipping, a row held
    by another dispatcher).

    Written in SQL, one statement that locks and reads both: it runs at every pass, and the ORM's locking read
    took about 0.75 ms of CPU to build against 0.14 ms for this one (most of which is the config's JSON); the
    endpoint was a statement of its own, 0.1-0.15 ms of CPU a pass.
    """
    lock = ""
    if connection.features.has_select_for_update:
        lock = " FOR UPDATE OF r"  # the run only (the endpoint is on the nullable side of the join)
        if skip_locked and connection.features.has_select_for_update_skip_locked:
            lock += " SKIP LOCKED"
    # Compared in SQL: SQLite hands a raw cursor text for datetimes; its stored format sorts as time does.
    cutoff = connection.ops.adapt_datetimefield_value(timezone.now() - timedelta(seconds=1))
    with connection.cursor() as cursor:
        cursor.execute(_locked_run_sql(lock), [cutoff, run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    (status, strategy, config, created_by_id, stale_mark), endpoint = row[:5], row[5:]
    run = instance_from_row(Run, {"id": run_id, "status": status, "strategy": strategy, "config": config,
                                  "created_by_id": created_by_id})
    if created_by_id is not None:
        # Whose budget the sessions count to: only its id is read (budgets look up by account).
        run.created_by = instance_from_row(get_user_model(), {"id": created_by_id})
    return run, bool(stale_mark), endpoint


@lru_cache(maxsize=4)
def _locked_run_sql(lock: str) -> str:
    endpoints, name = LLMEndpoint._meta.db_table, connection.ops.quote_name(LLMEndpoint._meta.get_field("name").column)
    # The endpoint's name in the run's LLM snapshot (run_create_agent's config["llm"]["endpoint"]).
    snapshot_name = ("r.config -> 'llm' ->> 'endpoint'" if connection.vendor == "postgresql"
                     else "json_extract(r.config, '$.llm.endpoint')")
    return (f"SELECT r.status, r.strategy, r.config, r.created_by_id, "
            f"(r.dispatched_at IS NULL OR r.dispatched_at < %s), {session_services.endpoint_columns('e')} "
            f"FROM {Run._meta.db_table} r LEFT JOIN {endpoints} e ON e.{name} = {snapshot_name} "
            f"WHERE r.id = %s{lock}")


@dataclass(slots=True)
class _ItemWrite:
    """What a pass writes of an item: its prediction and note once collected, its session once started; and, for
    an item to start, its question. A plain record: a RunItem instance cost a model's __init__ over its twenty
    fields, twice for each session of a run (started, then collected)."""

    pk: int
    session_id: int | None = None
    predicted_sql: str = ""
    prediction_note: str = ""
    question: DatasetQuestion | None = None


def _waiting(run_id: int):
    """The run's items waiting for a session (a database still preparing included)."""
    return RunItem.objects.filter(run_id=run_id, predicted_sql="", prediction_note="", session__isnull=True,
                                  question__database__isnull=False).order_by()


# What starting a session reads of an item's question and database (a database's schema is tens of kB).
_QUESTION_FIELDS = ("id", "dataset_id", "index", "database_id", "question", "evidence", "gold_sql")
_DATABASE_FIELDS = ("id", "name", "status", "index_status")


def _next_waiting(run_id: int, limit: int) -> list[_ItemWrite]:
    """The next ``limit`` waiting items, in question order (the items' primary key: created in that order),
    whose database is ready to start on, with their question and database (only what a session's start
    reads; the rest loads if used).

    Written in SQL: the ORM's query with its joins and deferred columns took about 1 ms of CPU to build at
    every pass, several times what the database took to answer. The literal empty strings let PostgreSQL use
    the partial index of uncollected items (``runitem_uncollected``).
    """
    sql, question_fields, database_fields = _next_waiting_sql()
    with connection.cursor() as cursor:
        cursor.execute(sql, [run_id, *_PREPARING_STATUS, *_PREPARING_INDEX, limit])
        rows = cursor.fetchall()
    items, databases = [], {}
    split = len(question_fields)
    for item_id, *values in rows:
        question = instance_from_row(DatasetQuestion, {f.attname: v for f, v in
                                                       zip(question_fields, values[:split], strict=True)})
        if question.database_id not in databases:  # one instance per database (its checks run once a pass)
            databases[question.database_id] = instance_from_row(
                Database, {f.attname: v for f, v in zip(database_fields, values[split:], strict=True)})
        question.database = databases[question.database_id]
        items.append(_ItemWrite(item_id, question=question))
    return items


@lru_cache(maxsize=1)
def _next_waiting_sql() -> tuple[str, list[Any], list[Any]]:
    """The statement (built once) and the question's and database's fields it reads, in its order."""
    qn = connection.ops.quote_name
    question_fields = [f for f in DatasetQuestion._meta.concrete_fields if f.attname in _QUESTION_FIELDS]
    database_fields = [f for f in Database._meta.concrete_fields if f.attname in _DATABASE_FIELDS]
    columns = ", ".join([*(f"q.{qn(f.column)}" for f in question_fields),
                         *(f"d.{qn(f.column)}" for f in database_fields)])
    return (f"SELECT i.id, {columns} FROM {RunItem._meta.db_table} i "
            f"JOIN {DatasetQuestion._meta.db_table} q ON q.id = i.question_id "
            f"JOIN {Database._meta.db_table} d ON d.id = q.database_id "
            f"WHERE i.run_id = %s AND i.session_id IS NULL AND i.predicted_sql = '' AND i.prediction_note = '' "
            f"AND d.status NOT IN (%s, %s) AND d.index_status NOT IN (%s, %s) ORDER BY i.id LIMIT %s",
            question_fields, database_fields)


def _in_flight(run_id: int) -> list[tuple[int, int, str, str]]:
    """(item id, session id, session status, final SQL) of the run's items holding a session not yet collected.

    Written in SQL, as the two statements below: they run at every pass, and the ORM spent more CPU building
    them (and Django's bulk_update its CASE expressions, one object per item and field) than the database
    spent answering them. The literal empty strings let PostgreSQL use ``runitem_uncollected``.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT i.id, i.session_id, s.status, s.final_sql FROM {RunItem._meta.db_table} i "
            f"JOIN {AgentSession._meta.db_table} s ON s.id = i.session_id "
            f"WHERE i.run_id = %s AND i.predicted_sql = '' AND i.prediction_note = ''", [run_id])
        return cursor.fetchall()


def _write_items(items: list[_ItemWrite]) -> None:
    """The pass's collected, started and refused items (prediction, note, session) in one UPDATE.

    The ids (integers read from the database) are written into the statement: as parameters, each was quoted
    three times over at every pass; the texts stay parameters."""
    if not items:
        return
    ids = [str(int(item.pk)) for item in items]
    sessions = [str(int(item.session_id)) if item.session_id is not None else "NULL" for item in items]
    # CAST: a column of NULLs (no refused item has a session) has no type of its own on PostgreSQL.
    sets = [f"{column} = CAST(CASE id {' '.join(f'WHEN {pk} THEN %s' for pk in ids)} END AS TEXT)"
            for column in ("predicted_sql", "prediction_note")]
    cases = " ".join(f"WHEN {pk} THEN {session}" for pk, session in zip(ids, sessions, strict=True))
    sets.append(f"session_id = CAST(CASE id {cases} END AS BIGINT)")
    params = [item.predicted_sql for item in items] + [item.prediction_note for item in items]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {RunItem._meta.db_table} SET {', '.join(sets)} WHERE id IN ({', '.join(ids)})",
                       params)


def _start_sessions(run: Run, items: list[_ItemWrite],
                    endpoint_record: tuple) -> tuple[list[_ItemWrite], list[_ItemWrite]]:
    """A session for each item (in the caller's transaction: queued once it commits): the items started and
    those refused (with the reason as their note), for the caller to write."""
    if not items:
        return [], []
    version_id = run.config.get("exemplar_set_version")
    version = _version_few_shot(version_id) if version_id else None
    example_pool = None
    if run.config.get("example_pool"):
        from agent.models import ExamplePool

        example_pool = ExamplePool.objects.defer("examples").get(pk=run.config["example_pool"]["id"])
    # The LLM recorded when the run was launched, not whatever this worker's environment says.
    endpoint = session_services.endpoint_from_snapshot(run.config["llm"], record=endpoint_record)
    specs = []
    for item in items:
        options = dict(run.config.get("options") or {})
        if run.strategy == "hdsp":
            options["gold_sql"] = item.question.gold_sql  # HDSP's feedback mode compares with the gold (paper)
        specs.append(session_services.SessionSpec(
            database=item.question.database, question=item.question.question, evidence=item.question.evidence,
            options=options, question_key=question_key(item.question) if example_pool is not None else None))
    # One INSERT for the pass's sessions, each checked as session_create checks one; queued once this commits.
    created = session_services.session_create_many(
        specs=specs, strategy=run.strategy, endpoint=endpoint, few_shot=version, example_pool=example_pool,
        billed_to=run.created_by,  # the run's spend counts to its launcher's daily budget
        zero_shot=version is None)  # the run resolved its set (or none) when it was created
    started, refused = [], []
    for item, outcome in zip(items, created, strict=True):
        if isinstance(outcome, ValidationError):
            item.prediction_note = "not run: " + " ".join(outcome.messages)
            refused.append(item)
        else:
            item.session_id = outcome.pk
            started.append(item)
    return started, refused


def run_session_finished(*, session_id: int) -> None:
    """A session ended: if it belongs to a running run, collect it and fill its slot, once a few are free
    (or once this thread has waited ``DISPATCH_BATCH_WAIT_S`` for a second one)."""
    started_by = _started_runs.pop(session_id, None)
    if started_by is not None:
        with _passing_lock:
            sibling = bool(_passing.get(started_by))
        if sibling:
            # A sibling thread passes over its run, and counts again after its pass: that pass, or the next,
            # may hand this thread a session. If none comes, the slot is counted below as after a wait.
            if handover.wait_for_pass(started_by, DISPATCH_BATCH_WAIT_S):
                return
            return _fill_slot(_free_slots(run_id=started_by), waited=True)
    # Each finished session committed its end before this read, so the last of several finishing at once
    # counts them all: a batch is never left waiting for a session that has already finished. A session this
    # process started names its run: counted without looking the run up by the session.
    _fill_slot(_free_slots(session_id=session_id) if started_by is None else _free_slots(run_id=started_by),
               waited=False)


def _fill_slot(slots: tuple[int, bool] | None, *, waited: bool) -> None:
    if slots is None:
        return  # not a run's session, collected already, or nothing to start (collected with a batch later)
    run_id, short = slots
    if short and not waited:
        # A free slot short of a batch: a session ending meanwhile passes for both, and may hand this thread
        # one of the sessions it starts; else, after the wait, the slot is filled alone.
        if handover.wait_for_pass(run_id, DISPATCH_BATCH_WAIT_S):
            return
        slots = _free_slots(run_id=run_id)
        if slots is None:
            return
    with handover.filling_slot():  # this thread may run one of the sessions the pass starts
        for tries_left in range(DISPATCH_SKIPPED_TRIES - 1, -1, -1):
            if _dispatch(run_id, wait=False) is not None:
                return
            # Another thread or worker was passing over the run. Its pass may not have counted this slot, and
            # its look afterwards leaves a slot short of a batch: wait for it to hand this thread a session,
            # else fill the slot (bench-runs step 3: a wave's last slot was otherwise left for the next wave).
            # No count after the last wait: nothing would act on it.
            if (handover.wait_for_pass(run_id, DISPATCH_BATCH_WAIT_S) or not tries_left
                    or _free_slots(run_id=run_id) is None):
                return


def runs_revive_dispatch(*, idle_s: float = 30) -> list[int]:
    """Agent runs nobody dispatched for a while (a lost wake-up, a dead worker): dispatch them again."""
    cutoff = timezone.now() - timedelta(seconds=idle_s)
    stale = list(Run.objects.filter(source=Run.Source.AGENT, status=Run.Status.RUNNING)
                 .filter(Q(dispatched_at__lt=cutoff) | Q(dispatched_at__isnull=True))
                 .values_list("pk", flat=True))
    for pk in stale:
        enqueue_on_commit(DISPATCH_TASK, pk, robust=True)  # a broker that is away: the next sweep tries again
    return stale


def run_cancel(*, run: Run) -> Run:
    Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(status=Run.Status.CANCELLED)
    for item in run.items.select_related("session").filter(session__status__in=UNFINISHED_SESSION):
        session_services.session_cancel(session=item.session)
    run.refresh_from_db()
    return run


def run_resume(*, run: Run) -> Run:
    """Start again only what is missing: questions never run, and those whose session failed or was cancelled."""
    retry = run.items.filter(predicted_sql="").filter(
        Q(session__isnull=True) | Q(session__status__in=RETRYABLE_SESSION))
    retried = retry.update(session=None, prediction_note="", eval_status="", ex=None)
    labels_changed()  # the retried questions are no longer failures (a blind queue no longer holds them)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, error="")
    run.refresh_from_db()
    audit.record(action=audit.Action.RUN_RESUME, target_type="run", target=run.name, target_id=run.pk,
                 details={"questions": retried})
    _dispatch_after_commit(run)
    return run


def run_progress(*, run: Run) -> dict[str, Any]:
    """Done / total, and an ETA from the completion rate observed so far.

    The rate is the number of sessions finished since the run's first one started, over that time: it
    includes the real concurrency, queueing and LLM latency, which an estimate from session times and
    the configured concurrency does not (that one read 10x too low).
    """
    agg = run.items.aggregate(
        total=Count("id"),
        finished=Count("id", filter=~Q(predicted_sql="") | ~Q(prediction_note="")),
        active=Count("id", filter=Q(session__status__in=UNFINISHED_SESSION)),
        sessions_done=Count("id", filter=Q(session__finished_at__isnull=False)),
        first_start=Min("session__started_at"))
    remaining = agg["total"] - agg["finished"]
    eta = None
    if remaining and agg["sessions_done"] and agg["first_start"]:
        elapsed = (timezone.now() - agg["first_start"]).total_seconds()
        if elapsed > 0:
            eta = remaining / (agg["sessions_done"] / elapsed)
    agg["percent"] = round(100 * agg["finished"] / agg["total"]) if agg["total"] else 100
    agg["eta_s"] = eta
    return agg
