"""Create a least-privilege PostgreSQL role for a target database, then print the DSN to register."""

from __future__ import annotations

import secrets
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from django.core.management.base import BaseCommand, CommandError

from agent.sql.pg_roles import readonly_role_sql, role_problems


class Command(BaseCommand):
    help = ("Create a PostgreSQL role that can only read one target database (LOGIN, no superuser, no file roles, "
            "SELECT only, CREATE revoked from PUBLIC on the schemas), check it, and print the DSN to register.")

    def add_arguments(self, parser):
        parser.add_argument("admin_dsn", help="DSN of the target database as its owner or a superuser, "
                                              "e.g. postgresql://postgres@host:5432/sales")
        parser.add_argument("role", help="Name of the role to create, e.g. t2s_reader")
        parser.add_argument("--schema", action="append", dest="schemas",
                            help="Schema to grant SELECT on (repeatable; default: public)")
        parser.add_argument("--password", help="Its password (default: a random one, printed once)")

    def handle(self, *args, admin_dsn, role, schemas, password, **options):
        password = password or secrets.token_urlsafe(18)
        parts = urlsplit(admin_dsn)
        database = parts.path.lstrip("/")
        if parts.scheme not in ("postgres", "postgresql") or not database:
            raise CommandError("Give the target database's DSN: postgresql://owner@host:5432/dbname")
        try:
            with psycopg.connect(admin_dsn, autocommit=True, connect_timeout=10) as conn:
                for stmt in readonly_role_sql(role, database, schemas=tuple(schemas or ("public",)),
                                              password=password):
                    conn.execute(stmt)
        except psycopg.Error as exc:
            raise CommandError(f"Could not create the role: {str(exc).strip().splitlines()[0]}") from None
        host = parts.hostname or "localhost"
        netloc = f"{quote(role)}:{quote(password, safe='')}@{host}" + (f":{parts.port}" if parts.port else "")
        dsn = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        try:
            with psycopg.connect(dsn, connect_timeout=10) as conn:
                problems = role_problems(conn)
        except psycopg.Error as exc:
            raise CommandError(f"Created {role}, but it cannot connect: {str(exc).strip().splitlines()[0]}") from None
        if problems:
            raise CommandError(f"Created {role}, but it is not read-only: {'; '.join(problems)}")
        self.stdout.write(self.style.SUCCESS(f"Created {role}: it can only read {database}."))
        self.stdout.write(f"Register it with (the password is shown only now):\n  {dsn}")
