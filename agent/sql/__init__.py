"""Read-only connectors to target databases, schema and statistics introspection.

    from agent.sql import connect
    with connect("sqlite", "chinook.sqlite") as db:
        db.execute("SELECT Name FROM Artist LIMIT 3").rows
"""

from __future__ import annotations

from .base import (
    DEFAULT_LIMITS,
    ColumnInfo,
    ColumnStats,
    ConnectionFailed,
    Connector,
    ForeignKey,
    Limits,
    QueryRejected,
    QueryResult,
    QueryTimeout,
    ReadOnlyViolation,
    ResultTooLarge,
    SchemaInfo,
    SQLError,
    TableInfo,
    with_foreign_keys,
)

ENGINES = ("sqlite", "postgresql")


def connect(engine: str, location: str, *, limits: Limits | None = None, **options) -> Connector:
    """Open a read-only connector: ``location`` is a file path (sqlite) or a DSN (postgresql).

    ``options`` go to the PostgreSQL connector (``refuse``: server identities never to connect to), or to the
    SQLite one (``sandbox``: a query process to share, e.g. one per worker thread)."""
    if engine == "sqlite":
        from .sqlite import SQLiteConnector

        return SQLiteConnector(location, limits=limits, **options)
    if engine == "postgresql":
        from .postgres import PostgresConnector

        return PostgresConnector(location, limits=limits, **options)
    raise ValueError(f"Unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")


__all__ = [
    "DEFAULT_LIMITS", "ENGINES", "ColumnInfo", "ColumnStats", "ConnectionFailed", "Connector", "ForeignKey",
    "Limits", "QueryRejected", "QueryResult", "QueryTimeout", "ReadOnlyViolation", "ResultTooLarge", "SQLError",
    "SchemaInfo", "TableInfo", "connect", "with_foreign_keys",
]
