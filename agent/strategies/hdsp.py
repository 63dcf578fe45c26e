"""HDSP (papers/hdsp-sql-quality-measurement.txt): human-designed step-by-step prompt + SQL quality feedback.

1. ``direct_answer``: the LLM answers the question directly, from the
   question alone (no SQL, no database): the A' of the paper's eq. 3.
2. ``generate``: the 8-step prompt (after the paper's Figure 2, in our own
   words); the final query is executed.
3. ``feedback``: the quality measures of agent/metrics.py (f_nc, f_sc,
   f_diff, f_sf) for that query; no LLM call. f_sc is 1 when
   R(result) = R(A'), R the type of a value (``answer_text_type`` for A', the
   result's shape and cell type for the result).
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

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent.llm import ChatModel, Message
from agent.metrics import (
    DEFAULT_T_NC,
    f_diff,
    f_nc,
    f_sc,
    f_sf,
    mentioned_columns,
    result_type,
    sql_columns,
    value_type,
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
from .options import check_bounds, option, sampling_seed_option

FIDELITY: dict[str, tuple[str, ...]] = {
    "as_in_paper": (
        "The 8-step prompt of Figure 2 (our wording of each step), and the 5 extra steps inserted between "
        "steps 5 and 6 when f_sf = 1.",
        "A' is the model's direct answer to the question; f_sc (eq. 3) is 1 when the type of the executed "
        "result equals the type of A'.",
        "f_nc (eq. 2): 1 - Levenshtein / max length over normalised SQL, against the gold SQL passed in "
        "benchmark runs; f_diff (eq. 4) buckets of <= 5, 6-9, >= 10 columns; f_sf (eq. 5).",
    ),
    "differs": (
        "t_nc is not given by the paper: 0.8 is our default ('t_nc').",
        "R(.), the type check, is ours: number, text, date, boolean, list, record, table or empty, from a "
        "result's shape and cell values and from the answer text's form (answer_text_type).",
        "f_Norm is ours: case, whitespace, identifier quotes and aliases removed (quality.normalize_sql).",
        "Which query's columns make N_col is open: the gold query's by default ('n_col_from': gold or "
        "prediction); without a gold query, the columns named in the step-by-step answer and its query.",
        "f_diff for f_nc >= t_nc is undefined in eq. 4; it is 0 here (f_sf then depends on f_sc alone, as "
        "eq. 5 says). Without a gold query f_nc is undefined: a question is hard when f_sc = 0 or f_diff > 0.",
        "The direct answer prompt shows the question only (as the paper describes); 'direct_answer_schema' "
        "adds the schema.",
        "The paper's models were fine-tuned on Text-to-SQL data; here the prompt runs on whatever model the "
        "endpoint serves. The fourth extra step (security) is phrased for a generated read-only query.",
    ),
}
SUBSTITUTIONS: str = " ".join(FIDELITY["differs"])

DIRECT_ANSWER = "direct_answer"
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

@dataclass(frozen=True)
class HDSPConfig(ConfigBase):
    """``feedback`` False runs the 8-step prompt alone. ``gold_sql`` is set per question by benchmark
    runs (see the module docstring); ``t_nc`` is the f_nc threshold of eqs. 4 and 5."""

    model: str | None = option(None, help="A model the endpoint allows; empty: the endpoint's model.")
    temperature: float = option(0.0, min=0.0, max=2.0, help="Sampling temperature.")
    top_p: float = option(1.0, min=0.0, max=1.0, help="Nucleus sampling.")
    sampling_seed: int | None = sampling_seed_option()
    # the step-by-step reasoning comes before the query
    max_tokens: int = option(2048, min=1, max=32768, help="Output tokens per call (also capped by the endpoint).")
    max_total_tokens: int | None = option(None, min=1, max=10_000_000,
                                          help="Prompt and completion tokens over the session; empty: no cap.")
    feedback: bool = option(True, help="False runs the 8-step prompt alone.")
    t_nc: float = option(DEFAULT_T_NC, min=0.0, max=1.0, help="The f_nc threshold (the paper gives none: ours).")
    n_col_from: str = option("gold", choices=("gold", "prediction"),
                             help="N_col counts the columns of the gold query or of the prediction.")
    direct_answer_schema: bool = option(False, help="Show the schema to the direct-answer call (the paper: no).")
    gold_sql: str | None = option(None, help="Set per question by benchmark runs.")
    use_evidence: bool = option(True, help="The paper's KG: BIRD's evidence in the prompt.")

    def __post_init__(self) -> None:
        check_bounds(self)
        self.check_token_cap_value()
        check_positive(max_tokens=self.max_tokens)
        if not 0.0 <= self.t_nc <= 1.0:
            raise ValueError("t_nc must be between 0 and 1")
        if self.n_col_from not in ("gold", "prediction"):
            raise ValueError("n_col_from must be 'gold' or 'prediction'")
        if self.gold_sql is not None and not self.gold_sql.strip():
            object.__setattr__(self, "gold_sql", None)


class HDSP(PipelineStrategy):
    substitutions = SUBSTITUTIONS  # shown by the UI next to the strategy
    fidelity = FIDELITY
    name = "hdsp"
    title = "HDSP"
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
                direct = ask(log, DIRECT_ANSWER, lambda: self.direct_answer_messages(ctx), llm=llm,
                             params=cfg.params, should_cancel=should_cancel,
                             finish=lambda text: {"extra": {"answer_type": answer_text_type(text)}})
                expected = direct.extra.get("answer_type")
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

    def direct_answer_messages(self, ctx: SessionContext) -> list[Message]:
        """A': the model answers the question itself, directly (no SQL)."""
        parts = []
        if self.config.direct_answer_schema:
            parts.append("Database schema:\n" + create_table_text(ctx.schema) + "\n")
        parts.append(question_text(ctx, ctx.question, use_evidence=self.config.use_evidence))
        parts.append("Answer the question directly. Reply with the answer only: a value, or the values one a line.")
        return [Message("user", "\n".join(parts))]

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
        if cfg.gold_sql and cfg.n_col_from == "gold":
            n_col = len(sql_columns(cfg.gold_sql, engine))
            source = "gold"
        elif turn.sql and cfg.n_col_from == "prediction":
            n_col = len(sql_columns(turn.sql, engine))
            source = "prediction"
        else:
            names = {c.name for c in schema.columns}
            linked = mentioned_columns(turn.completion or "", names) | (
                sql_columns(turn.sql, engine) & {n.lower() for n in names} if turn.sql else set())
            n_col = len(linked)
            source = "schema_linking"
        nc = f_nc(turn.sql or "", cfg.gold_sql, engine) if cfg.gold_sql else None
        sc = f_sc(predicted, expected)  # eq. 3
        diff = f_diff(nc, n_col, cfg.t_nc)  # eq. 4 (0 where undefined)
        sf = f_sf(nc, sc, diff, cfg.t_nc)
        verdict = "hard: answering again with the extended prompt" if sf else "not hard: answer kept"
        shown = "n/a (no gold SQL)" if nc is None else f"{nc:.3f}"
        observation = (f"f_nc={shown} (t_nc={cfg.t_nc}), f_sc={sc} (R(result)={predicted}, R(A')={expected}), "
                       f"f_diff={diff} ({n_col} columns, from {source}), f_sf={sf}: {verdict}")
        return {"observation": observation, "extra": {
            "f_nc": nc, "f_sc": sc, "f_diff": diff, "f_sf": sf, "n_col": n_col, "predicted_type": predicted,
            "expected_type": expected, "t_nc": cfg.t_nc, "n_col_source": source}}


_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?\s*%?$", re.IGNORECASE)
_PAIR = re.compile(r"^[^:]{1,60}:\s*\S")


def answer_text_type(text: str) -> str:
    """R(A'): the type of a direct answer, in the labels ``result_type`` gives a query result.

    Several values (one a line, or separated by commas or semicolons) are a ``list``, several
    ``name: value`` lines a ``record``; one value is a ``number`` (also 1,234 or 12%), a ``boolean`` (yes,
    no, true, false), a ``date`` or ``text``; nothing is ``empty``.
    """
    body = re.sub(r"^\s*(?:the\s+)?answer\s*(?:is)?\s*[:\-]?\s*", "", text.strip(), flags=re.IGNORECASE)
    body = body.strip().strip("`").strip()
    lines = [re.sub(r"^(?:[-*\u2022]|\d+[.)])\s+", "", line.strip()) for line in body.splitlines() if line.strip()]
    if not lines:
        return "empty"
    if len(lines) > 1:
        return "record" if all(_PAIR.match(line) for line in lines) else "list"
    value = lines[0].rstrip(".").strip().strip("\"'")
    if not _THOUSANDS.match(value) and re.search(r"[,;]", value):
        parts = [p for p in re.split(r"[,;]", value) if p.strip()]
        if len(parts) > 1:
            return "list"
    if value.lower() in ("yes", "no", "true", "false"):
        return "boolean"
    if _THOUSANDS.match(value) or _NUMBER.match(value):
        return "number"
    return value_type(value)


def _final(turns: Sequence[TurnRecord]) -> TurnRecord | None:
    """The extended answer when it ran, else the first answer when it ran, else the latest query."""
    answers = [t for t in turns if t.kind in (GENERATE, EXTENDED) and t.sql]
    for t in reversed(answers):
        if t.tool_ok:
            return t
    return answers[-1] if answers else None
