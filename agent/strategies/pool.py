"""The example pool that retrieving strategies draw from (DART-SQL's DAIL selection, SCL-SQL's positives).

A pool is a list of question/SQL pairs, each with a stable ``key`` naming
where it comes from (``dataset:<id>:<index>`` for a dataset's gold pair,
``exemplar:<id>`` for a published exemplar, ...). The session layer resolves
the pool chosen for a run into ``SessionContext.example_pool`` and sets
``SessionContext.question_key`` to the key the question itself would have
in such a pool. ``candidates`` leaves that key out, so a Spider dev run can
use Spider dev as its pool without ever retrieving the question's own gold
query (leave-one-out, matched by key, never by question text: Spider has
questions whose text repeats with different databases or gold queries).

Pure Python; no Django.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import SessionContext


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


def candidates(ctx: SessionContext) -> tuple[list[PoolExample], int]:
    """The examples a strategy may retrieve for ``ctx``, and how many were left out as the question itself.

    The pool given to the session, minus the question's own entry, plus the session's exemplars that
    have a final SQL query (keys ``session-exemplar:<n>``).
    """
    pool: Sequence[PoolExample] = ctx.example_pool
    kept = [e for e in pool if ctx.question_key is None or e.key != ctx.question_key]
    left_out = len(pool) - len(kept)
    kept += [PoolExample(f"session-exemplar:{i}", e.question, e.final_sql)
             for i, e in enumerate(ctx.exemplars) if e.final_sql]
    return kept, left_out
