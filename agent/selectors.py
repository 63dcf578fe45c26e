"""Reads for the agent app."""

from __future__ import annotations

from agent.models import Database
from agent.services import open_connector
from agent.sql import Limits, QueryResult, SchemaInfo, TableInfo


def database_list(*, status: str | None = None):
    qs = Database.objects.all()
    return qs.filter(status=status) if status else qs


def database_table(*, database: Database, table: str) -> TableInfo | None:
    schema: SchemaInfo | None = database.schema_info()
    return schema.table(table) if schema else None


def table_preview(*, database: Database, table: TableInfo, rows: int = 10) -> QueryResult:
    """The first rows of one table, through the read-only connector (internal names, quoted)."""
    with open_connector(database, limits=Limits(timeout_s=5, max_rows=rows, count_cap=0)) as conn:
        return conn.execute(f"SELECT * FROM {conn.quote_table(table.name)} LIMIT {int(rows)}")
