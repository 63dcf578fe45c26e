"""What every strategy shares: its inputs, the turns it reports, its outcome, and the interface.

A strategy reports each step as a ``TurnRecord`` through ``on_turn`` as soon
as the step is complete; the session layer stores it (one commit per turn).
After a crash the session layer calls ``run`` again with the stored turns as
``previous_turns`` and the strategy resumes after them without calling the
LLM again for them. Turns are JSON-serialisable through ``to_dict``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from agent.llm import ChatModel, Message
from agent.sql import QueryResult, SchemaInfo
from agent.sql.base import json_cell
from agent.tools.base import ToolRunner

from .prompt import Exemplar


class Status(StrEnum):
    ANSWERED = "answered"  # finished with a final SQL query
    GAVE_UP = "gave_up"  # finished (Done) without any successfully executed query
    MAX_ROUNDS = "max_rounds"  # round cap reached
    TOKEN_LIMIT = "token_limit"  # token cap reached
    LLM_ERROR = "llm_error"  # the LLM endpoint failed after retries
    CANCELLED = "cancelled"  # should_cancel() returned True


class TurnKind(StrEnum):
    REACT = "react"  # one Thought/Action/Observation round (Interactive-T2S)
    REWRITE = "rewrite"
    REFINE = "refine"
    VOTE = "vote"


@dataclass(frozen=True)
class SessionContext:
    """One question to answer on one database."""

    question: str
    schema: SchemaInfo
    evidence: str | None = None
    exemplars: tuple[Exemplar, ...] = ()
    tool_description: str | None = None  # an exemplar set version's own text, sent instead of ours
    # The run's example pool (agent.strategies.pool.PoolExample) and what this question may not retrieve
    # from it (agent.strategies.pool.PoolExclusion: its own database, duplicates of it, its own entry).
    example_pool: tuple[Any, ...] = ()
    question_key: str | None = None  # sessions stored before pool_exclusion: only this entry was left out
    pool_exclusion: Any | None = None
    tool_description_no_findpath: str | None = None  # the set's text for the run without FindShortestPath
    database_name: str | None = None  # the target's name, for prompts that head its schema with it
    exemplar_databases: tuple[str | None, ...] = ()  # each exemplar's database name, likewise


@dataclass(frozen=True)
class TurnRecord:
    """One step of a strategy: an LLM call, and for ReAct the tool call it chose.

    ``index`` is 0-based and unique per session. ``completion`` is None when
    the LLM call failed (then ``error`` says why). ``tool`` is the action's
    name as the model wrote it (``Done`` included), ``observation`` exactly
    what was sent back to the model. ``extra`` holds strategy-specific data
    (candidates of a vote, a rewritten question, ...).
    """

    index: int
    kind: str
    messages: tuple[Message, ...] = ()
    completion: str | None = None
    thought: str | None = None
    action: str | None = None
    tool: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    observation: str | None = None
    tool_ok: bool | None = None
    sql: str | None = None
    result: QueryResult | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    llm_latency_ms: float | None = None
    tool_latency_ms: float | None = None
    llm_attempts: int = 0
    model: str | None = None
    finish_reason: str | None = None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: result cells that JSON cannot hold (bytes, dates) are stored as text."""
        return {
            "index": self.index, "kind": self.kind,
            "messages": [m.to_dict() for m in self.messages],
            "completion": self.completion, "thought": self.thought, "action": self.action, "tool": self.tool,
            "args": _json_safe(list(self.args)), "kwargs": _json_safe(dict(self.kwargs)),
            "observation": self.observation, "tool_ok": self.tool_ok, "sql": self.sql,
            "result": self.result.to_json() if self.result is not None else None,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens, "cost": self.cost,
            "llm_latency_ms": self.llm_latency_ms, "tool_latency_ms": self.tool_latency_ms,
            "llm_attempts": self.llm_attempts, "model": self.model, "finish_reason": self.finish_reason,
            "error": self.error, "extra": _json_safe(dict(self.extra)),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TurnRecord:
        return cls(
            index=int(d["index"]), kind=str(d["kind"]),
            messages=tuple(Message.from_dict(m) for m in d.get("messages") or ()),
            completion=d.get("completion"), thought=d.get("thought"), action=d.get("action"),
            tool=d.get("tool"), args=tuple(d.get("args") or ()), kwargs=dict(d.get("kwargs") or {}),
            observation=d.get("observation"), tool_ok=d.get("tool_ok"), sql=d.get("sql"),
            result=QueryResult.from_json(d["result"]) if d.get("result") else None,
            prompt_tokens=int(d.get("prompt_tokens") or 0), completion_tokens=int(d.get("completion_tokens") or 0),
            cost=d.get("cost"), llm_latency_ms=d.get("llm_latency_ms"), tool_latency_ms=d.get("tool_latency_ms"),
            llm_attempts=int(d.get("llm_attempts") or 0), model=d.get("model"),
            finish_reason=d.get("finish_reason"), error=d.get("error"), extra=dict(d.get("extra") or {}),
        )


@dataclass(frozen=True)
class Totals:
    rounds: int = 0  # LLM calls that returned a completion
    llm_failures: int = 0  # LLM calls that failed after retries
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0  # None as soon as one completion had no known price
    llm_latency_ms: float = 0.0
    tool_latency_ms: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def from_turns(cls, turns: Sequence[TurnRecord]) -> Totals:
        cost: float | None = 0.0
        for t in turns:
            if t.completion is not None:
                cost = None if cost is None or t.cost is None else cost + t.cost
        return cls(
            rounds=sum(1 for t in turns if t.completion is not None),
            llm_failures=sum(1 for t in turns if t.completion is None and t.error is not None),
            tool_calls=sum(1 for t in turns if t.tool_latency_ms is not None),
            prompt_tokens=sum(t.prompt_tokens for t in turns),
            completion_tokens=sum(t.completion_tokens for t in turns),
            cost=cost,
            llm_latency_ms=sum(t.llm_latency_ms or 0.0 for t in turns),
            tool_latency_ms=sum(t.tool_latency_ms or 0.0 for t in turns),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "llm_failures": self.llm_failures, "tool_calls": self.tool_calls,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens, "cost": self.cost, "llm_latency_ms": self.llm_latency_ms,
                "tool_latency_ms": self.tool_latency_ms}


@dataclass(frozen=True)
class Outcome:
    """How a run ended. ``final_sql`` is the prediction whatever the status (it may exist after a cap)."""

    status: Status
    final_sql: str | None
    result: QueryResult | None
    error: str | None
    totals: Totals


OnTurn = Callable[[TurnRecord], None]
ShouldCancel = Callable[[], bool]


def never_cancel() -> bool:
    return False


class Strategy(abc.ABC):
    """A text-to-SQL method. Subclasses set ``name`` and ``config_class`` and implement ``run``."""

    name: ClassVar[str]
    title: ClassVar[str] = ""  # the method's name as its paper writes it (DART-SQL); empty: ``name``
    config_class: ClassVar[type[Any]]  # a frozen dataclass with to_dict() and from_dict()
    # Declared by a method that retrieves its few-shot examples from an example pool (agent.strategies.pool).
    # Only a run over a dataset resolves a pool; a single question (Ask, the sessions API, ``ask``, a
    # follow-up) has none, so every place that starts one refuses such a strategy rather than running it with an
    # empty pool. ``pool_needed`` says, per configuration, what a run's launcher refuses.
    needs_pool: ClassVar[bool] = False

    @classmethod
    def display_name(cls) -> str:
        return cls.title or cls.name

    def __init__(self, config: Any | None = None) -> None:
        self.config = config if config is not None else self.config_class()

    @classmethod
    def from_config_dict(cls, data: Mapping[str, Any] | None = None) -> Strategy:
        return cls(cls.config_class.from_dict(data or {}))

    @abc.abstractmethod
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
        """Answer ``ctx.question``, reporting each finished step through ``on_turn``."""

    def pool_needed(self) -> str | None:
        """Why this configuration cannot run as configured without an example pool (None: it needs none).

        Launchers refuse a run without a pool when this says so, instead of running it silently without
        the examples its method retrieves."""
        return None

    @abc.abstractmethod
    def preview_messages(self, ctx: SessionContext, previous_turns: Sequence[TurnRecord] = ()) -> list[Message]:
        """The exact messages the next LLM call would receive."""


# --- serialisation helpers -------------------------------------------------------------


def _json_safe(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return json_cell(value)
