"""The example pool that retrieving strategies draw from (DART-SQL's DAIL selection, SCL-SQL's positives).

A pool is a list of question/SQL pairs, each with a stable ``key`` naming
where it comes from (``dataset:<id>:<index>`` for a dataset's gold pair,
``exemplar:<id>`` for a published exemplar, ...). The session layer resolves
the pool chosen for a run into ``SessionContext.example_pool`` and sets
``SessionContext.pool_exclusion`` to what the question may not see:

- ``cross-database`` (the default, as Spider's split, whose train and dev share
  no database): no example of the question's own database, no exact duplicate
  of the question or of its gold SQL, and never the question's own entry;
- ``duplicates`` (a separate pool: another split, an exemplar set, a curated
  pool): only exact duplicates of the question or its gold SQL, and its own entry.

Spider dev has many questions whose gold SQL equals another question's on the
same database, so leaving out only the question's own entry would hand the
model its answer.

Pure Python; no Django.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import SessionContext

CROSS_DATABASE = "cross-database"
DUPLICATES = "duplicates"
RULES = {
    CROSS_DATABASE: "no example of the question's own database, nor any exact duplicate of the question or its "
                    "gold SQL",
    DUPLICATES: "only exact duplicates of the question or its gold SQL left out (a separate pool)",
}


@dataclass(frozen=True)
class PoolExample:
    key: str
    question: str
    sql: str
    db_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "question": self.question, "sql": self.sql, "db_id": self.db_id}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PoolExample:
        return cls(str(d["key"]), str(d["question"]), str(d["sql"]), d.get("db_id"))


@dataclass(frozen=True)
class PoolExclusion:
    """What one question may not retrieve from its run's pool (see the module's rules)."""

    rule: str = CROSS_DATABASE
    key: str | None = None
    db_id: str | None = None
    question: str | None = None
    sql: str | None = None

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"Unknown pool rule {self.rule!r}; expected one of {', '.join(RULES)}")

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "key": self.key, "db_id": self.db_id, "question": self.question, "sql": self.sql}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PoolExclusion:
        return cls(str(d.get("rule") or CROSS_DATABASE), d.get("key"), d.get("db_id"), d.get("question"),
                   d.get("sql"))

    def excludes(self, example: PoolExample) -> bool:
        if self.key is not None and example.key == self.key:
            return True
        if self.question and normal_question(example.question) == normal_question(self.question):
            return True
        if self.sql and normal_sql(example.sql) == normal_sql(self.sql):
            return True
        return (self.rule == CROSS_DATABASE and self.db_id is not None and example.db_id is not None
                and example.db_id.casefold() == self.db_id.casefold())


def normal_question(text: str) -> str:
    """A question as duplicates are compared: case and runs of whitespace ignored."""
    return " ".join(text.split()).casefold()


def normal_sql(sql: str) -> str:
    """A query as duplicates are compared: case, runs of whitespace and a final semicolon ignored."""
    return " ".join(sql.split()).rstrip(";").rstrip().casefold()


def left_out_note(ctx: SessionContext, left_out: int) -> str:
    """Why ``left_out`` examples were not candidates, for the strategy's retrieval turn."""
    if not left_out:
        return ""
    exclusion = ctx.pool_exclusion
    reason = RULES[exclusion.rule] if exclusion is not None else "the question itself"
    return f" ({left_out} left out: {reason})"


def candidates(ctx: SessionContext) -> tuple[list[PoolExample], int]:
    """The examples a strategy may retrieve for ``ctx``, and how many of the pool were left out.

    The pool given to the session minus what ``ctx.pool_exclusion`` excludes (without one, minus the entry
    keyed ``ctx.question_key``, as sessions stored before the rules did), plus the session's exemplars that
    have a final SQL query (keys ``session-exemplar:<n>``).
    """
    pool: Sequence[PoolExample] = ctx.example_pool
    exclusion = ctx.pool_exclusion
    if exclusion is None and ctx.question_key is not None:
        exclusion = PoolExclusion(rule=DUPLICATES, key=ctx.question_key)
    kept = [e for e in pool if exclusion is None or not exclusion.excludes(e)]
    left_out = len(pool) - len(kept)
    kept += [PoolExample(f"session-exemplar:{i}", e.question, e.final_sql)
             for i, e in enumerate(ctx.exemplars) if e.final_sql]
    return kept, left_out
