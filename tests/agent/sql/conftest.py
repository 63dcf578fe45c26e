"""Fixtures of the connector tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def pg_target(pg_database):
    """A throwaway PostgreSQL target with one table ``t`` of two rows; its DSN (the admin's)."""
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (x integer); INSERT INTO t VALUES (1), (2)")
    return pg_database
