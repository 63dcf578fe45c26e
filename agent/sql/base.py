"""What passes between connectors and their callers: schema description, results, errors.

Everything here is plain Python (no Django) and JSON-serialisable through
``to_dict``/``from_dict`` so a schema can be stored once and reused by every
worker instead of being introspected per request.
"""

from __future__ import annotations

import abc
import base64
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

# --- errors -----------------------------------------------------------------


class SQLError(Exception):
    """A query could not be run; the message is meant to be shown to a person or an agent."""


class QueryRejected(SQLError):
    """Refused before reaching the engine (not a single read-only query)."""


class ReadOnlyViolation(SQLError):
    """The engine refused a write or a privileged operation."""


class QueryTimeout(SQLError):
    """The query ran past its deadline and was interrupted."""


class ConnectionFailed(SQLError):
    """The target database could not be opened."""


class ResultTooLarge(SQLError):
    """The query's result (or a value it builds) is past the memory bound; the message names the limit."""


# --- schema ------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnStats:
    """Per-column statistics as the Interactive-T2S paper's SearchColumn returns them.

    ``kind`` is one of ``text``, ``numeric``, ``date``, ``enum`` or ``empty``.
    ``values`` holds (value, count) pairs for low-cardinality columns, ``samples``
    a few distinct values (each cut to 100 characters) for free text.
    """

    kind: str
    distinct_count: int
    null_count: int
    min: str | None = None
    max: str | None = None
    samples: tuple[str, ...] = ()
    values: tuple[tuple[str, int], ...] = ()
    sampled_rows: int | None = None  # set when computed on a prefix of a large table
    # Every distinct value of a text column with at most 50 of them, none a sentence (more than 8 spaces):
    # the columns the paper authors' SearchColumn lists in full ("categorical field"). In the order the
    # rows first hold them, as the authors listed them.
    listing: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.kind == "empty":
            return "no non-null values"
        if self.kind == "enum":
            inner = ", ".join(f"{_quote(v)} ({n})" for v, n in self.values)
            return f"enumeration: {inner}"
        if self.kind in ("numeric", "date"):
            return f"{self.kind} range: {self.min} .. {self.max}; distinct count: {self.distinct_count}"
        inner = ", ".join(_quote(s) for s in self.samples)
        return f"text field, distinct count: {self.distinct_count}, e.g. {inner}"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ColumnStats:
        return cls(
            kind=d["kind"],
            distinct_count=d["distinct_count"],
            null_count=d["null_count"],
            min=d.get("min"),
            max=d.get("max"),
            samples=tuple(d.get("samples", ())),
            values=tuple((v, n) for v, n in d.get("values", ())),
            sampled_rows=d.get("sampled_rows"),
            listing=tuple(d.get("listing", ())),
        )


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class ColumnInfo:
    table: str
    name: str
    type: str
    nullable: bool = True
    primary_key: bool = False
    stats: ColumnStats | None = None
    declared_type: str | None = None  # the type as the DDL spells it ("varchar(25)"); ``type`` is upper case

    @property
    def qualified(self) -> str:
        return f"{self.table}.{self.name}"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ColumnInfo:
        stats = d.get("stats")
        return cls(
            table=d["table"],
            name=d["name"],
            type=d["type"],
            nullable=d.get("nullable", True),
            primary_key=d.get("primary_key", False),
            stats=ColumnStats.from_dict(stats) if stats else None,
            declared_type=d.get("declared_type"),
        )


@dataclass(frozen=True)
class ForeignKey:
    """``table(columns) REFERENCES ref_table(ref_columns)``; composite keys have several columns."""

    table: str
    columns: tuple[str, ...]
    ref_table: str
    ref_columns: tuple[str, ...]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ForeignKey:
        return cls(d["table"], tuple(d["columns"]), d["ref_table"], tuple(d["ref_columns"]))


@dataclass(frozen=True)
class TableInfo:
    name: str
    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    row_count: int | None = None

    def column(self, name: str) -> ColumnInfo | None:
        lowered = name.lower()
        for col in self.columns:
            if col.name.lower() == lowered:
                return col
        return None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableInfo:
        return cls(
            name=d["name"],
            columns=tuple(ColumnInfo.from_dict(c) for c in d["columns"]),
            primary_key=tuple(d.get("primary_key", ())),
            foreign_keys=tuple(ForeignKey.from_dict(f) for f in d.get("foreign_keys", ())),
            row_count=d.get("row_count"),
        )


@dataclass(frozen=True)
class SchemaInfo:
    engine: str
    tables: tuple[TableInfo, ...]
    fingerprint: str = ""

    def table(self, name: str) -> TableInfo | None:
        lowered = name.lower()
        for table in self.tables:
            if table.name.lower() == lowered:
                return table
        return None

    @property
    def columns(self) -> list[ColumnInfo]:
        return [c for t in self.tables for c in t.columns]

    @property
    def foreign_keys(self) -> list[ForeignKey]:
        return [fk for t in self.tables for fk in t.foreign_keys]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SchemaInfo:
        return cls(
            engine=d["engine"],
            tables=tuple(TableInfo.from_dict(t) for t in d["tables"]),
            fingerprint=d.get("fingerprint", ""),
        )


def with_foreign_keys(schema: SchemaInfo, extra: Sequence[ForeignKey]) -> SchemaInfo:
    """The schema with foreign keys the target does not declare (a dataset patch, e.g. Spider's flight_2),
    added to their tables. A key already there, or naming a missing table or column, is left out."""
    added: dict[str, list[ForeignKey]] = {}
    for fk in extra:
        table, ref = schema.table(fk.table), schema.table(fk.ref_table)
        if table is None or ref is None or len(fk.columns) != len(fk.ref_columns) or not fk.columns:
            continue
        if any(table.column(c) is None for c in fk.columns) or any(ref.column(c) is None for c in fk.ref_columns):
            continue
        key = ForeignKey(table.name, tuple(table.column(c).name for c in fk.columns), ref.name,  # type: ignore[union-attr]
                         tuple(ref.column(c).name for c in fk.ref_columns))  # type: ignore[union-attr]
        if key not in table.foreign_keys and key not in added.get(table.name, []):
            added.setdefault(table.name, []).append(key)
    if not added:
        return schema
    return replace(schema, tables=tuple(replace(t, foreign_keys=(*t.foreign_keys, *added[t.name]))
                                        if t.name in added else t for t in schema.tables))


# --- results -----------------------------------------------------------------


@dataclass(frozen=True)
class QueryResult:
    """Rows of one read query, capped.

    ``total_rows`` is the number of rows the query produced as far as it was
    counted; ``total_is_exact`` is False when counting stopped at the count cap
    or the deadline (then the true count is larger).
    """

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    total_rows: int
    total_is_exact: bool = True
    truncated_bytes: bool = False
    elapsed_ms: float = 0.0

    @property
    def truncated(self) -> bool:
        return self.total_rows > len(self.rows) or not self.total_is_exact or self.truncated_bytes

    def to_json(self, *, max_rows: int | None = None) -> dict[str, Any]:
        """JSON-safe form for storage: bytes become base64 text, dates and decimals their string form."""
        rows = self.rows if max_rows is None else self.rows[:max_rows]
        return {"columns": list(self.columns), "rows": [[json_cell(v) for v in r] for r in rows],
                "total_rows": self.total_rows, "total_is_exact": self.total_is_exact,
                "truncated_bytes": self.truncated_bytes, "elapsed_ms": self.elapsed_ms}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> QueryResult:
        return cls(columns=tuple(d["columns"]), rows=[tuple(r) for r in d["rows"]], total_rows=int(d["total_rows"]),
                   total_is_exact=bool(d.get("total_is_exact", True)),
                   truncated_bytes=bool(d.get("truncated_bytes", False)), elapsed_ms=float(d.get("elapsed_ms", 0)))


def ms_since(started: float) -> float:
    """Milliseconds since ``started`` (a time.monotonic() reading)."""
    return (time.monotonic() - started) * 1000


def row_size(row: tuple[Any, ...]) -> int:
    """Bytes of Python memory a fetched row holds (the tuple and each value), for the byte cap."""
    return sys.getsizeof(row) + sum(map(sys.getsizeof, row))


def human_bytes(n: int) -> str:
    """``2 MB``, ``16 KB``, ``900 bytes``, ``1 GB``: how limits and sizes are named in messages."""
    if n >= 1000 * 1024 * 1024:  # 1024 MB would print as 1.02e+03 MB
        return f"{n / (1024 * 1024 * 1024):.3g} GB"
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.3g} MB"
    if n >= 1024:
        return f"{n / 1024:.3g} KB"
    return f"{n} bytes"


def json_cell(value: Any) -> Any:
    """One result cell as JSON: bytes become ``base64:...`` text, dates and decimals their string form."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "base64:" + base64.b64encode(bytes(value)).decode()
    return str(value)


@dataclass(frozen=True)
class Limits:
    """Caps applied to every query; callers may tighten them per call.

    ``max_bytes`` counts the Python memory of the rows kept (``row_size``);
    past it the result is cut (``truncated_bytes``). Whatever the caps, a
    connector never lets one query raise its process by more than about
    100 MB (see ``sqlite.py`` and ``postgres.py``).
    """

    timeout_s: float = 10.0
    max_rows: int = 1000
    max_bytes: int = 2_000_000
    count_cap: int = 100_000  # rows counted past max_rows to say "and N more rows"


DEFAULT_LIMITS = Limits()


class Connector(abc.ABC):
    """A read-only handle on one target database. Not thread-safe: one per thread."""

    engine: str = ""

    def __init__(self, *, limits: Limits | None = None) -> None:
        self.limits = limits or DEFAULT_LIMITS

    @abc.abstractmethod
    def execute(self, sql: str, *, limits: Limits | None = None) -> QueryResult:
        """Run one read-only query under the limits; raise an SQLError subclass on failure."""

    @abc.abstractmethod
    def introspect(self, *, with_stats: bool = True) -> SchemaInfo:
        """Tables, columns, keys, row counts and (optionally) per-column statistics."""

    @abc.abstractmethod
    def fingerprint(self) -> str:
        """A string that changes when the target database's content may have changed."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @property
    @abc.abstractmethod
    def dialect(self) -> str:
        """sqlglot dialect name."""

    def quote_ident(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def quote_table(self, name: str) -> str:
        """A table name as shown in SchemaInfo, quoted for this engine (schema-qualified where needed)."""
        return self.quote_ident(name)

    def __enter__(self) -> Connector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
