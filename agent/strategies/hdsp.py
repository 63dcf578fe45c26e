"""HDSP (papers/hdsp-sql-quality-measurement.txt): human-designed step-by-step prompt + SQL quality feedback.

1. ``answer_type``: the LLM says, from the question alone, what type of answer
   it expects (a number, a list, ...): the A' of the paper's eq. 3.
2. ``generate``: the 8-step prompt (after the paper's Figure 2, in our own
   words); the final query is executed.
3. ``feedback``: the quality measures of agent/metrics.py
   (f_nc, f_sc, f_diff, f_sf) for that query; no LLM call.
4. ``extended``: only when f_sf = 1 ("hard"), the question is answered again
   with the 13-step prompt (the paper's five extra steps inserted between
   steps 5 and 6); its query is the answer when it runs, else the first one.

Gold SQL: benchmark runs set ``HDSPConfig.gold_sql`` per question (e.g.
``create_strategy("hdsp", {**snapshot, "gold_sql": item.gold_sql})``); then
f_nc compares with it and f_diff counts the gold query's columns. In live use
it is None: f_nc is not defined and f_diff counts the columns of the schema
linking (the schema columns the step-by-step answer names or its query uses).

Where this implementation departs from the paper, and why: ``SUBSTITUTIONS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent.llm import ChatModel, Message
from agent.metrics import (
    DEFAULT_T_NC,
    answer_type,
    measure_quality,
    mentioned_columns,
    result_type,
    sql_columns,
)
from agent.sql import SchemaInfo
from agent.tools.base import ToolRunner

from ._common import (
    ConfigBase,
    PipelineStrategy,
    Stop,
    TurnLog,
    ask,
    check_positive,
    create_table_text,
    dialect,
    extract_sql,
    outcome,
    question_text,
    run_sql,
)
from .base import OnTurn, Outcome, SessionContext, ShouldCancel, Status, TurnRecord, never_cancel

SUBSTITUTIONS: str = (
    "HDSP compares the type of the predicted query's result with the type of an answer ChatGPT gives "
    "directly to the question; here the LLM is asked for the expected answer type itself (number, text, "
    "date, yes/no, list, record, table) and the result is typed by its shape and values. The paper gives no "
    "value for the threshold t_nc; 0.8 is our default. Its difficulty buckets count the columns involved; "
    "with a gold query we count the gold query's columns, and in live use (no gold query, so no f_nc) the "
    "columns of the step-by-step answer's schema linking, and a question is hard when its result type is "
    "wrong or it involves six or more columns. The paper's models were fine-tuned on Text-to-SQL data; here "
    "the prompt runs on whatever model the endpoint serves. The fourth extra step (security) is phrased for a "
    "generated read-only query: one SELECT, correctly quoted literals, nothing that changes data."
)

ANSWER_TYPE = "answer_type"
GENERATE = "generate"
FEEDBACK = "feedback"
EXTENDED = "extended"

BASIC_STEPS: tuple[str, ...] = (
    "Analyse the schema: name the tables and the columns (as table.column) that the question needs.",
    "Work out how those tables relate: which joins connect them and on which keys.",
    "Outline the information to return: the columns to select and any calculation on them.",
    "Identify the filters and conditions (WHERE), with the exact values to compare against.",
    "Consider aggregation: whether aggregate functions, GROUP BY or HAVING are needed.",
    "Plan the ordering: ORDER BY, and LIMIT when the question asks for the top, first or most.",
    "Think about the presentation: whether subqueries or WITH clauses make the query clearer, and select the "
    "columns in the order the question names them.",
    "Construct the SQL query from the decisions above.",
)
EXTRA_STEPS: tuple[str, ...] = (
    "Complex joins and subqueries: plan how several tables or intermediate results combine, which JOIN types "
    "and conditions to use, and where a subquery is needed.",
    "Data transformation and calculations: derive any values the question needs (ratios, percentages, "
    "casts, date and time arithmetic) with the functions of the SQL dialect.",
    "Optimisation: simplify the query; avoid joins, subqueries and DISTINCT that the answer does not need.",
    "Security and data integrity: write a single read-only SELECT, quote literal values correctly and never "
    "change data.",
    "Review and test: check the plan against edge cases (NULLs, ties, duplicates, empty groups) and against "
    "the exact wording of the question.",
)
# The paper inserts the five extra steps between step 5 (aggregation) and step 6 (ordering).
EXTENDED_STEPS: tuple[str, ...] = BASIC_STEPS[:5] + EXTRA_STEPS + BASIC_STEPS[5:]

_TYPE_HELP = (
    "number (one number, e.g. a count, a sum or an average), text (one name or word), date (one date or "
    "time), boolean (yes or no), list (several values of one kind, e.g. several names), record (several "
    "attributes of one thing), table (several attributes for each of several things)"
)


@dataclass(frozen=True)
class HDSPConfig(ConfigBase):
    """``feedback`` False runs the 8-step prompt alone. ``gold_sql`` is set per question by benchmark
    runs (see the module docstring); ``t_nc`` is the f_nc threshold of eqs. 4 and 5."""

    model: str | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 2048  # the step-by-step reasoning comes before the query
    max_total_tokens: int | None = None  # token cap over the session (prompt + completion), None: no cap
    feedback: bool = True
    t_nc: float = DEFAULT_T_NC
    gold_sql: str | None = None
    use_evidence: bool = True  # the paper's "KG": BIRD's evidence in the prompt

    def __post_init__(self) -> None:
        self.check_token_cap_value()
        check_positive(max_tokens=self.max_tokens)
        if not 0.0 <= self.t_nc <= 1.0:
            raise ValueError("t_nc must be between 0 and 1")
        if self.gold_sql is not None and not self.gold_sql.strip():
            object.__setattr__(self, "gold_sql", None)


class HDSP(PipelineStrategy):
    substitutions = SUBSTITUTIONS  # shown by the UI next to the strategy
    name = "hdsp"
    config_class = HDSPConfig
    config: HDSPConfig

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
        log = TurnLog(previous_turns, on_turn)
        try:
            expected: str | None = None
            if cfg.feedback:
                typed = ask(log, ANSWER_TYPE, lambda: self.answer_type_messages(ctx), llm=llm, params=cfg.params,
                            should_cancel=should_cancel,
                            finish=lambda text: {"extra": {"expected_type": answer_type(text)}})
                expected = typed.extra.get("expected_type")
            first = ask(log, GENERATE, lambda: self.step_messages(ctx, BASIC_STEPS), llm=llm, params=cfg.params,
                        should_cancel=should_cancel, finish=self._finish(tools, "basic"))
            if cfg.feedback:
                quality = log.step(FEEDBACK, lambda: self._feedback(ctx.schema, first, expected))
                if quality.extra.get("f_sf") == 1:
                    ask(log, EXTENDED, lambda: self.step_messages(ctx, EXTENDED_STEPS), llm=llm,
                        params=cfg.params, should_cancel=should_cancel, finish=self._finish(tools, "extended"))
        except Stop as stop:
            return outcome(log, stop.status, _final(log.turns), stop.error)
        final = _final(log.turns)
        if final is not None and final.tool_ok:
            return outcome(log, Status.ANSWERED, final)
        error = "No query executed successfully." if final is not None else "The model wrote no SQL query."
        return outcome(log, Status.GAVE_UP, final, error)

    # --- prompts ----------------------------------------------------------------------

    def answer_type_messages(self, ctx: SessionContext) -> list[Message]:
        system = ("You predict what kind of answer a question about a database expects, from the question "
                  "alone. Do not write SQL.")
        user = (question_text(ctx, ctx.question, use_evidence=self.config.use_evidence)
                + f"\nWhich type of answer does the question expect? The types are: {_TYPE_HELP}.\n"
                "Reply with one line: Type: <type>")
        return [Message("system", system), Message("user", user)]

    def step_messages(self, ctx: SessionContext, steps: Sequence[str]) -> list[Message]:
        dia = dialect(ctx.schema)
        numbered = "\n".join(f"Step {i}: {text}" for i, text in enumerate(steps, 1))
        system = (f"You translate questions into {dia} queries. Work through the following steps in order, "
                  "writing a short paragraph for each (start each with its step number):\n"
                  f"{numbered}\n"
                  "Use only the tables and columns of the schema. End your reply with the final query, one "
                  "SELECT statement, in a ```sql code block.")
        user = ("Database schema:\n" + create_table_text(ctx.schema) + "\n\n"
                + question_text(ctx, ctx.question, use_evidence=self.config.use_evidence))
        return [Message("system", system), Message("user", user)]

    # --- steps ----------------------------------------------------------------------

    def _finish(self, tools: ToolRunner, prompt: str) -> Callable[[str], dict[str, Any]]:
        steps = len(BASIC_STEPS) if prompt == "basic" else len(EXTENDED_STEPS)

        def finish(text: str) -> dict[str, Any]:
            extra = {"prompt": prompt, "steps": steps}
            sql = extract_sql(text)
            if sql is None:
                return {"error": "No SQL query found in the completion.", "extra": extra}
            return {**run_sql(tools, sql), "extra": extra}
        return finish

    def _feedback(self, schema: SchemaInfo, turn: TurnRecord, expected: str | None) -> dict[str, Any]:
        cfg = self.config
        engine = "postgres" if schema.engine == "postgresql" else "sqlite"
        if turn.tool_ok and turn.result is not None:
            predicted: str | None = result_type(turn.result.columns, turn.result.rows)
        else:
            predicted = None  # no result to type: the semantic comparison fails
        if cfg.gold_sql:
            n_col = len(sql_columns(cfg.gold_sql, engine))
            source = "gold"
        else:
            names = {c.name for c in schema.columns}
            linked = mentioned_columns(turn.completion or "", names) | (
                sql_columns(turn.sql, engine) & {n.lower() for n in names} if turn.sql else set())
            n_col = len(linked)
            source = "schema_linking"
        quality = measure_quality(pred_sql=turn.sql, gold_sql=cfg.gold_sql, predicted_type=predicted,
                                  expected_type=expected, n_col=n_col, t_nc=cfg.t_nc, dialect=engine)
        verdict = "hard: answering again with the extended prompt" if quality.f_sf else "not hard: answer kept"
        nc = "n/a (no gold SQL)" if quality.f_nc is None else f"{quality.f_nc:.3f}"
        observation = (f"f_nc={nc}, f_sc={quality.f_sc} (result {predicted}, expected {expected}), "
                       f"f_diff={quality.f_diff} ({n_col} columns, from {source}), f_sf={quality.f_sf}: {verdict}")
        return {"observation": observation, "extra": {**quality.to_dict(), "n_col_source": source}}


def _final(turns: Sequence[TurnRecord]) -> TurnRecord | None:
    """The extended answer when it ran, else the first answer when it ran, else the latest query."""
    answers = [t for t in turns if t.kind in (GENERATE, EXTENDED) and t.sql]
    for t in reversed(answers):
        if t.tool_ok:
            return t
    return answers[-1] if answers else None
