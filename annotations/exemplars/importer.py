"""Import exemplar sets: the paper authors' prompt folders ("interactive-t2s") and our JSON export.

interactive-t2s layout: a dataset folder holds ``tool_desc.txt`` and one folder
per database with ``schema.txt`` and trajectory files (``fake-01.txt``, ...).
A trajectory file is ``Q:`` / ``Evidence:`` (one line each) / ``Thought:`` / ``Action:`` /
``Observation:`` blocks; ``#`` lines are comments and ``-- START --`` a marker
(both kept in the exemplar's notes). Two Spider 2.0-lite files hold only a
question (a JSON header or a ``Q:`` line) and the reference SQL: they become
exemplars with no steps and that SQL as final SQL; text between the question
and the SQL is kept in the notes and reported as a warning.

Choices (see the module docstring of ``services``): imported exemplars are
approved on import, with the importing user as reviewer, because they are
someone's published prompt; their databases are not registered here, so they
keep the schema text of ``schema.txt`` and no database link, unless
``--database NAME`` names a registered database to link that folder's
exemplars to. Everything is imported in one transaction or nothing is.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Q

from agent import policies as agent_policies
from agent.hygiene import clean_instance
from agent.jsonstream import JSONStream, JSONValueTooLong, iter_array, iter_members
from agent.models import Database
from agent.strategies.parsing import ActionParseError, parse_action
from agent.textclean import JSONTooDeep, json_loads
from annotations import policies
from annotations.models import Exemplar, ExemplarSet, ExemplarSetVersion, ExemplarStep

from . import paper_sets, selectors, services

JSON_FORMAT = "t2s-studio/exemplar-set"
JSON_FORMAT_VERSION = 1
TOOL_DESC = "tool_desc.txt"
TOOL_DESC_NO_FINDPATH = "tool_desc_no_findpath.txt"  # the set's text for the run without FindShortestPath
SCHEMA_FILE = "schema.txt"

_LABEL = re.compile(r"^(Q|Evidence|Thought|Action|Observation):[ \t]?(.*)$")
_SQL_START = re.compile(r"^\s*(WITH|SELECT)\b", re.IGNORECASE)
_MARKER = "-- START --"


class ImportProblem(Exception):
    """The input cannot be imported; ``problems`` are 'file:line: message' strings."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class ParsedStep:
    thought: str
    action: str
    observation: str | None
    line: int


@dataclass
class ParsedTrajectory:
    path: str
    question: str
    evidence: str
    steps: list[ParsedStep]
    final_sql: str
    comments: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def notes(self) -> str:
        parts = []
        if self.comments:
            parts.append("Comments in the source file:\n" + "\n".join(self.comments))
        if self.warnings:
            parts.append("Import warnings:\n" + "\n".join(self.warnings))
        return "\n\n".join(parts)


# --- interactive-t2s trajectory files ---------------------------------------------------------


def _json_header(lines: list[str], start: int, path: str) -> tuple[dict[str, Any], int]:
    """A leading JSON object (Spider 2.0-lite files); returns it and the index of the next line."""
    for end in range(start, len(lines)):
        candidate = "\n".join(lines[start:end + 1]).rstrip().rstrip(",")
        if not candidate.endswith("}"):
            continue
        try:
            value = json_loads(candidate)
        except JSONTooDeep as exc:
            raise ImportProblem([f"{path}:{start + 1}: {exc}."]) from None
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value, end + 1
    raise ImportProblem([f"{path}:{start + 1}: a JSON header starts here but never closes."])


def parse_trajectory(text: str, *, path: str = "<text>") -> ParsedTrajectory:
    lines = text.splitlines()
    problems: list[str] = []
    comments: list[str] = []
    warnings: list[str] = []
    meta: dict[str, Any] = {}
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i < len(lines) and lines[i].lstrip().startswith("{"):
        meta, i = _json_header(lines, i, path)

    # blocks: [label, first line number (1-based), text lines]
    blocks: list[list[Any]] = []
    loose: list[tuple[int, str]] = []  # non-blank lines outside any block
    current: list[Any] | None = None
    for n in range(i, len(lines)):
        line = lines[n]
        inside_string = (current is not None and current[0] == "Action"
                         and "\n".join(current[2]).count('"""') % 2 == 1)
        if not inside_string:
            if line.startswith("#"):
                comments.append(line)
                current = None
                continue
            if line.strip() == _MARKER:
                comments.append(line.strip())
                current = None
                continue
            match = _LABEL.match(line)
            if match:
                # Q and Evidence are one line each; the other blocks run on to the next label.
                block = [match.group(1), n + 1, [match.group(2)]]
                blocks.append(block)
                current = None if match.group(1) in ("Q", "Evidence") else block
                continue
        if current is not None:
            current[2].append(line)
        elif line.strip():
            loose.append((n + 1, line))

    question = evidence = ""
    steps: list[ParsedStep] = []
    pending_thought: tuple[str, int] | None = None
    for label, line_no, body_lines in blocks:
        body = "\n".join(body_lines).strip()
        if label == "Q":
            if question:
                problems.append(f"{path}:{line_no}: a second question.")
            question = body
        elif label == "Evidence":
            evidence = body
        elif label == "Thought":
            if pending_thought is not None:
                problems.append(f"{path}:{pending_thought[1]}: a Thought with no Action after it.")
            pending_thought = (body, line_no)
        elif label == "Action":
            try:
                parse_action(body)
            except ActionParseError as exc:
                problems.append(f"{path}:{line_no}: the action does not parse: {exc}")
            steps.append(ParsedStep(pending_thought[0] if pending_thought else "", body, None, line_no))
            pending_thought = None
        elif label == "Observation":
            if not steps or steps[-1].observation is not None:
                problems.append(f"{path}:{line_no}: an Observation with no Action before it.")
            else:
                steps[-1].observation = body
    if pending_thought is not None:
        problems.append(f"{path}:{pending_thought[1]}: a Thought with no Action after it.")

    question = question or str(meta.get("question") or "").strip()
    if not evidence and meta.get("external_knowledge"):
        evidence = str(meta["external_knowledge"]).strip()
    if not question:
        problems.append(f"{path}:1: no question (neither a 'Q:' line nor a JSON header with 'question').")

    final_sql = ""
    if steps:
        for line_no, line in loose:
            problems.append(f"{path}:{line_no}: text outside any Q/Thought/Action/Observation block: {line[:60]!r}")
        for step in steps:
            sql = selectors.sql_of_action(step.action)
            if sql is not None and not (step.observation or "").lstrip().lower().startswith("error"):
                final_sql = sql.strip()
    else:
        # Question + reference SQL only: the SQL starts at the first WITH/SELECT line.
        start = next((k for k, (_, line) in enumerate(loose) if _SQL_START.match(line)), None)
        if start is None:
            problems.append(f"{path}: no steps and no SQL.")
        else:
            for line_no, line in loose[:start]:
                warnings.append(f"{path}:{line_no}: unlabelled text before the SQL kept in notes: {line.strip()!r}")
            first_line = loose[start][0]
            final_sql = "\n".join(lines[first_line - 1:]).strip()
    if problems:
        raise ImportProblem(problems)
    return ParsedTrajectory(path, question, evidence,
                            steps, final_sql, comments, warnings)


@dataclass
class ParsedDatabaseFolder:
    name: str
    schema_text: str
    trajectories: list[ParsedTrajectory]


@dataclass
class ParsedDataset:
    name: str
    tool_description: str
    databases: list[ParsedDatabaseFolder]
    skipped: list[str]
    tool_description_no_findpath: str = ""


def parse_dataset(folder: Path, *, tool_desc: str = TOOL_DESC) -> ParsedDataset:
    """Read one dataset folder; every problem of every file is collected before raising."""
    problems: list[str] = []
    skipped: list[str] = []
    desc_path = folder / tool_desc
    if not desc_path.is_file():
        raise ImportProblem([f"{desc_path}: missing (a dataset folder holds {tool_desc} and database folders)."])
    databases: list[ParsedDatabaseFolder] = []
    for entry in sorted(folder.iterdir()):
        if entry.is_file():
            if entry.name == TOOL_DESC_NO_FINDPATH and tool_desc == TOOL_DESC:
                continue  # kept with the set for the ablation without FindShortestPath (paper, Table 10)
            if entry.name != tool_desc:
                skipped.append(f"{entry.name} (not the tool description in use; choose it with --tool-desc)"
                               if entry.name.startswith("tool_desc") else entry.name)
            continue
        schema_path = entry / SCHEMA_FILE
        if not schema_path.is_file():
            problems.append(f"{schema_path}: missing.")
            continue
        trajectories = []
        for file in sorted(entry.iterdir()):
            if file.name == SCHEMA_FILE or not file.is_file():
                continue
            if file.suffix != ".txt":
                skipped.append(f"{entry.name}/{file.name}")
                continue
            rel = f"{folder.name}/{entry.name}/{file.name}"
            try:
                trajectories.append(parse_trajectory(file.read_text(encoding="utf-8"), path=rel))
            except ImportProblem as exc:
                problems += exc.problems
            except UnicodeDecodeError as exc:
                problems.append(f"{rel}: not UTF-8 text ({exc}).")
        if not trajectories:
            problems.append(f"{entry}: no trajectory files.")
        databases.append(ParsedDatabaseFolder(entry.name, schema_path.read_text(encoding="utf-8").strip(),
                                              trajectories))
    if not databases:
        problems.append(f"{folder}: no database folders.")
    if problems:
        raise ImportProblem(problems)
    no_findpath = folder / TOOL_DESC_NO_FINDPATH
    no_findpath_text = (no_findpath.read_text(encoding="utf-8").strip()
                        if tool_desc == TOOL_DESC and no_findpath.is_file() else "")
    return ParsedDataset(folder.name, desc_path.read_text(encoding="utf-8").strip(), databases, skipped,
                         no_findpath_text)


def dataset_folders(path: Path, *, tool_desc: str = TOOL_DESC) -> list[Path]:
    """``path`` itself when it is a dataset folder, else its dataset sub-folders (a collection of them)."""
    if (path / tool_desc).is_file():
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_dir() and (p / tool_desc).is_file()) if path.is_dir() else []
    if not found:
        raise ImportProblem([f"{path}: neither a dataset folder (with {tool_desc}) nor a folder of them."])
    return found


# --- writing ----------------------------------------------------------------------------------


@dataclass
class ImportResult:
    versions: list[ExemplarSetVersion]
    exemplar_count: int
    warnings: list[str]
    skipped: list[str]
    report: list[str] = field(default_factory=list)  # what was mapped and reused, said to whoever imported
    reused: int = 0


def exemplar_content_hash(*, database: str, question: str, evidence: str, final_sql: str,
                          steps: Sequence[tuple[str, str]]) -> str:
    """What makes two exemplars the same: their database's name, question, evidence, steps (thought and action;
    observations are re-run here) and final SQL, whitespace at the ends ignored."""
    payload = [database or "", question.strip(), (evidence or "").strip(), (final_sql or "").strip(),
               [[(t or "").strip(), (a or "").strip()] for t, a in steps]]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


def _hash_of(exemplar: Exemplar) -> str:
    return exemplar_content_hash(
        database=exemplar.database.name if exemplar.database_id else exemplar.source_database,
        question=exemplar.question, evidence=exemplar.evidence, final_sql=exemplar.final_sql,
        steps=[(st.thought, st.action) for st in exemplar.steps.order_by("position")])


def _same_exemplar(*, user, digest: str, database: Database | None, source_database: str,
                   question: str) -> Exemplar | None:
    """An approved exemplar the importer may see with exactly this content and the same database link (its
    content checked again now: one edited since it was imported does not count)."""
    pool = policies.visible_exemplars(user) if user is not None else Exemplar.objects.all()
    pool = pool.approved().filter(Q(content_hash=digest) | Q(question=question))
    pool = pool.filter(database=database) if database is not None else pool.filter(
        database__isnull=True, source_database=source_database)
    for candidate in pool.select_related("database").order_by("pk")[:20]:
        if _hash_of(candidate) == digest:
            return candidate
    return None


def _databases_by_name(names: set[str], *, user) -> dict[str, Database]:
    """Registered databases named as the file's exemplars say, among those the importer sees."""
    pool = agent_policies.visible_databases(user) if user is not None else Database.objects.all()
    return {db.name: db for db in pool.filter(name__in=names)}


def _linked_databases(names: list[str] | None) -> dict[str, Database]:
    linked: dict[str, Database] = {}
    missing = []
    for name in names or []:
        db = Database.objects.filter(name=name).first()
        if db is None:
            missing.append(name)
        else:
            linked[name] = db
    if missing:
        raise ImportProblem([f"--database {n}: no registered database of that name." for n in missing])
    return linked


def _set_workspace(user, slug: str | None) -> str:
    """The new set's workspace as a slug ("" for none), checked before anything is read or stored."""
    from django.core.exceptions import ValidationError

    try:
        workspace = services.set_workspace(user=user, slug=slug)
    except ValidationError as exc:
        raise ImportProblem(exc.messages) from None
    return workspace.slug if workspace is not None else ""


def _new_set(name: str, *, user, description: str, workspace: str) -> ExemplarSet:
    if ExemplarSet.objects.filter(name=name).exists():
        # The same words whether or not the importer may see the set that holds the name.
        raise ImportProblem([f"The name {name!r} is not available; choose another with --name."])
    return services.set_create(name=name, user=user, description=description, workspace=workspace)


def _create_exemplar(*, user, database: Database | None, source_database: str, schema_text: str, question: str,
                     evidence: str, steps: list[tuple[str, str, str | None]], final_sql: str, notes: str,
                     tags: list[str], source: str) -> Exemplar:
    exemplar = Exemplar.objects.create(
        database=database, source_database=source_database, schema_text=schema_text, question=question,
        evidence=evidence, final_sql=final_sql, notes=notes, tags=tags, source=source,
        author=user if user is not None and user.is_authenticated else None)
    ExemplarStep.objects.bulk_create(
        clean_instance(ExemplarStep(exemplar=exemplar, position=i, thought=t, action=a, observation=o))
        for i, (t, a, o) in enumerate(steps))
    services.exemplar_mark_approved_on_import(exemplar=exemplar, user=user, source=source)
    return exemplar


def import_interactive_t2s(path: Path, *, user=None, name: str | None = None, databases: list[str] | None = None,
                           tool_desc: str = TOOL_DESC, workspace: str | None = None) -> ImportResult:
    """One set (with its first version) per dataset folder; all or nothing. ``workspace``: a slug among the
    importer's workspaces ("" none, None their only one), as ``services.set_workspace`` takes it."""
    workspace = _set_workspace(user, workspace)
    folders = dataset_folders(path, tool_desc=tool_desc)
    if name and len(folders) > 1:
        raise ImportProblem([f"{path} holds {len(folders)} datasets; --name applies to one dataset folder."])
    parsed = []
    problems: list[str] = []
    for folder in folders:
        try:
            parsed.append(parse_dataset(folder, tool_desc=tool_desc))
        except ImportProblem as exc:
            problems += exc.problems
    if problems:
        raise ImportProblem(problems)
    linked = _linked_databases(databases)
    known = {db.name for ds in parsed for db in ds.databases}
    unknown = [n for n in linked if n not in known]
    if unknown:
        raise ImportProblem([f"--database {n}: no database folder of that name in {path}." for n in unknown])
    result = ImportResult([], 0, [], [])
    with transaction.atomic():
        for ds in parsed:
            exemplar_set = _new_set(name or ds.name, user=user, workspace=workspace,
                                    description=f"Imported from the interactive-t2s prompt folder {ds.name}.")
            rows = []
            for db in ds.databases:
                for tr in db.trajectories:
                    rows.append(_create_exemplar(
                        user=user, database=linked.get(db.name), source_database=db.name, schema_text=db.schema_text,
                        question=tr.question, evidence=tr.evidence,
                        steps=[(s.thought, s.action, s.observation) for s in tr.steps], final_sql=tr.final_sql,
                        notes=tr.notes, tags=["imported", ds.name], source=f"import: {tr.path}"))
                    result.warnings += tr.warnings
            result.versions.append(services.set_publish(
                exemplar_set=exemplar_set, exemplars=rows, user=user, tool_description=ds.tool_description,
                tool_description_no_findpath=ds.tool_description_no_findpath,
                note=f"Imported from {ds.name} ({len(rows)} exemplars).", source=f"import: {ds.name}"))
            result.exemplar_count += len(rows)
            result.skipped += [f"{ds.name}/{s}" for s in ds.skipped]
    return result


# --- JSON ---------------------------------------------------------------------------------------


def export_version(version: ExemplarSetVersion) -> dict[str, Any]:
    """A version as JSON: the set's name and description, the version's frozen content."""
    return {
        "format": JSON_FORMAT,
        "format_version": JSON_FORMAT_VERSION,
        "set": {"name": version.exemplar_set.name, "description": version.exemplar_set.description},
        "version": {"number": version.number, "note": version.note, "source": version.source,
                    "tool_description": version.tool_description,
                    "tool_description_no_findpath": version.tool_description_no_findpath,
                    "content_hash": version.content_hash,
                    "created_at": version.created_at.isoformat() if version.created_at else None,
                    "created_by": version.created_by.get_username() if version.created_by_id else None},
        "exemplars": [{k: item.get(k) for k in selectors.SNAPSHOT_KEYS} for item in version.exemplars],
    }


MAX_JSON_EXEMPLARS = 5_000  # exemplars in one JSON import (a version holds them all in one snapshot)
MAX_JSON_EXEMPLAR_CHARS = 1_000_000  # one exemplar, or one of the set/version objects, as JSON text
MAX_JSON_PROBLEMS = 50  # problems listed; the rest are counted


def _not_an_export(path: str) -> str:
    return f"{path}: not a t2s-studio exemplar set export (format must be {JSON_FORMAT!r})."


def _check_header(header: dict[str, Any], path: str) -> list[str]:
    if header.get("format") != JSON_FORMAT:
        return [_not_an_export(path)]
    problems = []
    if header.get("format_version") != JSON_FORMAT_VERSION:
        problems.append(f"{path}: format_version {header.get('format_version')!r} is not {JSON_FORMAT_VERSION}.")
    for key in ("set", "version"):
        if not isinstance(header.get(key), dict):
            problems.append(f"{path}: {key!r} must be an object.")
    return problems


def _check_item(item: Any, n: int, path: str) -> list[str]:
    where = f"{path}: exemplars[{n}]"
    if not isinstance(item, dict):
        return [f"{where}: must be an object."]
    problems = []
    if not str(item.get("question") or "").strip():
        problems.append(f"{where}: no question.")
    steps = item.get("steps")
    if not isinstance(steps, list):
        return [*problems, f"{where}: 'steps' must be a list."]
    for k, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("action"), str):
            problems.append(f"{where}.steps[{k}]: needs an 'action' string.")
            continue
        try:
            parse_action(step["action"])
        except ActionParseError as exc:
            problems.append(f"{where}.steps[{k}]: the action does not parse: {exc}")
    return problems


def _walk_export(path: Path, on_exemplar: Callable[[int, Any], None]) -> dict[str, Any]:
    """Read an export once, as a stream: each exemplar goes to ``on_exemplar`` as it is decoded (one at a
    time in memory, never the file); returns the other top-level members. Raises ``ImportProblem``."""
    try:
        with path.open(encoding="utf-8") as handle:
            stream = JSONStream(handle, max_value=MAX_JSON_EXEMPLAR_CHARS)
            if stream.peek() != "{":
                stream.value()  # a nesting past the limit says so; any other value is not an export
                raise ImportProblem([_not_an_export(str(path))])
            header: dict[str, Any] = {}
            listed = False
            for key, line in iter_members(stream):
                if key != "exemplars":
                    header[key] = stream.value(depth=1)
                    if key == "format" and header[key] != JSON_FORMAT:
                        raise ImportProblem([_not_an_export(str(path))])
                    continue
                if stream.peek() != "[":
                    raise ImportProblem([f"{path}:{line}: 'exemplars' must be a list."])
                for n, item in enumerate(iter_array(stream, depth=1, max_items=MAX_JSON_EXEMPLARS,
                                                    what="exemplars in one import")):
                    on_exemplar(n, item)
                listed = True
            if stream.peek():
                raise ValueError(f"line {stream.line_of(stream.pos)}: more after the end of the object")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportProblem([f"{path}: cannot read: {exc}"]) from None
    except JSONValueTooLong as exc:
        raise ImportProblem([f"{path}: {exc}."]) from None
    except JSONTooDeep as exc:
        raise ImportProblem([f"{path}: {str(exc).split(': ', 1)[-1]}."]) from None
    except ValueError as exc:
        raise ImportProblem([f"{path}: invalid JSON: {exc}"]) from None
    problems = _check_header(header, str(path))
    if not listed and not problems:
        problems.append(f"{path}: 'exemplars' must be a list.")
    if problems:
        raise ImportProblem(problems)
    return header


def import_json(path: Path, *, user=None, name: str | None = None, databases: list[str] | None = None,
                workspace: str | None = None) -> ImportResult:
    """A set exported by ``export_version``: new exemplar rows (approved on import), a new set, version 1.

    Read twice as a stream (``agent.jsonstream``): a first pass checks every exemplar, a second writes them,
    so memory holds one exemplar of the file at a time (and the rows of the new version). A file of at most
    ``UPLOAD_MAX_EXEMPLAR_BYTES`` (the upload's limit, from the command too), ``MAX_JSON_EXEMPLARS`` exemplars of
    ``MAX_JSON_EXEMPLAR_CHARS`` characters each; all or nothing."""
    from agent.conf import agent_settings
    from agent.services.uploads import too_large

    workspace = _set_workspace(user, workspace)
    try:
        refusal = too_large(path.stat().st_size, agent_settings.UPLOAD_MAX_EXEMPLAR_BYTES, "file")
    except OSError as exc:
        raise ImportProblem([f"{path}: cannot read: {exc}"]) from None
    if refusal:  # the limit of the web upload: the command's memory is bounded the same way
        raise ImportProblem([f"{path}: {refusal}"])
    problems: list[str] = []
    count = 0

    def check(n: int, item: Any) -> None:
        nonlocal count
        count += 1
        found = _check_item(item, n, str(path))
        if found and len(problems) < MAX_JSON_PROBLEMS:
            problems.extend(found[:MAX_JSON_PROBLEMS - len(problems)])
        elif found:
            problems.append("")  # counted, shown as "and N more"

    header = _walk_export(path, check)
    if problems:
        shown = [p for p in problems if p]
        more = len(problems) - len(shown)
        raise ImportProblem(shown + ([f"{path}: and {more} more problems."] if more else []))
    named: set[str] = set()
    _walk_export(path, lambda n, item: named.add(str(item.get("database") or "")))
    # Mapped by name to the registered databases the importer sees; --database names them explicitly.
    linked = {**_databases_by_name(named - {""}, user=user), **_linked_databases(databases)}
    set_info, version_info = header["set"], header["version"]
    rows: list[Exemplar] = []
    mapped: dict[str, int] = {}
    unmatched: dict[str, int] = {}
    reused = 0

    def create(n: int, item: Any) -> None:
        nonlocal reused
        db_name = str(item.get("database") or "")
        database = linked.get(db_name)
        counts = mapped if database is not None else unmatched
        counts[db_name or "no database"] = counts.get(db_name or "no database", 0) + 1
        steps = [(s.get("thought") or "", s["action"], s.get("observation")) for s in item["steps"]]
        digest = exemplar_content_hash(database=db_name, question=item["question"],
                                       evidence=item.get("evidence") or "", final_sql=item.get("final_sql") or "",
                                       steps=[(t, a) for t, a, _ in steps])
        same = _same_exemplar(user=user, digest=digest, database=database, source_database=db_name,
                              question=item["question"])
        if same is not None or any(r.content_hash == digest for r in rows):
            reused += 1
            same = same or next(r for r in rows if r.content_hash == digest)
            if all(r.pk != same.pk for r in rows):
                rows.append(same)
            return
        schema_text = item.get("schema_text") or ""
        if database is not None and schema_text.strip() == selectors.exemplar_schema_text(
                Exemplar(database=database)).strip():
            schema_text = ""  # the registered database's own schema: rendered from it, kept current
        exemplar = _create_exemplar(
            user=user, database=database, source_database=db_name,
            schema_text=schema_text, question=item["question"],
            evidence=item.get("evidence") or "", steps=steps,
            final_sql=item.get("final_sql") or "", notes=item.get("notes") or "",
            tags=services.parse_tags(item.get("tags") or []), source=f"import: {path.name} exemplars[{n}]")
        Exemplar.objects.filter(pk=exemplar.pk).update(content_hash=digest)
        exemplar.content_hash = digest
        rows.append(exemplar)

    with transaction.atomic():
        exemplar_set = _new_set(name or str(set_info.get("name") or path.stem), user=user, workspace=workspace,
                                description=str(set_info.get("description") or ""))
        _walk_export(path, create)
        version = services.set_publish(
            exemplar_set=exemplar_set, exemplars=rows, user=user,
            tool_description=str(version_info.get("tool_description") or ""),
            tool_description_no_findpath=str(version_info.get("tool_description_no_findpath") or ""),
            note=str(version_info.get("note") or ""),
            source=f"import: {path.name} ({set_info.get('name')} v{version_info.get('number')})")
    report = []
    if mapped:
        report.append("Mapped to registered databases: "
                      + ", ".join(f"{k} ({v})" for k, v in sorted(mapped.items())) + ".")
    if reused:
        report.append(f"{reused} exemplar{'s' if reused != 1 else ''} already here with the same content "
                      "reused, not duplicated.")
    warnings = [f"No registered database matched {k} ({v} exemplar{'s' if v != 1 else ''}): "
                "their tools cannot run here." for k, v in sorted(unmatched.items())]
    return ImportResult([version], count, warnings, [], report, reused)


# --- the paper's sets -----------------------------------------------------------------------------


def ensure_paper_sets() -> list[ExemplarSetVersion]:
    """Import every vendored paper set that is not there yet; returns the versions created (none on re-runs)."""
    created: list[ExemplarSetVersion] = []
    for name, folder in paper_sets.FOLDERS.items():
        if ExemplarSet.objects.filter(name=name).exists():
            continue
        with transaction.atomic():
            result = import_interactive_t2s(paper_sets.PROMPTS_DIR / folder, name=name)
        created += result.versions
    return created


# --- browser and API uploads ------------------------------------------------------------------------


def import_upload(*, chunks, size: int, filename: str, user, name: str | None = None,
                  workspace: str | None = None) -> ImportResult:
    """An exemplar set uploaded through the web or the API: a zip of the authors' prompt folder (``tool_desc.txt``
    and database folders, or a folder of such folders) or a JSON export. Imported like the command does, all or
    nothing; the uploaded files are removed afterwards either way. Problems name the file as uploaded."""
    import shutil

    from django.core.exceptions import ValidationError

    from agent.conf import agent_settings
    from agent.services import uploads

    workspace = _set_workspace(user, workspace)  # refused before the upload is stored
    limit = agent_settings.UPLOAD_MAX_EXEMPLAR_BYTES
    refusal = uploads.too_large(size, limit, "file")
    if refusal:
        raise ImportProblem([refusal])
    base = Path(filename).name
    suffix = Path(base).suffix.lower()
    if suffix not in (".zip", ".json"):
        raise ImportProblem([f"{base}: upload a .zip of a prompt folder or a .json set export."])
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(base).stem) or "upload"
    work = uploads.scratch_folder("exemplars-")  # swept if this request dies before its finally
    try:
        stored = work / f"{stem}{suffix}"
        try:
            uploads.store_upload(chunks, stored, limit=limit, what="file")
            if suffix == ".json":
                return import_json(stored, user=user, name=name or None, workspace=workspace)
            root = work / stem
            root.mkdir()
            uploads.extract_zip(stored, root, max_bytes=10 * limit)
        except ValidationError as exc:
            raise ImportProblem(exc.messages) from None
        entries = list(root.iterdir())
        if len(entries) == 1 and entries[0].is_dir() and not (root / TOOL_DESC).is_file():
            root = entries[0]  # the zip of a folder: its one top folder
        return import_interactive_t2s(root, user=user, name=name or None, workspace=workspace)
    except ImportProblem as exc:
        raise ImportProblem([p.replace(str(work) + "/", "").replace(str(work), "")
                             .replace("--name", "the name field") for p in exc.problems]) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
