"""Prediction file parsers and gold loaders for Spider and BIRD.

Parsers never give up on a whole file for one bad entry: the entry becomes a
prediction without SQL (scored as a prediction error) and a ``ParseIssue``
with its line number, and the rest is kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from agent.jsonstream import JSONStream, JSONValueTooLong
from agent.textclean import MAX_JSON_DEPTH, JSONTooDeep, json_loads

from .records import EvalItem, GoldItem, ParseIssue, Prediction, PredictionSet

BIRD_SEPARATOR = "\t----- bird -----\t"
_DB_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _read(source: str | Path) -> str:
    return Path(source).read_text(encoding="utf-8", errors="replace")


# --- Spider text format ---------------------------------------------------------

MAX_PREDICTION_ENTRIES = 1_000_000  # entries (BIRD) or lines (Spider) read from one prediction file
MAX_PREDICTION_CHARS = 1_000_000  # one BIRD entry or Spider line


class PredictionFileTooLarge(ValueError):
    """A prediction file past ``MAX_PREDICTION_ENTRIES`` or with an entry past ``MAX_PREDICTION_CHARS``: refused
    whole (nothing is imported), the message says which limit."""


def _bounded_lines(text: str | Iterable[str]) -> Iterator[str | None]:
    """The lines of a text or an open file; a line longer than ``MAX_PREDICTION_CHARS`` is ``None`` and is
    skipped without being held (``readline`` with a limit)."""
    if isinstance(text, str):
        yield from (None if len(line) > MAX_PREDICTION_CHARS else line for line in text.splitlines())
        return
    readline = getattr(text, "readline", None)
    if readline is None:
        yield from (None if len(line) > MAX_PREDICTION_CHARS + 1 else line for line in text)
        return
    while line := readline(MAX_PREDICTION_CHARS + 1):
        if len(line) > MAX_PREDICTION_CHARS and not line.endswith("\n"):
            while (rest := readline(MAX_PREDICTION_CHARS)) and not rest.endswith("\n"):
                pass
            yield None
        else:
            yield line


def parse_spider_predictions(text: str | Iterable[str], *, blank_lines: str = "skip",
                             keep: Callable[[int], bool] | None = None) -> PredictionSet:
    """One SQL per line, optionally followed by a tab and the db_id.

    ``text`` is the whole text, or its lines as an iterable (an open file): a file is then read a line at a time.
    ``keep(index)`` false leaves that prediction out (counted in ``ignored``). A line longer than
    ``MAX_PREDICTION_CHARS`` is an issue (its prediction is unusable), more than ``MAX_PREDICTION_ENTRIES`` lines
    ``PredictionFileTooLarge``.

    ``blank_lines="skip"`` treats empty lines as the official script does (they
    separate SParC/CoSQL interactions and are not questions); ``"keep"`` makes
    each one an empty prediction, for files where a model may return nothing.
    """
    if blank_lines not in ("skip", "keep"):
        raise ValueError("blank_lines must be 'skip' or 'keep'")
    predictions: list[Prediction] = []
    issues: list[ParseIssue] = []
    index = ignored = 0

    def add(prediction: Prediction, issue: str | None = None) -> None:
        nonlocal index, ignored
        index += 1
        if keep is not None and not keep(prediction.index):
            ignored += 1
            return
        predictions.append(prediction)
        if issue:
            issues.append(ParseIssue(prediction.line, issue))

    for lineno, raw in enumerate(_bounded_lines(text), start=1):
        if lineno > MAX_PREDICTION_ENTRIES:
            raise PredictionFileTooLarge(f"more than {MAX_PREDICTION_ENTRIES:,} lines (the limit for one "
                                         "prediction file)")
        if raw is None:
            add(Prediction(index, None, None, lineno),
                f"line longer than {MAX_PREDICTION_CHARS:,} characters (the limit)")
            continue
        # Not strip(): a leading tab means the SQL is missing, not that the db_id is the SQL.
        line = raw.rstrip().lstrip(" ")
        if not line:
            if blank_lines == "keep":
                add(Prediction(index, None, None, lineno), "empty prediction")
            continue
        if "\x00" in line:
            add(Prediction(index, None, None, lineno), "NUL byte in the line")
            continue
        fields = line.split("\t")
        sql = fields[0].strip()
        db_id = fields[1].strip() if len(fields) > 1 else None
        if len(fields) > 2:
            add(Prediction(index, None, None, lineno),
                f"expected 'SQL<TAB>db_id', found {len(fields)} tab-separated fields")
        elif db_id is not None and not _DB_ID.match(db_id):
            add(Prediction(index, None, None, lineno), f"not a db_id after the tab: {db_id[:40]!r}")
        elif not sql:
            add(Prediction(index, None, db_id, lineno), "no SQL before the tab")
        else:
            add(Prediction(index, sql, db_id, lineno))
    return PredictionSet(tuple(predictions), tuple(issues), ignored)


def load_spider_predictions(path: str | Path, *, blank_lines: str = "skip",
                            keep: Callable[[int], bool] | None = None) -> PredictionSet:
    with Path(path).open(encoding="utf-8", errors="replace") as handle:  # a line at a time
        return parse_spider_predictions(handle, blank_lines=blank_lines, keep=keep)


# --- BIRD JSON format -------------------------------------------------------------


def parse_bird_predictions(text: str | Iterable[str], *, keep: Callable[[int], bool] | None = None) -> PredictionSet:
    """``{"0": "SQL\\t----- bird -----\\tdb_id", ...}``; keys are question indices.

    ``text`` is the whole text or an open text file, read a chunk at a time (``agent.jsonstream``): memory holds
    one chunk, one entry and the predictions kept. ``keep(index)`` false leaves a prediction out (counted in
    ``ignored``), so a file far longer than the dataset costs no memory. Entry by entry, so each keeps its line
    and a syntax error loses only the entry it is in; more than ``MAX_PREDICTION_ENTRIES`` entries or one entry
    longer than ``MAX_PREDICTION_CHARS`` raises ``PredictionFileTooLarge``.
    """
    stream = JSONStream(text, max_value=MAX_PREDICTION_CHARS)
    found: dict[int, Prediction] = {}
    issues: list[ParseIssue] = []
    ignored = entries = 0
    try:
        if not stream.take("{"):
            return PredictionSet((), (ParseIssue(stream.line_of(stream.pos), "expected a JSON object"),))
        while True:
            char = stream.peek()
            if not char:
                issues.append(ParseIssue(stream.line_of(stream.pos), "unexpected end of file (missing '}')"))
                break
            if char == "}":
                break
            if char == ",":
                stream.pos += 1
                continue
            entries += 1
            if entries > MAX_PREDICTION_ENTRIES:
                raise PredictionFileTooLarge(f"more than {MAX_PREDICTION_ENTRIES:,} entries (the limit for one "
                                             "prediction file)")
            start_line = stream.line_of(stream.pos)  # now: the buffer may move past the entry's start below
            try:
                key = stream.value(depth=1)
                stream.expect(":", "':' after the key")
                stream.peek()
                value_pos = stream.pos
                value = stream.value(depth=1)
            except JSONValueTooLong as exc:
                raise PredictionFileTooLarge(str(exc).replace("one entry", "an entry")) from None
            except ValueError as exc:
                message = str(exc).split(": ", 1)[-1]  # without the "line N: " prefix
                issues.append(ParseIssue(start_line, f"invalid JSON entry ({message})"))
                stream.skip_line()  # resynchronise on the next line: entries are usually one per line
                continue
            lineno = stream.line_of(value_pos)
            # isdigit() alone admits superscripts such as '²', and str.strip() control characters such as
            # '\x1f', which int() refuses: only ASCII digits with blanks around them are an index
            digits = key.strip(" \t\r\n") if isinstance(key, str) else ""
            if not (digits.isascii() and digits.isdigit()):
                issues.append(ParseIssue(lineno, f"key {key!r} is not a question index"))
                continue
            index = int(digits)
            if keep is not None and not keep(index):
                ignored += 1
                continue
            if index in found:
                issues.append(ParseIssue(lineno, f"duplicate key {key!r}: the later entry is kept"))
            if not isinstance(value, str):
                issues.append(ParseIssue(lineno, f"value for {key!r} is not a string"))
                found[index] = Prediction(index, None, None, lineno)
                continue
            if BIRD_SEPARATOR in value:
                sql, _, db_id = value.partition(BIRD_SEPARATOR)
                found[index] = Prediction(index, sql.strip(), db_id.strip() or None, lineno)
            else:
                issues.append(ParseIssue(lineno, "no '----- bird -----' separator: db_id unknown"))
                found[index] = Prediction(index, value.strip(), None, lineno)
    except JSONValueTooLong as exc:
        raise PredictionFileTooLarge(str(exc)) from None
    return PredictionSet(tuple(found[i] for i in sorted(found)), tuple(issues), ignored)


def load_bird_predictions(path: str | Path, *, keep: Callable[[int], bool] | None = None) -> PredictionSet:
    with Path(path).open(encoding="utf-8", errors="replace") as handle:  # a chunk at a time
        return parse_bird_predictions(handle, keep=keep)


# --- gold -------------------------------------------------------------------------


def load_spider_gold_sql(path: str | Path) -> list[GoldItem]:
    """``dev_gold.sql``: ``SQL<TAB>db_id`` per line; blank lines separate interactions."""
    items: list[GoldItem] = []
    for lineno, raw in enumerate(_read(path).splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        sql, sep, db_id = line.rpartition("\t")
        if not sep or not sql.strip():
            raise ValueError(f"{path}: line {lineno}: expected 'SQL<TAB>db_id'")
        items.append(GoldItem(index=len(items), db_id=db_id.strip(), sql=sql.strip()))
    return items


STREAM_CHUNK = 1 << 20
MAX_ENTRY_CHARS = 16 << 20  # one entry of a streamed array; past it the file is refused, not buffered


def iter_json_array(path: str | Path, *, chunk: int = STREAM_CHUNK,
                    max_entry: int = MAX_ENTRY_CHARS) -> Iterator[Any]:
    """The entries of a JSON array file, one at a time: memory holds one chunk and one entry, never the file.

    Read with ``agent.jsonstream`` (``raw_decode`` over chunks; an entry cut by a chunk's end waits for the
    next). Nesting deeper than ``MAX_JSON_DEPTH`` is ``JSONTooDeep``; anything else malformed is a
    ``ValueError`` naming the entry."""
    with Path(path).open(encoding="utf-8", errors="replace") as handle:
        stream = JSONStream(handle, chunk=chunk, max_value=max_entry)
        if not stream.take("["):
            raise ValueError("expected a JSON array")
        if stream.take("]"):
            return
        n = 0
        while True:
            try:
                value = stream.value(depth=1)  # the array itself is one level
            except JSONTooDeep:
                raise JSONTooDeep(f"entry {n + 1}: JSON nested deeper than {MAX_JSON_DEPTH} levels "
                                  "(the limit)") from None
            except JSONValueTooLong:
                raise ValueError(f"entry {n + 1} is longer than {max_entry} characters") from None
            except ValueError as exc:
                raise ValueError(f"entry {n + 1}: {str(exc).split(': ', 1)[-1]}") from None
            yield value
            n += 1
            char = stream.peek()
            if not char:
                raise ValueError(f"the array ends after entry {n} without ']'")
            if char == "]":
                return
            if char != ",":
                raise ValueError(f"expected ',' or ']' after entry {n}")
            stream.pos += 1


def _entry(e: Any, i: int, *keys: str) -> dict:
    if not isinstance(e, dict):
        raise ValueError(f"entry {i + 1}: expected an object")
    missing = [k for k in keys if not isinstance(e.get(k), str)]
    if missing:
        raise ValueError(f"entry {i + 1}: needs {' and '.join(repr(k) for k in missing)}")
    return e


def iter_spider_dev(path: str | Path) -> Iterator[GoldItem]:
    """Spider's ``dev.json`` (question, query, db_id per entry), read as a stream."""
    for i, e in enumerate(iter_json_array(path)):
        e = _entry(e, i, "db_id", "query")
        yield GoldItem(index=i, db_id=e["db_id"], sql=e["query"].strip(), question=str(e.get("question", "")))


def load_spider_dev(path: str | Path) -> list[GoldItem]:
    """Spider's ``dev.json`` (question, query, db_id per entry)."""
    return list(iter_spider_dev(path))


def _jsonl(path: str | Path) -> Iterator[Any]:
    with Path(path).open(encoding="utf-8", errors="replace") as handle:
        for lineno, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield json_loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"line {lineno}: not JSON ({exc.msg})") from None


def _starts_with_bracket(path: str | Path) -> bool:
    with Path(path).open(encoding="utf-8", errors="replace") as handle:
        while (c := handle.read(1)) and c.isspace():
            pass
    return c == "["


def iter_bird_dev(path: str | Path) -> Iterator[GoldItem]:
    """BIRD ``dev.json`` (a list) or mini-dev ``.jsonl`` (one object a line), with evidence and difficulty; read
    as a stream."""
    entries: Iterable[Any] = iter_json_array(path) if _starts_with_bracket(path) else _jsonl(path)
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError(f"entry {i + 1}: expected an object")
        sql = e.get("SQL", e.get("query", ""))
        e = _entry({**e, "SQL": sql}, i, "db_id", "SQL")
        yield GoldItem(index=i, db_id=e["db_id"], sql=sql.strip(), question=str(e.get("question", "")),
                       evidence=str(e.get("evidence") or ""), difficulty=e.get("difficulty"))


def load_bird_dev(path: str | Path) -> list[GoldItem]:
    """BIRD ``dev.json`` (a list) or mini-dev ``.jsonl`` (one object a line), with evidence and difficulty."""
    return list(iter_bird_dev(path))


# --- pairing ------------------------------------------------------------------------


def pair_items(gold: Sequence[GoldItem], predictions: PredictionSet) -> tuple[list[EvalItem], list[ParseIssue]]:
    """Match predictions to gold questions by index; say what is missing, extra or on the wrong db."""
    by_index = predictions.by_index()
    items: list[EvalItem] = []
    issues: list[ParseIssue] = []
    for g in gold:
        p = by_index.get(g.index)
        if p is None:
            items.append(EvalItem(g.index, g.db_id, g.sql, None, g.difficulty, "no prediction for this question"))
            continue
        note = "" if p.sql is not None else f"unusable prediction (line {p.line})"
        if p.db_id is not None and p.db_id != g.db_id:
            issues.append(ParseIssue(p.line, f"prediction {g.index} names db {p.db_id!r}, gold is on {g.db_id!r}"))
        items.append(EvalItem(g.index, g.db_id, g.sql, p.sql, g.difficulty, note))
    extra = [p for p in predictions.predictions if p.index >= len(gold)]
    if extra or predictions.ignored:
        issues.append(ParseIssue(extra[0].line if extra else 0, f"{len(extra) + predictions.ignored} predictions "
                                                                f"beyond the {len(gold)} gold questions"))
    return items, issues
