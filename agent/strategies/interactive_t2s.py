"""Interactive-T2S (paper, section 3): a ReAct loop over SearchValue, SearchColumn, FindShortestPath, ExecuteSQL.

Each round: one LLM call produces ``Thought: ... Action: ...`` (stopped at
``\\nObservation``), the action runs, its Observation joins the conversation.
``Done`` ends the run; the final SQL is the last successfully executed query
that is not a bare ``SELECT * FROM t`` probe.

Safety: only the model's completion is ever parsed for actions. Observations
(database cells included) go back to the model as message content and
nothing in them can steer the loop.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from agent.llm import PAPER_STOP, ChatModel, Completion, LLMError, Message, cut_at_stop
from agent.tools import registry
from agent.tools.base import ToolResult, ToolRunner

from .base import (
    OnTurn,
    Outcome,
    SessionContext,
    ShouldCancel,
    Status,
    Strategy,
    Totals,
    TurnKind,
    TurnRecord,
    never_cancel,
)
from .parsing import DONE, FORMAT_HINT, parse_step
from .prompt import build_messages, enabled_tool_names

EXECUTE_SQL = "ExecuteSQL"

# SELECT * FROM t, optionally LIMIT n [OFFSET m]: a look at the data, not an answer.
_PROBE = re.compile(
    r"""^\s*select\s+\*\s+from\s+(?:[\w$]+|"[^"]+"|`[^`]+`|\[[^\]]+\])(?:\s*\.\s*(?:[\w$]+|"[^"]+"))?"""
    r"""(?:\s+limit\s+\d+(?:\s*(?:,|offset)\s*\d+)?)?\s*;?\s*$""",
    re.IGNORECASE,
)


def is_probe(sql: str) -> bool:
    """True for ``SELECT * FROM t`` with at most a LIMIT/OFFSET: such queries never become the answer."""
    return bool(_PROBE.match(sql))


@dataclass(frozen=True)
class InteractiveT2SConfig:
    """Paper defaults (Table 12 and section 4.1). ``model`` None uses the LLM client's default."""

    model: str | None = None
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 512
    stop: tuple[str, ...] = PAPER_STOP
    max_rounds: int = 12
    max_total_tokens: int | None = None  # prompt + completion over the session; checked before each call
    enabled_tools: tuple[str, ...] = field(default_factory=registry.tool_names)
    use_evidence: bool = True
    max_observation_chars: int = 8000  # keeps one huge observation from eating the context window

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "enabled_tools", enabled_tool_names(self.enabled_tools))
        if self.max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if self.max_total_tokens is not None and self.max_total_tokens < 1:
            raise ValueError("max_total_tokens must be positive or None")
        if self.max_observation_chars < 100:
            raise ValueError("max_observation_chars must be at least 100")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        d["enabled_tools"] = list(self.enabled_tools)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InteractiveT2SConfig:
        """Keys this version does not know are ignored, so older snapshots still load."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        for key in ("stop", "enabled_tools"):
            if key in values:
                values[key] = tuple(values[key])
        return cls(**values)


SUBSTITUTIONS = (
    "SearchValue searches an embedded full-text index instead of Elasticsearch, and SearchColumn ranks columns "
    "with BM25 by default (an embedding backend can be chosen per database) instead of the paper's embeddings."
)


class InteractiveT2S(Strategy):
    name = "interactive_t2s"
    substitutions = SUBSTITUTIONS  # shown by the UI next to the strategy
    config_class = InteractiveT2SConfig
    config: InteractiveT2SConfig

    def preview_messages(self, ctx: SessionContext, previous_turns: Sequence[TurnRecord] = ()) -> list[Message]:
        return self._messages(ctx, _history(sorted(previous_turns, key=lambda t: t.index)))

    def run(
        self,
        ctx: SessionContext,
        *,
        tools: ToolRunner,
        llm: ChatModel,
        on_turn: OnTurn,
        previous_turns: Sequence[TurnRecord] = (),
        should_cancel: ShouldCancel = never_cancel,
    ) -> Outcome:
        cfg = self.config
        turns = sorted((t for t in previous_turns if t.kind == TurnKind.REACT), key=lambda t: t.index)
        next_index = max((t.index for t in previous_turns), default=-1) + 1
        while True:
            last = _last_completed(turns)
            if last is not None and last.tool == DONE:
                sql, result = _final(turns)
                return Outcome(Status.ANSWERED if sql else Status.GAVE_UP, sql, result, None,
                               Totals.from_turns(turns))
            totals = Totals.from_turns(turns)
            if totals.rounds >= cfg.max_rounds:
                return self._stop(turns, Status.MAX_ROUNDS, f"Stopped after {cfg.max_rounds} rounds without Done.")
            if cfg.max_total_tokens is not None and totals.total_tokens >= cfg.max_total_tokens:
                return self._stop(turns, Status.TOKEN_LIMIT,
                                  f"Stopped: {totals.total_tokens} tokens used, limit {cfg.max_total_tokens}.")
            if should_cancel():
                return self._stop(turns, Status.CANCELLED, "Cancelled.")

            messages = self._messages(ctx, _history(turns))
            try:
                completion = llm.complete(messages, model=cfg.model, temperature=cfg.temperature,
                                          top_p=cfg.top_p, max_tokens=cfg.max_tokens, stop=cfg.stop)
            except LLMError as exc:
                turn = TurnRecord(index=next_index, kind=TurnKind.REACT, messages=tuple(messages),
                                  error=str(exc), llm_attempts=exc.attempts)
                on_turn(turn)
                turns.append(turn)
                return self._stop(turns, Status.LLM_ERROR, str(exc))

            turn = self._act(next_index, tuple(messages), completion, tools)
            on_turn(turn)
            turns.append(turn)
            next_index += 1

    # --- one round ------------------------------------------------------------------

    def _act(self, index: int, messages: tuple[Message, ...], completion: Completion,
             tools: ToolRunner) -> TurnRecord:
        cfg = self.config
        # The client cuts at stop sequences already; cutting again covers other ChatModel implementations.
        text = cut_at_stop(completion.text, cfg.stop).strip()
        step = parse_step(text)
        base: dict[str, Any] = {
            "index": index, "kind": TurnKind.REACT, "messages": messages, "completion": text,
            "thought": step.thought, "action": step.action_text,
            "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
            "cost": completion.cost, "llm_latency_ms": completion.latency_ms,
            "llm_attempts": completion.attempts, "model": completion.model,
            "finish_reason": completion.finish_reason,
        }
        action = step.action
        if action is None:
            message = step.error or FORMAT_HINT
            if completion.finish_reason == "length":
                message = (f"Your step was cut off at the limit of {cfg.max_tokens} tokens; keep the thought short "
                           f"and write the action right after it. {message}")
            return TurnRecord(**base, observation=f"Error: {message}", error=message)
        base.update(tool=action.name, args=action.args, kwargs=dict(action.kwargs))
        if action.is_done:
            return TurnRecord(**base)
        available = tuple(n for n in cfg.enabled_tools if n in tools.tool_names)
        valid = ", ".join([*available, DONE])
        if registry.find(action.name) is None:
            message = f"Unknown action {action.name!r}. Valid actions: {valid}."
            return TurnRecord(**base, observation=f"Error: {message}", error=message)
        if action.name not in available:
            message = f"{action.name} is not available in this session. Valid actions: {valid}."
            return TurnRecord(**base, observation=f"Error: {message}", error=message)

        try:
            result = tools.run(action.name, action.args, action.kwargs)
        except Exception as exc:  # a tool bug must not end the session; the model sees the failure
            message = f"{action.name} failed: {type(exc).__name__}: {exc}"
            return TurnRecord(**base, observation=f"Error: {message}", tool_ok=False, tool_latency_ms=0.0,
                              error=message)
        return TurnRecord(
            **base,
            observation=self._clip(result.observation),
            tool_ok=result.ok,
            sql=_sql_of(action.name, action.args, action.kwargs, result),
            result=result.result if result.ok else None,
            tool_latency_ms=result.elapsed_ms,
            error=None if result.ok else _first_line(result.observation),
        )

    def _clip(self, observation: str) -> str:
        limit = self.config.max_observation_chars
        if not observation:
            return "(no output)"
        if len(observation) <= limit:
            return observation
        return observation[:limit] + f"\n... (observation cut at {limit} characters)"

    def _messages(self, ctx: SessionContext, history: Sequence[tuple[str, str]]) -> list[Message]:
        cfg = self.config
        return build_messages(schema=ctx.schema, question=ctx.question, evidence=ctx.evidence,
                              exemplars=ctx.exemplars, enabled_tools=cfg.enabled_tools,
                              use_evidence=cfg.use_evidence, history=history,
                              custom_tool_description=ctx.tool_description,
                              custom_tool_description_no_findpath=ctx.tool_description_no_findpath)

    def _stop(self, turns: Sequence[TurnRecord], status: Status, error: str) -> Outcome:
        sql, result = _final(turns)
        return Outcome(status, sql, result, error, Totals.from_turns(turns))


def _history(turns: Sequence[TurnRecord]) -> list[tuple[str, str]]:
    """(assistant text, observation) pairs rebuilt from stored turns: a resumed run sees the same conversation."""
    return [(t.completion, t.observation) for t in turns
            if t.kind == TurnKind.REACT and t.completion is not None and t.observation is not None]


def _last_completed(turns: Sequence[TurnRecord]) -> TurnRecord | None:
    for t in reversed(turns):
        if t.completion is not None:
            return t
    return None


def _final(turns: Sequence[TurnRecord]) -> tuple[str | None, Any]:
    executed = [t for t in turns if t.tool == EXECUTE_SQL and t.tool_ok and t.sql]
    for t in reversed(executed):
        if not is_probe(t.sql):
            return t.sql, t.result
    # Only probes ran: an unlimited SELECT * FROM t can be the answer ("list all information about ...").
    for t in reversed(executed):
        if not re.search(r"\blimit\b", t.sql, re.IGNORECASE):
            return t.sql, t.result
    return None, None


def _sql_of(name: str, args: Sequence[Any], kwargs: Mapping[str, Any], result: ToolResult) -> str | None:
    if name != EXECUTE_SQL:
        return None
    if result.sql:
        return result.sql
    value = args[0] if args else kwargs.get("sql")
    return value if isinstance(value, str) else None


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "tool error"
    return line[:300]
