"""Dataset import: questions streamed from Spider, BIRD, JSONL or CSV files, databases registered by db_id."""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction

from agent import policies as agent_policies
from agent import services as agent_services
from agent.hygiene import clean_instance
from agent.models import Database, names_unavailable
from agent.services import locations as agent_locations
from agent.textclean import JSONTooDeep, json_loads
from annotations.evaluation import (
    GoldItem,
    gold_stats,
    iter_bird_dev,
    iter_spider_dev,
)
from annotations.evaluation.runner import suite_files
from annotations.labels.version import labels_changed
from annotations.runs.models import Dataset, DatasetQuestion
from annotations.runs.patches import patches_for

logger = logging.getLogger(__name__)

def iter_generic(path: Path) -> Iterator[GoldItem]:
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
    return lambda: iter_generic(path), (path.parent / "database") if (path.parent / "database").is_dir() else None


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
                   patches: Sequence[str] = (), repoint: bool = True, workspace=None) -> Dataset:
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
    so an upload can never move someone else's registration to its own file. It attaches to a database already
    registered under the db_id instead when ``user`` sees that database (a grant or its workspace) and the
    uploaded file has the same tables and columns; a db_id without a file attaches to the registered database
    the same way (``user=None``, the command: any registered one), so its questions are executable.

    ``workspace``: the dataset and the databases it registers go there; its members see them.
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
    usable = Database.objects.all() if user is None else agent_policies.visible_databases(user)
    attached: set[str] = set()
    if not repoint and register_databases and db_root is not None:
        taken, differ = [], []
        for existing in Database.objects.filter(name__in=db_ids):
            sqlite = db_root / existing.name / f"{existing.name}.sqlite"
            if not sqlite.is_file() or existing.location == str(sqlite.resolve()):
                continue
            if not usable.filter(pk=existing.pk).exists():
                taken.append(existing.name)
            elif not agent_services.schema_matches(database=existing, sqlite_path=sqlite):
                differ.append(existing.name)
            else:
                attached.add(existing.name)  # the same database, registered already: the upload's copy is unused
        if taken:  # held by databases this user cannot see: said as if they did not exist
            raise ValidationError(names_unavailable(taken))
        if differ:
            raise ValidationError(f"Registered under these names with other tables or columns than the uploaded "
                                  f"files: {', '.join(sorted(differ))}. Nothing was imported; rename them or ask a "
                                  "Data admin.")
    databases: dict[str, Database | None] = {}
    for db_id in sorted(db_ids):
        sqlite = db_root / db_id / f"{db_id}.sqlite" if db_root else None
        existing = Database.objects.filter(name=db_id).first()
        if db_id in attached or ((sqlite is None or not sqlite.is_file()) and existing is not None):
            # No file of its own (or the same schema as the registered one): the registered database, if usable.
            databases[db_id] = existing if usable.filter(pk=existing.pk).exists() else None
            continue
        if sqlite is not None and sqlite.is_file() and register_databases:
            descriptions = {f"{t}.{c}": d for (t, c), d in _descriptions(sqlite.parent).items()}
            keys = fk_patches.get(db_id, [])
            if existing is None or existing.location != str(sqlite) or existing.column_descriptions != descriptions \
                    or (existing.foreign_key_patches or []) != keys:
                existing = agent_services.database_register(
                    name=db_id, location=str(sqlite), description=f"{kind} database {db_id}",
                    column_descriptions=descriptions, foreign_key_patches=keys,
                    refresh="sync" if build_indexes else "async", user=user, workspace=workspace)
        databases[db_id] = existing if existing is not None and (sqlite is None or sqlite.is_file()) else None
    embedded = connection.vendor == "sqlite"
    created = not Dataset.objects.filter(name=name).exists()
    try:
        with nullcontext() if embedded else transaction.atomic():
            dataset = _write_questions(kind, path, name, items_of, databases, total, progress,
                                       [p.name for p in chosen], workspace, user)
    except BaseException:
        if embedded and created:
            Dataset.objects.filter(name=name).delete()
        raise
    return dataset


def _write_questions(kind: str, path: Path, name: str, items_of: Callable[[], Iterable[GoldItem]],
                     databases: dict[str, Database | None], total: int,
                     progress: ImportProgress | None, patches: list[str], workspace=None, user=None) -> Dataset:
    with transaction.atomic():
        dataset, _ = Dataset.objects.update_or_create(
            name=name, defaults={"kind": kind, "source_path": str(path), "patches": patches,
                                 **({"workspace": workspace} if workspace is not None else {})},
            create_defaults={"kind": kind, "source_path": str(path), "patches": patches, "workspace": workspace,
                             "created_by": user if getattr(user, "pk", None) else None})
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
    """db_id -> every .sqlite file of its folder (Spider test suites hold several), but the app's own data."""
    locations = {q.db_id: q.database.location for q in
                 dataset.questions.select_related("database").filter(database__engine="sqlite")}

    def resolve(db_id: str) -> tuple[Path, ...]:
        if db_id not in locations:
            return ()
        return tuple(p for p in suite_files(Path(locations[db_id]).parent) if not agent_locations.is_forbidden(p))

    return resolve


