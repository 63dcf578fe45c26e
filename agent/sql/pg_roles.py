"""What a PostgreSQL role may do: checked at registration, on every connection and at the start of each query.

A target connection must belong to a role that can only read. The check follows every membership path
(``pg_has_role(..., 'MEMBER')``: direct or through other roles, with INHERIT or NOINHERIT, since a member may
``SET ROLE`` to what it does not inherit) and refuses the role when it or any role it reaches

- is a superuser, or has CREATEROLE, CREATEDB, REPLICATION or BYPASSRLS;
- is (or reaches) a predefined role that writes, signals, checkpoints, subscribes, or reads or writes server
  files or runs server programs (``WRITING_PREDEFINED_ROLES``);
- may INSERT, UPDATE, DELETE or TRUNCATE any table, view or foreign table, INSERT or UPDATE any column
  (``has_any_column_privilege``: column grants count), or use or update any sequence;
- may CREATE in the database (its owner may) or in any schema of it.

TEMP on the database is not refused: every CREATE, temporary tables included, is refused inside the READ ONLY
transaction each query runs in, and PostgreSQL grants TEMP to PUBLIC by default. The READ ONLY transaction
stays the engine-level guard; this makes sure that even a way around it (a function that opens its own
connection, a writable role) finds nothing to use. ``CHECK_SQL`` is one catalog query.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql as pg_sql

from .base import ConnectionFailed


class RoleRefused(ConnectionFailed):
    """The target's role could write, reach server files, or the target is the app's own database."""


# Predefined roles a reading role must not reach (the ones a server does not have are simply never reached).
WRITING_PREDEFINED_ROLES = (
    "pg_write_all_data", "pg_signal_backend", "pg_read_server_files", "pg_write_server_files",
    "pg_execute_server_program", "pg_checkpoint", "pg_create_subscription", "pg_maintain",
    "pg_signal_autovacuum_worker",
)

CHECK_SQL = pg_sql.SQL("""
WITH reach AS (SELECT oid, rolname, rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls
               FROM pg_roles WHERE pg_has_role(current_user, oid, 'MEMBER')),
     relations AS (SELECT c.oid, c.relkind, format('%I.%I', n.nspname, c.relname) AS name FROM pg_class c
                   JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
                     AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema')
SELECT
  (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
  ARRAY(SELECT rolname FROM reach WHERE rolsuper ORDER BY rolname),
  ARRAY(SELECT DISTINCT power FROM reach, LATERAL (VALUES ('CREATEROLE', rolcreaterole), ('CREATEDB', rolcreatedb),
        ('REPLICATION', rolreplication), ('BYPASSRLS', rolbypassrls)) AS p(power, has) WHERE has ORDER BY power),
  ARRAY(SELECT rolname FROM reach WHERE rolname = ANY({predefined}) ORDER BY rolname),
  EXISTS (SELECT 1 FROM reach WHERE has_database_privilege(oid, current_database(), 'CREATE')),
  ARRAY(SELECT n.nspname FROM pg_namespace n
        WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
          AND EXISTS (SELECT 1 FROM reach WHERE has_schema_privilege(reach.oid, n.oid, 'CREATE'))
        ORDER BY n.nspname LIMIT 5),
  ARRAY(SELECT r.name FROM relations r
        WHERE EXISTS (SELECT 1 FROM reach WHERE CASE WHEN r.relkind = 'S'
                        THEN has_sequence_privilege(reach.oid, r.oid, 'USAGE, UPDATE')
                        ELSE has_table_privilege(reach.oid, r.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')
                          OR has_any_column_privilege(reach.oid, r.oid, 'INSERT, UPDATE') END)
        ORDER BY r.name LIMIT 5)
""").format(predefined=pg_sql.Literal(list(WRITING_PREDEFINED_ROLES)))


def problems_from(row: tuple[Any, ...] | None) -> list[str]:
    """Why the role may not be used for a target, from ``CHECK_SQL``'s row (empty: it may)."""
    if row is None or row[0] is None:
        return ["the connection's role was not found"]
    superuser, superusers, powers, predefined, db_create, schema_create, writable = row
    if superuser:
        return ["the role is a superuser"]
    problems = []
    if superusers:
        problems.append(f"the role is a member of superuser {', '.join(superusers)}")
    if powers:
        problems.append(f"the role has or may take {', '.join(powers)}")
    if predefined:
        problems.append(f"the role is a member of {', '.join(predefined)}")
    if db_create:
        problems.append("the role may CREATE in the database")
    if schema_create:
        problems.append(f"the role may CREATE in schema {', '.join(schema_create)}")
    if writable:
        problems.append(f"the role may write to {', '.join(writable)}")
    return problems


def role_problems(conn: Any) -> list[str]:
    """Why the connection's role may not be used for a target (empty: it may). ``conn``: a psycopg connection."""
    with conn.cursor() as cur:
        cur.execute(CHECK_SQL)
        return problems_from(cur.fetchone())


def server_identity(conn: Any) -> tuple[str, int]:
    """(server start time, database oid): equal for two connections to the same database of the same server."""
    with conn.cursor() as cur:
        cur.execute("SELECT pg_postmaster_start_time()::text, oid::int FROM pg_database "
                    "WHERE datname = current_database()")
        start, oid = cur.fetchone()
    return str(start), int(oid)


def readonly_role_sql(role: str, database: str, *, schemas: tuple[str, ...] = ("public",),
                      password: str | None = None) -> list[pg_sql.Composed]:
    """Statements creating a least-privilege role that may only read ``database`` (run as its owner or a superuser).

    Also revokes CREATE on the schemas from PUBLIC, which PostgreSQL before 15 grants by default."""
    ident = pg_sql.Identifier(role)
    stmts = [pg_sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
                        "{}").format(ident, pg_sql.SQL(" PASSWORD {}").format(pg_sql.Literal(password))
                                     if password else pg_sql.SQL("")),
             pg_sql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(pg_sql.Identifier(database), ident),
             pg_sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(pg_sql.Identifier(database), ident)]
    for schema in schemas:
        s = pg_sql.Identifier(schema)
        stmts += [pg_sql.SQL("REVOKE CREATE ON SCHEMA {} FROM PUBLIC").format(s),
                  pg_sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, ident),
                  pg_sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(s, ident),
                  pg_sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA {} GRANT SELECT ON TABLES TO {}").format(s, ident)]
    stmts.append(pg_sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(ident))
    return stmts
