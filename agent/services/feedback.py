"""What people do with an answer: say it is right or wrong (with the SQL that would be right), take its rows
away as CSV, ask a follow-up. The callers check who may (``agent.policies``)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from agent.conf import agent_settings
from agent.models import AgentSession, AnswerFeedback, Database
from agent.sql import Limits, QueryResult, SQLError
from agent.textclean import clean_json, clean_text

from .databases import open_connector

CORRECTED_PREVIEW_ROWS = 20
MAX_CORRECTED_SQL_CHARS = 20_000


def answer_feedback_set(*, session: AgentSession, user, verdict: str, corrected_sql: str = "",
                        note: str = "") -> AnswerFeedback:
    """Store (or replace) ``user``'s verdict on the session's answer.

    A corrected query goes only with "wrong", and is kept only once it ran read-only on the session's database:
    the connector's guard refuses anything it cannot prove a single read-only query, and that refusal is the
    answer (nothing stored)."""
    if session.is_active:
        raise ValidationError({"verdict": ["The session has not answered yet."]})
    if verdict not in AnswerFeedback.Verdict.values:
        raise ValidationError({"verdict": ["Say whether the answer is right or wrong."]})
    corrected_sql = (corrected_sql or "").strip()
    if corrected_sql and verdict != AnswerFeedback.Verdict.WRONG:
        raise ValidationError({"corrected_sql": ["A corrected query goes with a wrong answer."]})
    if len(corrected_sql) > MAX_CORRECTED_SQL_CHARS:
        raise ValidationError({"corrected_sql": [f"At most {MAX_CORRECTED_SQL_CHARS} characters."]})
    preview = None
    if corrected_sql:
        try:
            result = _run(session.database, corrected_sql, max_rows=CORRECTED_PREVIEW_ROWS)
        except SQLError as exc:
            raise ValidationError({"corrected_sql": [f"The corrected query did not run: {exc}"]}) from None
        preview = result.to_json(max_rows=CORRECTED_PREVIEW_ROWS)
    with transaction.atomic():
        feedback, _ = AnswerFeedback.objects.update_or_create(
            session=session, author=user,
            defaults={"verdict": verdict, "corrected_sql": clean_text(corrected_sql),
                      "corrected_preview": clean_json(preview), "note": clean_text((note or "").strip())})
    return feedback


def answer_rows(*, session: AgentSession) -> QueryResult:
    """The answer's rows, all of them up to the query row limit: the final query run again, read-only (the
    session keeps only its first rows)."""
    if not session.final_sql:
        raise ValidationError("This session has no answer to download.")
    try:
        return _run(session.database, session.final_sql, max_rows=int(agent_settings.QUERY_MAX_ROWS))
    except SQLError as exc:
        raise ValidationError(f"The answer's query did not run again: {exc}") from None


def follow_up_context(*, parent: AgentSession, keep: int = 5, rows: int = 5) -> list[dict[str, Any]]:
    """The earlier turns of a conversation, oldest first, ending with ``parent``: each its question, the SQL
    that answered it and the answer's first rows (what the follow-up's prompt shows the model)."""
    earlier = list((parent.config or {}).get("conversation") or [])
    result = parent.result or {}
    earlier.append({"question": parent.question, "sql": parent.final_sql,
                    "columns": list(result.get("columns") or []),
                    "rows": [list(r) for r in (result.get("rows") or [])[:rows]],
                    "total_rows": result.get("total_rows")})
    return clean_json(earlier[-keep:])


def _run(database: Database, sql: str, *, max_rows: int) -> QueryResult:
    with open_connector(database, limits=Limits(timeout_s=10, max_rows=max_rows)) as conn:
        return conn.execute(sql)
