"""One hygiene rule for outside text before it is stored: ``clean_text`` (and ``clean_json`` for JSON values).

Text from models, uploads, target databases and people may hold a NUL character
(PostgreSQL refuses it in text and JSONB: "PostgreSQL text fields cannot contain
NUL") or lone surrogates (not encodable as UTF-8: psycopg and SQLite's driver
refuse them). Both become U+FFFD, the replacement character, so what was there
stays visible and nothing else changes. Optionally a length cap, with a marker
saying how long the text was.

CSV exports go through ``csv_writer``/``csv_dict_writer`` (``csv_cell``), which also
neutralise spreadsheet formulas.

The Django app applies it to every text and JSON field on save
(``agent.hygiene``); importers that ``bulk_create`` call it themselves.
No Django here: the core uses it too (the LLM client caps completions).
"""

from __future__ import annotations

import csv
import json
import re
from typing import Any

REPLACEMENT = "\ufffd"
# What an LLM completion may hold once received: enough for any real step, and a 1 MB reply is cut.
MAX_COMPLETION_CHARS = 100_000

_BAD = re.compile("[\x00\ud800-\udfff]")


def clean_text(value: str, *, limit: int | None = None) -> str:
    """``value`` with NUL and lone surrogates replaced by U+FFFD, cut to ``limit`` characters if given.

    A cut text ends with ``… [cut: N characters in all]`` and stays within ``limit``.
    """
    if _BAD.search(value):
        value = _BAD.sub(REPLACEMENT, value)
    if limit is not None and len(value) > limit:
        marker = f"… [cut: {len(value):,} characters in all]"
        value = value[: max(0, limit - len(marker))] + marker
    return value


def clean_json(value: Any) -> Any:
    """A JSON-like value with every string (keys included) cleaned; other values unchanged."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    return value


def is_clean(value: str) -> bool:
    return _BAD.search(value) is None


# --- CSV exports ------------------------------------------------------------------------------

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A cell safe to open in a spreadsheet (OWASP "CSV injection"): text starting with ``=``, ``+``,
    ``-``, ``@``, a tab or a carriage return gets a leading ``'`` so it is shown, never evaluated as a
    formula. Numbers and other non-text values are unchanged; text is also cleaned (``clean_text``)."""
    if isinstance(value, str):
        value = clean_text(value)
        if value.startswith(_FORMULA_START):
            return "'" + value
    return value


def csv_writer(stream: Any, **kwargs: Any) -> Any:
    """``csv.writer`` whose rows go through ``csv_cell``: every CSV export writes through this (or
    ``csv_dict_writer``)."""
    return _SafeWriter(csv.writer(stream, **kwargs))


def csv_dict_writer(stream: Any, fieldnames: Any, **kwargs: Any) -> Any:
    """``csv.DictWriter`` whose values go through ``csv_cell``."""
    return _SafeDictWriter(csv.DictWriter(stream, fieldnames=fieldnames, **kwargs))


class _SafeWriter:
    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def writerow(self, row: Any) -> Any:
        return self._writer.writerow([csv_cell(v) for v in row])

    def writerows(self, rows: Any) -> None:
        for row in rows:
            self.writerow(row)


class _SafeDictWriter:
    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def writeheader(self) -> Any:
        return self._writer.writeheader()

    def writerow(self, row: Any) -> Any:
        return self._writer.writerow({k: csv_cell(v) for k, v in row.items()})

    def writerows(self, rows: Any) -> None:
        for row in rows:
            self.writerow(row)


# --- JSON from outside --------------------------------------------------------------------------

MAX_JSON_DEPTH = 100


class JSONTooDeep(ValueError):
    """Nested deeper than the limit; the message names it."""


def json_loads(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` for uploaded or imported text: nesting deeper than ``max_depth`` levels is a
    ``JSONTooDeep`` error (a ValueError with a clear message), never a RecursionError."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise JSONTooDeep(f"JSON nested deeper than {max_depth} levels (the limit)") from None
    check_json_depth(value, max_depth=max_depth)
    return value


def check_json_depth(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise ``JSONTooDeep`` when a decoded value nests deeper than ``max_depth`` (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > max_depth:
                raise JSONTooDeep(f"JSON nested deeper than {max_depth} levels (the limit)")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
