"""DART-SQL (papers/dart-sql-rewriting-refinement.txt) on a DAIL-SQL base prompt.

0. ``sample``: one query per table reads its first rows (stored as turns);
   they feed both the rewriting and the context-aware prompt.
1. ``rewrite`` (section 3.1, A.1): the LLM sees the first K rows of every
   table and rewrites the question to match the data.
2. DAIL-SQL base (section 4.1, "Base prompt"; agent.strategies.dail):
   ``preliminary`` (a zero-shot query whose skeleton guides the selection)
   and ``select`` (examples from the run's example pool by masked-question
   and SQL-skeleton similarity; the question's own entry is left out). The
   class declares ``needs_pool``: a single question, which has no pool, refuses it.
3. ``generate`` (section 3.2, A.2): DAIL's prompt plus at most N rows per
   table (half relevant, half random); the query is executed in the same turn.
   A query with LEFT JOIN or SELECT * is ``regenerate``d at once.
4. Refinement (section 3.3, Algorithm 1, A.3), at most R times: ``judge``
   (the exception, or the result with a Yes/No question) then ``revise``;
   each iteration sees only the initial prompt and the latest query.
5. Self-consistency (section 4.1): with ``self_consistency`` = n > 1 every
   SQL generation is n samples at ``sc_temperature`` and a ``vote`` by
   execution result.

What follows the paper and what differs: ``FIDELITY``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agent.llm import ChatModel, Message
from agent.sql import QueryResult, SchemaInfo
from agent.tools.base import ToolRunner
from agent.tools.column_index import BM25
from agent.tools.text import ident, sql_literal, stemmed_tokens

from ._common import (
    ConfigBase,
    PipelineStrategy,
    Stop,
    TurnLog,
    ask,
    check_positive,
    create_table_text,
    executed,
    extract_sql,
    outcome,
    rows_text,
    run_sql,
    sample_rows,
    verdict,
)
from .base import (
    OnTurn,
    Outcome,
    SessionContext,
    ShouldCancel,
    Status,
    TurnKind,
    TurnRecord,
    never_cancel,
)
from .dail import select_examples, sql_skeleton
from .options import check_bounds, option, sampling_seed_option
from .pool import candidates, left_out_note

FIDELITY: dict[str, tuple[str, ...]] = {
    "as_in_paper": (
        "Question rewriting from the first K=5 rows of every table, with a prompt of the paper's shape "
        "(instruction, three numbered examples on alignment with the data, keeping information, and leaving a "
        "clear question unchanged; our own example text).",
        "DAIL-SQL as the base prompt: code representation (CREATE TABLE, '/* Answer the following: ... */', "
        "SELECT), question-SQL examples, and DAIL selection by masked-question similarity preferring examples "
        "whose SQL skeleton matches a preliminary query's (threshold 0.85).",
        "Context-aware prompt: at most N=15 rows per table, half by relevance to the question, half at random.",
        "Execution-guided refinement (Algorithm 1): at most 3 iterations, history reset to the initial prompt "
        "and the latest SQL; column-name errors list the tables that have the column; other errors are sent "
        "as they are; successful results (M=15 rows, empty ones included) go to a judge call asking Yes/No; "
        "a separate call asks to revise the query.",
        "LEFT JOIN and SELECT * make the LLM regenerate the query at once, without spending a refinement.",
        "Temperature 0; the self-consistency variant samples n=5 SQL queries at T=1 for every SQL generation "
        "and votes by execution result, text generation (rewriting, judging) unchanged.",
    ),
    "differs": (
        "Row relevance is BM25 over the row text among the rows the ExecuteSQL tool returns (its row cap), not "
        "the cosine of averaged GloVe vectors over the whole table (no word vectors offline).",
        "DAIL's masked questions are compared by TF-IDF cosine, not by sentence-transformer embeddings; pool "
        "questions are masked with their own SQL's identifiers and values (their schema may not be at hand).",
        "DAIL's preliminary query came from a fine-tuned model (Graphix-T5); here it is a zero-shot call of the "
        "same LLM with the same prompt (turn kind 'preliminary'), or none when 'preliminary' is off.",
        "The example pool is the one chosen for the run (a dataset's gold pairs, an exemplar set, reviewed "
        "predictions), not necessarily Spider train; a pool from the dataset being run is cross-database (no "
        "example of the question's own database, as Spider's train and dev share none), any pool drops exact "
        "duplicates of the question and its gold SQL; 'examples' (S) defaults to 5.",
        "Regeneration after a forbidden construct is capped ('max_regenerations', our choice: 3); the paper "
        "gives no cap.",
        "Self-consistency makes n separate calls (each stored as a turn) rather than one call with n choices; a "
        "tie in the vote goes to the group sampled first.",
        "When the last revised query fails to run, the answer is the latest query that ran (the paper returns "
        "the last query).",
    ),
}
SUBSTITUTIONS: str = " ".join(FIDELITY["differs"])

GENERATE = "generate"
REGENERATE = "regenerate"
PRELIMINARY = "preliminary"
SELECT = "select"
JUDGE = "judge"
REVISE = "revise"
SQL_KINDS = (GENERATE, REGENERATE, REVISE)
FORBIDDEN = {
    "LEFT JOIN": re.compile(r"\bleft\s+(?:outer\s+)?join\b", re.IGNORECASE),
    "SELECT *": re.compile(r"\bselect\s+(?:distinct\s+)?(?:[\w\"`\[\]]+\s*\.\s*)?\*", re.IGNORECASE),
}
_STRING = re.compile(r"'(?:[^']|'')*'")
_COLUMN_ERRORS = (
    re.compile(r"no such column:\s*([\w.\"`\[\]$]+)", re.IGNORECASE),
    re.compile(r"ambiguous column name:\s*([\w.\"`\[\]$]+)", re.IGNORECASE),
    re.compile(r"column reference\s+\"([^\"]+)\"\s+is ambiguous", re.IGNORECASE),
    re.compile(r"column\s+\"?([\w.$]+)\"?\s+does not exist", re.IGNORECASE),
)

# Question rewriting (section 3.1, appendix A.1): the paper's prompt shape, our own example text.
REWRITE_INSTRUCTION = (
    "Rewrite natural language questions about the data of a database using the information provided. The "
    "questions you write must be clear, concise and consistent with how the data is stored in the database. "
    "If a question is clear enough already, return it as it is, without rewriting it."
)
REWRITE_EXAMPLES = """/*Example 1: Note that the rewritten question must match how the values are stored in the database*/
/*Given the initial value from Table:*/
['Table country: ', [(1, 'nl', 'Europe'), (2, 'br', 'South America'), (3, 'jp', 'Asia'), (4, 'ca', 'North America')]]
/*Rewrite the following question:How many airports are there in Brazil?*/
/*results:How many airports are there in the country "br"?*/
/*Rewrite the following question:List the cities of the Netherlands.*/
/*results:List the cities of the country "nl".*/
/*Given the initial value from Table:*/
['Table member: ', [(11, 'Okafor', 'Ada', 'W', 1998), (12, 'Lind', 'Erik', 'M', 2001), (13, 'Sato', 'Yui', 'W', 1995)]] ['Table club: ', [(5, 'Chess', 'indoor'), (6, 'Rowing', 'outdoor')]]
/*Rewrite the following question:How many female members joined an outdoor club?*/
/*results:How many members with sex "W" joined a club whose type is "outdoor"?*/
/*Example 2: Note that you must not leave out any information of the original question*/
/*Given the initial value from Table:*/
['Table parcel: ', [(1, 'AB12', '0', 2.5, '2021-04-02'), (2, 'CD34', '1', 0.8, '2021-05-19'), (3, 'EF56', '1', 7.1, '2021-06-30')]]
/*Rewrite the following question:Which parcels were returned, and what did they weigh? Note that 1 means returned and 0 means delivered.*/
/*results:Which parcel codes in the table parcel were returned, and what did they weigh? Note that 1 means returned and 0 means delivered.*/
/*Example 3: If the question is clear enough already, return it as it is*/
/*Given the initial value from Table:*/
['Table lake: ', [(1, 'Superior', 82100.0, 406), (2, 'Victoria', 68870.0, 84), (3, 'Baikal', 31500.0, 1642)]]
/*Rewrite the following question:What is the area of the deepest lake?*/
/*results:What is the area of the deepest lake?*/
/*Rewrite the following question:Which lakes are larger than the average area?*/
/*results:Which lakes are larger than the average area?*/"""

DAIL_EXAMPLES_HEADER = "/* Some SQL examples are provided based on similar problems: */"
REVISE_REQUEST = "/* Revise the SQL query to correct any mistakes: */\nSELECT"


@dataclass(frozen=True)
class DartSQLConfig(ConfigBase):
    """Paper defaults: K=5 rewrite rows, N=15 context rows, 3 refinements, M=15 result rows, T=0;
    the self-consistency variant is ``self_consistency=5`` (n) at ``sc_temperature=1.0``."""

    model: str | None = option(None, help="A model the endpoint allows; empty: the endpoint's model.")
    temperature: float = option(0.0, min=0.0, max=2.0, help="Sampling temperature (the paper: 0).")
    top_p: float = option(1.0, min=0.0, max=1.0, help="Nucleus sampling.")
    sampling_seed: int | None = sampling_seed_option()
    max_tokens: int = option(1024, min=1, max=32768, help="Output tokens per call (also capped by the endpoint).")
    max_total_tokens: int | None = option(None, min=1, max=10_000_000,
                                          help="Prompt and completion tokens over the session; empty: no cap.")
    rewrite: bool = option(True, help="Rewrite the question with the first rows of each table first.")
    rewrite_rows: int = option(5, min=1, max=50, help="K: first rows of each table shown to the rewriting step.")
    context_rows: int = option(15, min=1, max=200, help="N: rows per table in the context-aware prompt.")
    relevant_fraction: float = option(0.5, min=0.0, max=1.0,
                                      help="Share of the N rows chosen by relevance, the rest at random.")
    candidate_rows: int = option(1000, min=1, max=100_000, help="Rows per table read to choose the N from.")
    seed: int = option(0, min=0, max=2**31 - 1, help="Seed of the random rows (reproducible runs).")
    examples: int = option(5, min=0, max=20, help="S: DAIL-selected examples from the pool (0: zero-shot).")
    preliminary: bool = option(True, help="A zero-shot preliminary query whose skeleton guides the selection.")
    skeleton_threshold: float = option(0.85, min=0.0, max=1.0, help="DAIL's query-similarity threshold.")
    forbid_keywords: bool = option(True, help="The paper's rule: no LEFT JOIN, no SELECT *.")
    max_regenerations: int = option(3, min=0, max=10,
                                    help="Regenerations per query for a forbidden construct (our cap).")
    max_refinements: int = option(3, min=0, max=10, help="R: refinements with the execution result.")
    result_rows: int = option(15, min=1, max=1000, help="M: rows of a result shown to the LLM.")
    self_consistency: int = option(1, min=1, max=10,
                                   help="n SQL samples voted by execution result (the paper's variant: 5).")
    sc_temperature: float = option(1.0, min=0.0, max=2.0,
                                   help="Temperature of SQL generation when self_consistency > 1.")
    use_evidence: bool = option(True, help="Send BIRD's evidence with the question.")
    cell_chars: int = option(100, min=1, max=10_000, help="Longest cell value shown.")

    def __post_init__(self) -> None:
        check_bounds(self)
        check_positive(max_tokens=self.max_tokens, rewrite_rows=self.rewrite_rows,
                       context_rows=self.context_rows, candidate_rows=self.candidate_rows,
                       result_rows=self.result_rows, cell_chars=self.cell_chars,
                       self_consistency=self.self_consistency)
        self.check_token_cap_value()
        if self.max_refinements < 0 or self.max_regenerations < 0 or self.examples < 0:
            raise ValueError("max_refinements, max_regenerations and examples must be 0 or more")
        if not 0.0 <= self.relevant_fraction <= 1.0 or not 0.0 <= self.skeleton_threshold <= 1.0:
            raise ValueError("relevant_fraction and skeleton_threshold must be between 0 and 1")


class DartSQL(PipelineStrategy):
    substitutions = SUBSTITUTIONS  # shown by the UI next to the strategy
    fidelity = FIDELITY
    name = "dart_sql"
    title = "DART-SQL"
    needs_pool = True  # retrieves its examples from the run's example pool
    config_class = DartSQLConfig
    config: DartSQLConfig

    def pool_needed(self) -> str | None:
        if self.config.examples == 0:
            return None
        return (f"DART-SQL selects its {self.config.examples} examples from an example pool (DAIL selection): "
                "name a pool, or set the option examples to 0 to run it zero-shot.")

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
        log = TurnLog(previous_turns, on_turn)
        env = _Env(ctx, log, tools, llm, should_cancel, [])
        try:
            samples = self._samples(env)
            question = self._rewrite(env, samples)
            examples = self._select(env, question, samples)
            initial = self.generate_messages(ctx, question, examples, samples)
            first = self._produce(env, GENERATE, initial, {"question": question})
            self._refine(env, initial, first)
        except Stop as stop:
            return outcome(log, stop.status, _final(env.chosen), stop.error)
        final = _final(env.chosen)
        if final is not None and final.tool_ok:
            return outcome(log, Status.ANSWERED, final)
        error = "No query executed successfully." if final is not None else "The model wrote no SQL query."
        return outcome(log, Status.GAVE_UP, final, error)

    # --- 0. rows of every table (one stored query per table) -----------------------------

    def _samples(self, env: _Env) -> dict[str, QueryResult | None]:
        cfg = self.config
        limit = max(cfg.rewrite_rows if cfg.rewrite else 0, cfg.candidate_rows, cfg.context_rows)
        return {t.name: sample_rows(env.log, env.tools, t.name, limit, purpose="rewrite and context rows")
                for t in env.ctx.schema.tables}

    # --- 1. rewriting ----------------------------------------------------------------

    def _rewrite(self, env: _Env, samples: dict[str, QueryResult | None]) -> str:
        ctx = env.ctx
        if not self.config.rewrite:
            return ctx.question

        def finish(text: str) -> dict[str, Any]:
            rewritten = parse_rewrite(text) or ctx.question
            return {"extra": {"original_question": ctx.question, "rewritten_question": rewritten}}

        turn = ask(env.log, TurnKind.REWRITE, lambda: self.rewrite_messages(ctx, samples), llm=env.llm,
                   params=self.config.params, should_cancel=env.should_cancel, finish=finish)
        return str(turn.extra.get("rewritten_question") or ctx.question)

    def rewrite_messages(self, ctx: SessionContext, samples: dict[str, QueryResult | None]) -> list[Message]:
        cfg = self.config
        tables = []
        for table in ctx.schema.tables:
            rows = samples.get(table.name)
            shown = ", ".join("(" + ", ".join(sql_literal(v, cfg.cell_chars) for v in row) + ")"
                              for row in (rows.rows[:cfg.rewrite_rows] if rows else []))
            tables.append(f"['Table {table.name}: ', [{shown}]]")
        question = ctx.question.strip()
        if cfg.use_evidence and ctx.evidence and ctx.evidence.strip():
            question += " " + ctx.evidence.strip()
        text = ("/*Instructions:*/\n" + REWRITE_INSTRUCTION + "\n/*Here are some basic examples: */\n"
                + REWRITE_EXAMPLES + "\n/*Here is the input:*/\n/*Given the initial value from Table:*/\n"
                + "\n".join(tables) + f"\n/*Rewrite the following question: {question}*/\n/*results:")
        return [Message("user", text)]

    # --- 2. DAIL-SQL example selection ---------------------------------------------------

    def _select(self, env: _Env, question: str, samples: dict[str, QueryResult | None]) -> list[dict[str, Any]]:
        cfg = self.config
        if cfg.examples == 0:
            return []
        pool, left_out = candidates(env.ctx)
        if not pool:
            turn = env.log.step(SELECT, lambda: {
                "observation": "The example pool is empty: the prompt has no examples (zero-shot)."
                               + left_out_note(env.ctx, left_out),
                "extra": {"examples": [], "pool_size": 0, "left_out": left_out}})
            return list(turn.extra.get("examples") or [])
        preliminary_sql: str | None = None
        if cfg.preliminary:
            pre = ask(env.log, PRELIMINARY, lambda: self.generate_messages(env.ctx, question, [], samples),
                      llm=env.llm, params=cfg.params, should_cancel=env.should_cancel,
                      finish=lambda text: {"sql": continued_sql(text),
                                           "extra": {"skeleton": " ".join(sql_skeleton(continued_sql(text) or ""))}})
            preliminary_sql = pre.sql

        def work() -> dict[str, Any]:
            masked, chosen = select_examples(question, env.ctx.schema, pool, k=cfg.examples,
                                             preliminary_sql=preliminary_sql, threshold=cfg.skeleton_threshold)
            examples = [{**s.example.to_dict(), "question_similarity": s.question_similarity,
                         "skeleton_similarity": s.skeleton_similarity} for s in chosen]
            lines = [f"{e['question_similarity']:.3f}"
                     + (f" / skeleton {e['skeleton_similarity']:.2f}" if e["skeleton_similarity"] is not None else "")
                     + f"  [{e['key']}] {e['question']}" for e in examples]
            note = left_out_note(env.ctx, left_out)
            return {"observation": f"Masked question: {masked}\n{len(examples)} example(s) from a pool of "
                                   f"{len(pool)}{note}:\n" + "\n".join(lines),
                    "extra": {"examples": examples, "pool_size": len(pool), "left_out": left_out,
                              "masked_question": masked}}

        turn = env.log.step(SELECT, work)
        return list(turn.extra.get("examples") or [])

    # --- 3. context-aware prompt and generation ------------------------------------------

    def generate_messages(self, ctx: SessionContext, question: str, examples: Sequence[dict[str, Any]],
                          samples: dict[str, QueryResult | None]) -> list[Message]:
        """DAIL-SQL's prompt (examples, CREATE TABLE schema, question, SELECT) with DART's example rows."""
        cfg = self.config
        parts: list[str] = []
        if examples:
            parts.append(DAIL_EXAMPLES_HEADER)
            for e in examples:
                parts += [f"/* Answer the following: {str(e['question']).strip()} */", str(e["sql"]).strip(), ""]
        parts += ["/* Given the following database schema: */", create_table_text(ctx.schema),
                  f"/* With at most {cfg.context_rows} example rows in each table: */"]
        for table in ctx.schema.tables:
            block = self._context_rows(ctx.schema, table.name, question, samples.get(table.name))
            if block:
                parts.append(block)
        if cfg.use_evidence and ctx.evidence and ctx.evidence.strip():
            parts.append(f"/* Evidence: {ctx.evidence.strip()} */")
        parts += [f"/* Answer the following: {question.strip()} */", "SELECT"]
        return [Message("user", "\n".join(parts))]

    def _context_rows(self, schema: SchemaInfo, table: str, question: str, result: QueryResult | None) -> str | None:
        cfg = self.config
        if result is None or not result.rows:
            return None
        rows, relevant = select_rows(result, question, n=cfg.context_rows, relevant_fraction=cfg.relevant_fraction,
                                     rng=random.Random(f"{cfg.seed}:{table}"))
        case_sensitive = schema.engine == "postgresql"
        columns = ", ".join(ident(c, case_sensitive) for c in result.columns)
        omitted = result.total_rows - len(rows)
        note = f" /* {omitted} rows omitted */" if omitted > 0 else ""
        values = ",\n".join("(" + ", ".join(sql_literal(v, cfg.cell_chars) for v in row) + ")" for row in rows)
        return f"INSERT INTO {ident(table, case_sensitive)} ({columns}) VALUES{note}\n{values};"

    # --- SQL generation: sampling, voting, regeneration ----------------------------------

    def _produce(self, env: _Env, kind: str, messages: Sequence[Message], extra: dict[str, Any]) -> TurnRecord:
        """A query for ``messages``: sampled (and voted), then regenerated at once while it uses a forbidden
        construct (at most ``max_regenerations`` times; no refinement is spent)."""
        cfg = self.config
        current = self._sample(env, kind, messages, extra)
        regenerations = 0
        while cfg.forbid_keywords and current.sql and regenerations < cfg.max_regenerations:
            found = forbidden_keywords(current.sql)
            if not found:
                break
            regenerations += 1
            request = [*messages, Message("assistant", current.sql),
                       Message("user", f"/* The query must not use {' or '.join(found)}. Regenerate the SQL "
                                       "query without it: */\nSELECT")]
            current = self._sample(env, REGENERATE, request,
                                   {**extra, "regeneration": regenerations, "forbidden": found})
        return current

    def _sample(self, env: _Env, kind: str, messages: Sequence[Message], extra: dict[str, Any]) -> TurnRecord:
        cfg = self.config

        def finish_with(extra: dict[str, Any]) -> Callable[[str], dict[str, Any]]:
            def finish(text: str) -> dict[str, Any]:
                sql = continued_sql(text)
                if sql is None:
                    return {"error": "No SQL query found in the completion.", "extra": extra}
                return {**run_sql(env.tools, sql), "extra": extra}
            return finish

        msgs = list(messages)
        if cfg.self_consistency <= 1:
            turn = ask(env.log, kind, lambda: msgs, llm=env.llm, params=cfg.params,
                       should_cancel=env.should_cancel, finish=finish_with(extra))
            env.chosen.append(turn)
            return turn
        params = replace(cfg.params, temperature=cfg.sc_temperature)
        samples = [ask(env.log, kind, lambda: msgs, llm=env.llm, params=params, should_cancel=env.should_cancel,
                       finish=finish_with({**extra, "sample": j}))
                   for j in range(1, cfg.self_consistency + 1)]
        vote = env.log.step(TurnKind.VOTE, lambda: vote_by_result(samples))
        chosen = vote.extra.get("chosen_turn")
        turn = next((t for t in samples if t.index == chosen), samples[-1])
        env.chosen.append(turn)
        return turn

    # --- 4. execution-guided refinement (Algorithm 1) -------------------------------------

    def _refine(self, env: _Env, initial: Sequence[Message], current: TurnRecord) -> TurnRecord:
        cfg = self.config
        for iteration in range(1, cfg.max_refinements + 1):
            if current.sql is None:
                return current  # nothing to refine: the model wrote no query
            # The history is reset: the initial prompt and the latest query only.
            base = [*initial, Message("assistant", current.sql)]
            kind, feedback = self.feedback(env.ctx.schema, current)

            def finish(text: str, kind: str = kind, iteration: int = iteration) -> dict[str, Any]:
                said = verdict(text)
                return {"extra": {"iteration": iteration, "feedback": kind,
                                  "verdict": None if said is None else ("yes" if said else "no"),
                                  "accepted": kind == "result" and said is True}}

            judge = ask(env.log, JUDGE, lambda b=base, f=feedback: [*b, Message("user", f)], llm=env.llm,
                        params=cfg.params, should_cancel=env.should_cancel, finish=finish)
            if judge.extra.get("accepted"):
                return current
            request = [*base, Message("user", feedback), Message("assistant", judge.completion or ""),
                       Message("user", REVISE_REQUEST)]
            current = self._produce(env, REVISE, request, {"iteration": iteration})
        return current

    def feedback(self, schema: SchemaInfo, turn: TurnRecord) -> tuple[str, str]:
        """(kind, message) for the latest query, as in the paper's appendix A.3: column error, other error,
        or its result (an empty result is a result too)."""
        cfg = self.config
        if not executed(turn):
            error = _error_text(turn.observation or turn.error or "unknown error")
            message = f"/* Received the following exception: {error}"
            column = column_in_error(error)
            if column is not None:
                tables = tables_with_column(schema, column)
                if tables:
                    message += (f"\nIn fact, the following {len(tables)} table(s) contain column \"{column}\": "
                                f"{', '.join(tables)}.")
                else:
                    message += f"\nIn fact, no table contains a column named \"{column}\"."
                return "column_error", f"{message}\nPlease analyze the cause. */"
            return "error", f"{message}\nPlease analyze the cause. */"
        result = turn.result
        total = result.total_rows if result is not None else 0
        rows = rows_text(result, cfg.result_rows, cell_chars=cfg.cell_chars) if result is not None and result.rows \
            else ""
        return "result", (
            f"/* Here are the execution results (total {total} rows):\n" + (rows + "\n" if rows else "")
            + "Judge whether the results are correct, and you selected the exact number of columns asked by "
              "the question.\nOutput Yes if you agree with both, or No otherwise. Follow the answer with your "
              "analysis of the results, and the meanings of the columns you selected and those requested by the "
              "question. */"
        )


@dataclass(frozen=True)
class _Env:
    ctx: SessionContext
    log: TurnLog
    tools: ToolRunner
    llm: ChatModel
    should_cancel: ShouldCancel
    chosen: list[TurnRecord]  # the query of each generation step (after voting), in order


# --- pure helpers (tested directly) -------------------------------------------------------------

_PREFIX = re.compile(r"^\s*(?:/\*\s*)?(?:results?|rewritten question|rewrite|question)\s*:\s*", re.IGNORECASE)


def parse_rewrite(text: str) -> str | None:
    """The rewritten question from a completion: its first non-empty line without labels or quotes."""
    for line in text.strip().splitlines():
        line = _PREFIX.sub("", line.strip().strip('"'))
        line = re.sub(r"\s*\*/\s*$", "", line).strip().strip('"').strip()
        if line:
            return line
    return None


def select_rows(result: QueryResult, question: str, *, n: int, relevant_fraction: float,
                rng: random.Random) -> tuple[list[tuple[Any, ...]], int]:
    """At most ``n`` rows: all of them for a small table, else the most relevant (BM25 over the row text)
    followed by random others. Returns the rows and how many were chosen for relevance."""
    rows = list(result.rows)
    if len(rows) <= n:
        return rows, 0
    wanted = round(n * relevant_fraction)
    docs = [stemmed_tokens(" ".join(str(v) for v in row if v is not None and not isinstance(v, bytes)))
            for row in rows]
    query = stemmed_tokens(question)
    relevant: list[int] = []
    if wanted and query and any(docs):
        found = BM25(docs).scores(query)  # the project's one BM25 (SearchColumn's)
        scores = [found.get(i, 0.0) for i in range(len(rows))]
        order = sorted(range(len(rows)), key=lambda i: (-scores[i], i))
        relevant = [i for i in order[:wanted] if scores[i] > 0]  # a row sharing no word is not "relevant"
    chosen = set(relevant)
    rest = [i for i in range(len(rows)) if i not in chosen]
    randoms = sorted(rng.sample(rest, min(len(rest), n - len(relevant))))
    return [rows[i] for i in relevant + randoms], len(relevant)


def forbidden_keywords(sql: str) -> list[str]:
    """The paper's forbidden constructs present in ``sql`` (string literals ignored)."""
    code = _STRING.sub("''", sql)
    return [name for name, pattern in FORBIDDEN.items() if pattern.search(code)]


def column_in_error(error: str) -> str | None:
    """The column named by a no-such-column or ambiguous-column error (SQLite or PostgreSQL wording)."""
    for pattern in _COLUMN_ERRORS:
        m = pattern.search(error)
        if m:
            name = m.group(1).split(".")[-1]
            return name.strip("\"`[]") or None
    return None


def tables_with_column(schema: SchemaInfo, column: str) -> list[str]:
    return [t.name for t in schema.tables if t.column(column) is not None]


def _final(chosen: Sequence[TurnRecord]) -> TurnRecord | None:
    """The latest query; if it failed, the latest one that ran (a failing query cannot be the answer)."""
    with_sql = [t for t in chosen if t.sql]
    if not with_sql:
        return None
    if with_sql[-1].tool_ok:
        return with_sql[-1]
    ran = [t for t in with_sql if t.tool_ok]
    return ran[-1] if ran else with_sql[-1]

_LEADING_SQL = re.compile(r"^\s*(?:SELECT|WITH)\b", re.IGNORECASE)


def continued_sql(text: str) -> str | None:
    """The query of a completion that continues a prompt ending in ``SELECT`` (DAIL-SQL's representation):
    a fenced block or a full statement as it is, else ``SELECT`` + the continuation up to its end."""
    if "```" in text:
        sql = extract_sql(text)
        if sql is None:
            return None
        return sql if _LEADING_SQL.match(sql) else f"SELECT {sql}"
    body = text.strip()
    if not body:
        return None
    if _LEADING_SQL.match(body):
        return extract_sql(body)
    body = re.split(r";|\n\s*\n", body, maxsplit=1)[0].strip()
    return f"SELECT {body}" if body else None


def result_key(result: QueryResult) -> tuple[str, ...]:
    """Rows as an order-free multiset (sorted reprs), for grouping candidates with the same result."""
    return tuple(sorted(repr(tuple(row)) for row in result.rows))


def vote_by_result(samples: Sequence[TurnRecord]) -> dict[str, Any]:
    """Self-consistency voting: the samples that ran are grouped by result; the largest group wins, a tie
    goes to the group whose first sample came first. Without a sample that ran, the first one with SQL."""
    groups: dict[tuple[str, ...], list[TurnRecord]] = {}
    for turn in samples:
        if executed(turn) and turn.result is not None:
            groups.setdefault(result_key(turn.result), []).append(turn)
    summary = [{"turns": [t.index for t in g], "sql": g[0].sql, "rows": g[0].result.total_rows if g[0].result else 0}
               for g in groups.values()]
    if groups:
        best = max(groups.values(), key=lambda g: (len(g), -g[0].index))
        chosen = best[0]
        tied = sum(1 for g in groups.values() if len(g) == len(best)) > 1
        how = f"{len(best)} of {len(samples)} samples agree" + (" (tie: the earliest group wins)" if tied else "")
    else:
        with_sql = [t for t in samples if t.sql]
        chosen = with_sql[0] if with_sql else samples[0]
        tied = False
        how = "no sample ran: the first sample with a query"
    return {"sql": chosen.sql, "observation": f"Vote by execution result: {how}; turn {chosen.index + 1}.",
            "extra": {"groups": summary, "chosen_turn": chosen.index, "tie": tied, "samples": len(samples)}}


def _error_text(observation: str) -> str:
    line = observation.strip()
    return re.sub(r"^(?:Error:\s*)?(?:SQL error:\s*)?", "", line, flags=re.IGNORECASE) or line
