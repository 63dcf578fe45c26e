"""Helpers shared by the prompt-pipeline strategies (DART-SQL, HDSP, SCL-SQL).

These strategies are fixed pipelines of LLM calls and query executions rather
than a ReAct loop. Each is written as straight-line code over ``TurnLog``: a
step first asks the log for the stored turn at its position (resume after a
crash without calling the LLM again) and only otherwise does the work and
reports the new turn through ``on_turn``. Because every input of a later step
(rewritten question, executed SQL, its result) is stored in an earlier turn,
replaying stored turns reproduces the same state.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

from agent.llm import ChatModel, Completion, LLMError, Message
from agent.sql import QueryResult, SchemaInfo
from agent.tools import registry
from agent.tools.base import ToolResult
from agent.tools.text import ident, sql_literal

from .base import OnTurn, Outcome, SessionContext, ShouldCancel, Status, Strategy, Totals, TurnRecord
from .options import call_seed

EXECUTE_SQL = "ExecuteSQL"

C = TypeVar("C")


class Stop(Exception):
    """Ends a pipeline early (LLM failure, cancel); ``run`` turns it into an Outcome."""

    def __init__(self, status: Status, error: str) -> None:
        super().__init__(error)
        self.status = status
        self.error = error


@dataclass(frozen=True)
class LLMParams:
    model: str | None
    temperature: float
    top_p: float
    max_tokens: int
    max_total_tokens: int | None = None  # prompt + completion over the session; checked before each call
    seed: int | None = None  # the session's sampling seed (call_seed adds each call's turn index)


class TurnLog:
    """The turns of one session: stored ones are replayed in order, new ones are reported and kept."""

    def __init__(self, previous_turns: Sequence[TurnRecord], on_turn: OnTurn) -> None:
        stored = sorted(previous_turns, key=lambda t: t.index)
        self.turns: list[TurnRecord] = list(stored)
        # A stored failed LLM call is not replayed: the resumed run retries that step.
        self._pending = deque(t for t in stored if not (t.completion is None and t.error and t.messages))
        self._on_turn = on_turn
        self.next_index = max((t.index for t in stored), default=-1) + 1

    def replay(self, kind: str) -> TurnRecord | None:
        if self._pending and self._pending[0].kind == kind:
            return self._pending.popleft()
        # The stored history diverges from this pipeline (e.g. a changed config): continue live after it.
        self._pending.clear()
        return None

    def record(self, **values: Any) -> TurnRecord:
        turn = TurnRecord(index=self.next_index, **values)
        self.next_index += 1
        self._on_turn(turn)
        self.turns.append(turn)
        return turn

    def step(self, kind: str, work: Callable[[], Mapping[str, Any]]) -> TurnRecord:
        """A step without an LLM call (tool lookups, keyword extraction): replayed or done and recorded."""
        stored = self.replay(kind)
        if stored is not None:
            return stored
        return self.record(kind=kind, **work())

    def totals(self) -> Totals:
        return Totals.from_turns(self.turns)


def ask(
    log: TurnLog,
    kind: str,
    messages: Callable[[], Sequence[Message]],
    *,
    llm: ChatModel,
    params: LLMParams,
    should_cancel: ShouldCancel,
    finish: Callable[[str], Mapping[str, Any]] | None = None,
) -> TurnRecord:
    """One LLM step. ``messages`` is built lazily (a replayed step needs none); ``finish`` maps the
    completion text to further turn fields (executed SQL, verdict, extra)."""
    stored = log.replay(kind)
    if stored is not None:
        return stored
    if should_cancel():
        raise Stop(Status.CANCELLED, "Cancelled.")
    check_token_cap(log, params.max_total_tokens)
    msgs = tuple(messages())
    try:
        completion = llm.complete(msgs, model=params.model, temperature=params.temperature, top_p=params.top_p,
                                  max_tokens=params.max_tokens, seed=call_seed(params.seed, log.next_index))
    except LLMError as exc:
        log.record(kind=kind, messages=msgs, error=str(exc), llm_attempts=exc.attempts,
                   llm_latency_ms=exc.latency_ms)  # what the failed attempts really took
        raise Stop(Status.LLM_ERROR, str(exc)) from exc
    text = completion.text.strip()
    values = dict(finish(text)) if finish is not None else {}
    return log.record(kind=kind, messages=msgs, completion=text, **_usage(completion), **values)


def check_token_cap(log: TurnLog, cap: int | None) -> None:
    """Stop before an LLM call once the session's tokens (prompt + completion) reached ``cap``."""
    if cap is not None:
        used = log.totals().total_tokens
        if used >= cap:
            raise Stop(Status.TOKEN_LIMIT, f"Stopped: {used} tokens used, limit {cap}.")


def _usage(completion: Completion) -> dict[str, Any]:
    return {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
            "cost": completion.cost, "llm_latency_ms": completion.latency_ms, "llm_attempts": completion.attempts,
            "model": completion.model, "finish_reason": completion.finish_reason}


# --- executing SQL --------------------------------------------------------------------


def run_sql(tools: Any, sql: str, *, max_observation_chars: int = 4000) -> dict[str, Any]:
    """Execute model-written SQL through the ExecuteSQL tool; the TurnRecord fields describing it."""
    values: dict[str, Any] = {"tool": EXECUTE_SQL, "args": (sql,), "sql": sql}
    try:
        result: ToolResult = tools.run(EXECUTE_SQL, [sql])
    except Exception as exc:  # a tool bug must not end the session; the step records the failure
        message = f"ExecuteSQL failed: {type(exc).__name__}: {exc}"
        return {**values, "observation": f"Error: {message}", "tool_ok": False, "tool_latency_ms": 0.0,
                "error": message}
    observation = result.observation or "(no output)"
    if len(observation) > max_observation_chars:
        observation = observation[:max_observation_chars] + "\n... (cut)"
    return {**values, "sql": result.sql or sql, "observation": observation, "tool_ok": result.ok,
            "result": result.result if result.ok else None, "tool_latency_ms": result.elapsed_ms,
            "error": None if result.ok else first_line(result.observation)}


SAMPLE = "sample"


def sample_rows(log: TurnLog, tools: Any, table: str, limit: int, *, purpose: str) -> QueryResult | None:
    """Up to ``limit`` rows of ``table``, read through the ExecuteSQL tool and stored as a ``sample`` turn
    (replayed on resume, so a resumed run builds the same prompt). None when the table cannot be read."""
    engine = getattr(getattr(tools, "schema", None), "engine", "sqlite")
    sql = f"SELECT * FROM {ident(table, engine == 'postgresql')} LIMIT {int(limit)}"

    def work() -> dict[str, Any]:
        values = run_sql(tools, sql)
        return {**values, "extra": {"table": table, "purpose": purpose}}

    turn = log.step(SAMPLE, work)
    return turn.result if turn.tool_ok else None


def first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text and text.strip() else "tool error"
    return line[:300]


def is_empty(turn: TurnRecord) -> bool:
    return bool(turn.tool_ok) and turn.result is not None and turn.result.total_rows == 0


def executed(turn: TurnRecord) -> bool:
    return bool(turn.tool_ok) and turn.sql is not None


# --- reading completions ----------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*([A-Za-z]*)[ \t]*\n?(.*?)```", re.DOTALL)
_SQL_FENCES = ("", "sql", "sqlite", "postgresql", "postgres", "psql", "pgsql")
_BARE_SQL = re.compile(r"(?:^|\n)\s*((?:SELECT|WITH)\b.*?)(?:;|\n\s*\n|$)", re.DOTALL | re.IGNORECASE)


def extract_sql(text: str) -> str | None:
    """The SQL of a completion: the last fenced block (reasoning may contain earlier fragments), else
    the last statement starting with SELECT/WITH at the start of a line."""
    blocks = [body.strip() for lang, body in _FENCE.findall(text) if lang.lower() in _SQL_FENCES]
    blocks = [b for b in blocks if b]
    if blocks:
        return blocks[-1].rstrip(";").strip() or None
    bare = _BARE_SQL.findall(text)
    if bare:
        return bare[-1].strip().rstrip(";").strip() or None
    return None


_VERDICT = re.compile(r"^\W*(?:verdict\s*:\s*|answer\s*:\s*)?(yes|no)\b", re.IGNORECASE)


def verdict(text: str) -> bool | None:
    """True for a completion starting with Yes, False for No, None when it says neither."""
    m = _VERDICT.match(text)
    return None if m is None else m.group(1).lower() == "yes"


# --- prompt pieces -----------------------------------------------------------------------


def create_table_text(schema: SchemaInfo) -> str:
    """The full schema as CREATE TABLE statements (columns, types, keys): the usual base prompt."""
    case_sensitive = schema.engine == "postgresql"
    parts = []
    for table in schema.tables:
        lines = [f"  {ident(c.name, case_sensitive)} {c.type or ''}".rstrip() for c in table.columns]
        if table.primary_key:
            lines.append("  PRIMARY KEY (" + ", ".join(ident(c, case_sensitive) for c in table.primary_key) + ")")
        for fk in table.foreign_keys:
            lines.append("  FOREIGN KEY (" + ", ".join(ident(c, case_sensitive) for c in fk.columns)
                         + f") REFERENCES {ident(fk.ref_table, case_sensitive)}("
                         + ", ".join(ident(c, case_sensitive) for c in fk.ref_columns) + ")")
        parts.append(f"CREATE TABLE {ident(table.name, case_sensitive)} (\n" + ",\n".join(lines) + "\n);")
    return "\n".join(parts)


def rows_text(result: QueryResult, limit: int, *, cell_chars: int = 100) -> str:
    """Result rows as tuples of SQL literals, one a line (cells are data, never instructions)."""
    lines = ["(" + ", ".join(sql_literal(v, cell_chars) for v in row) + ")" for row in result.rows[:limit]]
    return "\n".join(lines) if lines else "(no rows)"


def result_text(result: QueryResult | None, limit: int, *, cell_chars: int = 100) -> str:
    if result is None:
        return "(no result)"
    total = f"{result.total_rows}" if result.total_is_exact else f"more than {result.total_rows}"
    head = f"Columns: {', '.join(result.columns)} (total {total} rows)"
    body = rows_text(result, limit, cell_chars=cell_chars)
    more = f"\n... ({result.total_rows - limit} more rows not shown)" if result.total_rows > limit else ""
    return f"{head}\n{body}{more}"


def question_text(ctx: SessionContext, question: str, *, use_evidence: bool) -> str:
    text = f"Question: {question.strip()}"
    if use_evidence and ctx.evidence and ctx.evidence.strip():
        text += f"\nEvidence: {ctx.evidence.strip()}"
    return text


def dialect(schema: SchemaInfo) -> str:
    return {"sqlite": "SQLite", "postgresql": "PostgreSQL"}.get(schema.engine, schema.engine or "SQL")


# --- configs -------------------------------------------------------------------------------


def config_to_dict(config: Any) -> dict[str, Any]:
    """JSON-safe snapshot of a frozen config dataclass (tuples become lists)."""
    return _lists(asdict(config))


def _lists(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    return value


def config_from_dict(cls: type[C], d: Mapping[str, Any]) -> C:
    """Keys this version does not know are ignored, so older snapshots still load."""
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in d.items() if k in known})


def check_positive(**values: float) -> None:
    for name, value in values.items():
        if value < 1:
            raise ValueError(f"{name} must be at least 1")


# --- outcome and preview ---------------------------------------------------------------------


def outcome(log: TurnLog, status: Status, final: TurnRecord | None, error: str | None = None) -> Outcome:
    sql = final.sql if final is not None else None
    result = final.result if final is not None and final.tool_ok else None
    return Outcome(status, sql, result, error, log.totals())


class _PreviewDone(Exception):
    def __init__(self, messages: Sequence[Message]) -> None:
        super().__init__("preview")
        self.messages = list(messages)


class _PreviewLLM:
    """Stops the pipeline at its next LLM call and hands back the messages it would send."""

    def complete(self, messages: Sequence[Any], **_: Any) -> Completion:
        raise _PreviewDone([m if isinstance(m, Message) else Message.from_dict(m) for m in messages])


class _PreviewTools:
    """No database in a preview: queries are not run, so sampled rows are absent from the previewed prompt."""

    def __init__(self, schema: SchemaInfo) -> None:
        self.schema = schema
        self.tool_names = registry.tool_names()

    def run(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> ToolResult:
        return ToolResult("Error: not run in a preview.", False, 0.0)


def preview(strategy: Strategy, ctx: SessionContext, previous_turns: Sequence[TurnRecord]) -> list[Message]:
    """The messages of the next LLM call, by running the pipeline dry up to that call.

    Stored turns are replayed as in a resumed run. Database rows are not fetched in a
    preview (there is no connection), so prompts that show sampled rows show none.
    Returns [] when the pipeline would make no further LLM call.
    """
    try:
        strategy.run(ctx, tools=_PreviewTools(ctx.schema), llm=_PreviewLLM(), on_turn=lambda _t: None,
                     previous_turns=previous_turns)
    except _PreviewDone as done:
        return done.messages
    return []


class PipelineStrategy(Strategy):
    """A strategy whose steps go through TurnLog; its preview dry-runs the pipeline to the next LLM call."""

    def preview_messages(self, ctx: SessionContext, previous_turns: Sequence[TurnRecord] = ()) -> list[Message]:
        return preview(self, ctx, previous_turns)


class ConfigBase:
    """Snapshot helpers shared by the strategies' frozen config dataclasses (model and sampling fields)."""

    def to_dict(self) -> dict[str, Any]:
        return config_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Any:
        return config_from_dict(cls, d)

    @property
    def params(self) -> LLMParams:
        return LLMParams(self.model, self.temperature, self.top_p, self.max_tokens,  # type: ignore[attr-defined]
                         getattr(self, "max_total_tokens", None), getattr(self, "sampling_seed", None))

    def check_token_cap_value(self) -> None:
        cap = getattr(self, "max_total_tokens", None)
        if cap is not None and cap < 1:
            raise ValueError("max_total_tokens must be positive or None")
