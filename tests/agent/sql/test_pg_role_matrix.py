"""The registration rule over generated role configurations (issue #27, findings 1, 3 and 4).

A login role built like ``create_readonly_role``'s reaches, through a chain of zero to three other roles (each
with INHERIT or NOINHERIT), one capability: an attribute, a predefined role, a table, column, sequence,
schema or database privilege, or nothing more. The README's rule says which capabilities refuse a role,
wherever they sit on the chain: Hypothesis draws configurations and the check must accept exactly the
others, at registration and, for a role altered afterwards, at the next query of a connection already open.

Every role has a unique name and a random password, and is dropped after its example; the superuser roles
are NOLOGIN except in the findings' own tests.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agent.sql import connect
from agent.sql.pg_roles import RoleRefused, readonly_role_sql
from tests.conftest import PG_ADMIN_DSN

pytestmark = pytest.mark.postgres

MATRIX = settings(max_examples=30, deadline=None, derandomize=True,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@dataclass(frozen=True)
class Capability:
    """What the last role of the chain is given (``{role}``, ``{db}`` filled in), and whether the rule refuses it."""

    grant: str
    refused: bool


# The README's rule, as data: refused for writes, signals, server files and programs, role/database powers.
CAPABILITIES = [
    Capability("", False),
    Capability("ALTER ROLE {role} SUPERUSER", True),
    Capability("ALTER ROLE {role} CREATEDB", True),
    Capability("ALTER ROLE {role} CREATEROLE", True),
    Capability("ALTER ROLE {role} REPLICATION", True),
    Capability("ALTER ROLE {role} BYPASSRLS", True),
    *[Capability(f"GRANT {r} TO {{role}}", True) for r in (
        "pg_signal_backend", "pg_write_all_data", "pg_read_server_files", "pg_write_server_files",
        "pg_execute_server_program", "pg_checkpoint")],
    *[Capability(f"GRANT {r} TO {{role}}", False) for r in ("pg_read_all_data", "pg_monitor", "pg_read_all_settings")],
    *[Capability(f"GRANT {p} ON t TO {{role}}", True) for p in ("INSERT", "UPDATE", "DELETE", "TRUNCATE")],
    Capability("GRANT SELECT ON t TO {role}", False),
    Capability("GRANT INSERT (name) ON t TO {role}", True),
    Capability("GRANT UPDATE (name) ON t TO {role}", True),
    Capability("GRANT SELECT (name), REFERENCES (name) ON t TO {role}", False),
    Capability("GRANT USAGE ON SEQUENCE s TO {role}", True),
    Capability("GRANT UPDATE ON SEQUENCE s TO {role}", True),
    Capability("GRANT SELECT ON SEQUENCE s TO {role}", False),
    Capability("GRANT CREATE ON SCHEMA public TO {role}", True),
    Capability("GRANT CREATE ON DATABASE {db} TO {role}", True),
    Capability("GRANT TEMPORARY ON DATABASE {db} TO {role}", False),
]


@st.composite
def configurations(draw):
    chain = draw(st.lists(st.booleans(), max_size=3))  # one INHERIT flag per role after the login role
    return draw(st.booleans()), chain, draw(st.sampled_from(CAPABILITIES))


@pytest.fixture
def target(pg_database):
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id integer PRIMARY KEY, name text); INSERT INTO t VALUES (1, 'one');"
                     "CREATE SEQUENCE s")
    return pg_database


class Roles:
    """Builds a login role and its chain on the target; ``drop()`` removes every role it made."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.database = dsn.rsplit("/", 1)[1]
        self.made: list[str] = []

    def login(self, *, inherit: bool = True) -> tuple[str, str]:
        role, password = f"t2s_m_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for stmt in readonly_role_sql(role, self.database, password=password):
                conn.execute(stmt)
            if not inherit:
                conn.execute(f'ALTER ROLE "{role}" NOINHERIT')
        self.made.append(role)
        host = PG_ADMIN_DSN.split("@", 1)[1].rsplit("/", 1)[0]
        return role, f"postgresql://{role}:{password}@{host}/{self.database}"

    def chain(self, member: str, inherits: list[bool]) -> str:
        """Roles granted one to the next from ``member``; returns the last (``member`` itself if none)."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for inherit in inherits:
                role = f"t2s_m_{uuid.uuid4().hex[:10]}"
                conn.execute(f'CREATE ROLE "{role}" NOLOGIN {"INHERIT" if inherit else "NOINHERIT"}')
                self.made.append(role)
                conn.execute(f'GRANT "{role}" TO "{member}"')
                member = role
        return member

    def give(self, role: str, capability: Capability) -> None:
        if capability.grant:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(capability.grant.format(role=f'"{role}"', db=f'"{self.database}"'))

    def drop(self) -> None:
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as admin, \
                psycopg.connect(self.dsn, autocommit=True) as conn:
            for role in reversed(self.made):
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
                conn.execute(f'DROP OWNED BY "{role}"')
                admin.execute(f'DROP ROLE IF EXISTS "{role}"')
        self.made.clear()


def registers(dsn: str) -> bool:
    try:
        connect("postgresql", dsn).close()
    except RoleRefused:
        return False
    return True


@MATRIX
@given(configurations())
def test_registration_accepts_exactly_the_roles_the_rule_allows(target, configuration):
    login_inherits, chain, capability = configuration
    roles = Roles(target)
    try:
        login, dsn = roles.login(inherit=login_inherits)
        roles.give(roles.chain(login, chain), capability)
        event(f"chain of {len(chain)}, {'refused' if capability.refused else 'accepted'}")
        assert registers(dsn) is not capability.refused, (login_inherits, chain, capability)
    finally:
        roles.drop()


@settings(MATRIX, max_examples=12)
@given(configurations())
def test_a_role_given_a_refused_capability_after_registration_is_refused_at_its_next_query(target, configuration):
    login_inherits, chain, capability = configuration
    roles = Roles(target)
    try:
        login, dsn = roles.login(inherit=login_inherits)
        last = roles.chain(login, chain)
        with connect("postgresql", dsn) as db:  # registered and open, as in a running session
            assert db.execute("SELECT count(*) FROM t").rows == [(1,)]
            roles.give(last, capability)
            if capability.refused:
                with pytest.raises(RoleRefused):
                    db.execute("SELECT count(*) FROM t")
            else:
                assert db.execute("SELECT count(*) FROM t").rows == [(1,)]
    finally:
        roles.drop()
