"""What a PostgreSQL role may do, checked when a target is registered and on every new connection.

A target connection must belong to a role that can only read: not a superuser, not a member of the roles that
read or write server files or run server programs, and with no INSERT/UPDATE/DELETE/TRUNCATE on any table nor
CREATE on the database or any schema of it. The READ ONLY transaction stays the engine-level guard; this makes
sure that even a way around it (a function that opens its own connection, a writable role) finds nothing to use.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql as pg_sql

from .base import ConnectionFailed


class RoleRefused(ConnectionFailed):
    """The target's role could write, reach server files, or the target is the app's own database."""


SERVER_FILE_ROLES = ("pg_read_server_files", "pg_write_server_files", "pg_execute_server_program")

_CHECK = """
SELECT r.rolsuper,
       r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls AS rolpowers,
       ARRAY(SELECT s.name FROM unnest(%(file_roles)s::text[]) AS s(name)
             WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = s.name)
               AND pg_has_role(current_user, s.name, 'MEMBER')) AS file_roles,
       has_database_privilege(current_database(), 'CREATE') AS db_create,
       ARRAY(SELECT n.nspname FROM pg_namespace n
             WHERE n.nspname NOT LIKE 'pg\\_%%' AND n.nspname <> 'information_schema'
               AND has_schema_privilege(n.oid, 'CREATE')) AS schema_create,
       ARRAY(SELECT format('%%I.%%I', n.nspname, c.relname) FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
               AND n.nspname NOT LIKE 'pg\\_%%' AND n.nspname <> 'information_schema'
               AND has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')
             LIMIT 5) AS writable
FROM pg_roles r WHERE r.rolname = current_user
"""


def role_problems(conn: Any) -> list[str]:
    """Why the connection's role may not be used for a target (empty: it may). ``conn``: a psycopg connection."""
    with conn.cursor() as cur:
        cur.execute(_CHECK, {"file_roles": list(SERVER_FILE_ROLES)})
        row = cur.fetchone()
    if row is None:
        return ["the connection's role was not found"]
    superuser, powers, file_roles, db_create, schema_create, writable = row
    problems = []
    if superuser:
        problems.append("the role is a superuser")
    if powers:
        problems.append("the role may create roles or databases, replicate or bypass row security")
    if file_roles:
        problems.append(f"the role is a member of {', '.join(file_roles)}")
    if db_create:
        problems.append("the role may CREATE in the database")
    if schema_create:
        problems.append(f"the role may CREATE in schema {', '.join(schema_create)}")
    if writable:
        problems.append(f"the role may write to {', '.join(writable)}")
    return problems


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
