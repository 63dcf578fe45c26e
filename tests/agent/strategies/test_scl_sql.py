"""SCL-SQL end to end over real HTTP: split, linking, positives with decay, negatives, loop, vote."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from agent.llm import LLMClient, LLMSettings
from agent.strategies import STRATEGIES, Exemplar, SessionContext, Status, TurnRecord, create_strategy
from agent.strategies.pool import PoolExample
from agent.strategies.scl_sql import (
    MASK,
    SCLSQL,
    SUBSTITUTIONS,
    SCLSQLConfig,
    jaccard,
    parse_vote,
    rank_examples,
    skeleton_words,
    split_question,
)
from tests.support.replay_server import ReplayServer

from .tool_double import ToolDouble

QUESTION = "How many concerts did Adele give in 2017?"
GOOD_SQL = ("SELECT COUNT(*) FROM concert JOIN singer ON concert.singer_id = singer.singer_id "
            "WHERE singer.name = 'Adele' AND concert.year = 2017")
WRONG_SQL = "SELECT COUNT(*) FROM concert WHERE singer_id = 'Adele'"
BROKEN_SQL = "SELECT COUNT(*) FROM concert WHERE nme = 'Adele'"
POOL = (
    ("How many songs did Sting write in 1990?", "SELECT COUNT(*) FROM song WHERE writer = 'Sting' AND year = 1990"),
    ("List the names of all singers.", "SELECT name FROM singer"),
    ("How many albums did Queen release in 1975?", "SELECT COUNT(*) FROM album WHERE band = 'Queen'"),
    ("How many singers are from France?", "SELECT COUNT(*) FROM singer WHERE country = 'France'"),
)


def sql_block(sql: str) -> str:
    return f"```sql\n{sql}\n```"


def stored_copy(turn: TurnRecord) -> TurnRecord:
    """A turn as the session layer stores and reloads it (through JSON)."""
    return TurnRecord.from_dict(json.loads(json.dumps(turn.to_dict())))


def client_for(server: ReplayServer) -> LLMClient:
    return LLMClient(LLMSettings(base_url=server.url, api_key="k", model="replay-model", timeout_s=5.0,
                                 backoff_base_s=0.001, backoff_max_s=0.005, max_retries=0))


POOL_EXAMPLES = tuple(PoolExample(f"d:{i}", q, s) for i, (q, s) in enumerate(POOL))
TOOLS = SCLSQLConfig(schema_linking="tools")


def run(server: ReplayServer, tools: ToolDouble, *, config: SCLSQLConfig | None = None,
        previous: Sequence[TurnRecord] = (), exemplars: tuple[Exemplar, ...] = (),
        pool: Sequence[PoolExample] = POOL_EXAMPLES, question_key: str | None = None):
    stored: list[TurnRecord] = []
    ctx = SessionContext(question=QUESTION, schema=tools.schema, exemplars=exemplars, example_pool=tuple(pool),
                         question_key=question_key)
    outcome = SCLSQL(config or TOOLS).run(
        ctx, tools=tools, llm=client_for(server), on_turn=stored.append, previous_turns=previous)
    return outcome, stored


LOOP_SCRIPT = [
    sql_block(WRONG_SQL), "No. singer_id holds numbers; Adele is a name in singer.",  # loop 1: logic fails
    sql_block(BROKEN_SQL),  # loop 2: execution fails, no LLM verification
    sql_block(GOOD_SQL), "Yes. It counts her 2017 concerts.",  # loop 3: passes
]


def test_loop_carries_negatives_decays_positives_and_answers_with_the_verified_pair(tools: ToolDouble) -> None:
    with ReplayServer(LOOP_SCRIPT) as server:
        outcome, turns = run(server, tools)
        requests = server.chat_requests()

    kinds = [t.kind for t in turns]
    first_generate = kinds.index("generate")
    assert kinds[0] == "split" and kinds[first_generate - 1] == "retrieve"
    assert set(kinds[1:first_generate - 1]) == {"link"}
    assert kinds[first_generate:] == ["generate", "verify", "generate", "verify", "generate", "verify"]

    split = turns[0].extra
    assert "Adele" in split["entities"] and "2017" in split["entities"]
    assert split["skeleton"].startswith("how many") and "adele" not in split["skeleton"]
    links = turns[1:first_generate - 1]
    assert links[0].tool == "SearchColumn" and links[0].args == ([e for e in split["entities"] if e != "2017"],)
    assert [t.tool for t in links[1:]] == ["SearchValue"] * (len(links) - 1)
    assert all(t.tool_latency_ms is not None for t in links)
    positives = turns[first_generate - 1].extra["positives"]
    assert [p["question"] for p in positives] == [POOL[0][0], POOL[2][0], POOL[3][0]]  # P0 = 3, best first

    gens = [t for t in turns if t.kind == "generate"]
    verifies = [t for t in turns if t.kind == "verify"]
    # P = P0 - alpha * N: 3, 2, 1 positives as negatives accumulate.
    assert [(g.extra["positives"], g.extra["negatives"]) for g in gens] == [(3, 0), (2, 1), (1, 2)]
    prompts = [requests[0], requests[2], requests[3]]
    assert [p.messages[1]["content"].count("[valid] Question:") for p in prompts] == [3, 2, 1]
    assert [p.messages[1]["content"].count("[invalid] SQL:") for p in prompts] == [0, 1, 2]
    second = prompts[1].messages[1]["content"]
    assert (f"[invalid] SQL: {WRONG_SQL}\nResult: Columns: COUNT(*) (total 1 rows) (0)\n"
            "Cause: singer_id holds numbers; Adele is a name in singer.") in second
    third = prompts[2].messages[1]["content"]
    assert f"[invalid] SQL: {BROKEN_SQL}\nResult: SQL error: no such column: nme" in third
    assert "Cause: the query failed: SQL error: no such column: nme" in third
    assert "Schema linking for the entities of the question:\nSearchColumn([" in third
    assert "singer.name = 'Adele'" in third  # the canned SearchValue finding
    assert third.endswith(f"Question: {QUESTION}")

    assert verifies[0].extra["check"] == "logic" and verifies[0].extra["passed"] is False
    assert verifies[1].completion is None and verifies[1].extra["check"] == "execution"
    assert verifies[2].extra["passed"] is True
    # The verifier rejected WRONG_SQL, so it never enters the candidate pool: no vote between it and GOOD_SQL.
    assert len(requests) == 5
    assert all(r.params["temperature"] == 0.1 for r in requests)

    assert outcome.status == Status.ANSWERED and outcome.final_sql == GOOD_SQL
    assert outcome.result.rows == [(1,)]
    assert outcome.totals.rounds == 5


def test_candidates_the_verifier_rejected_are_never_voted_on(tools: ToolDouble) -> None:
    # Two queries ran and were rejected by the logic check, none passed: the candidate pool of verified pairs is
    # empty, nothing is voted on, and the last loop's executed query is the answer (the paper's "w/o vote").
    other = "SELECT COUNT(*) FROM concert"
    script = [sql_block(WRONG_SQL), "No. Wrong filter.", sql_block(other), "No. No filter.",
              sql_block(BROKEN_SQL)]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools)
        requests = server.chat_requests()
    assert "vote" not in [t.kind for t in turns] and len(requests) == 5
    assert not any("Candidate 1:" in m["content"] for r in requests for m in r.messages)
    assert outcome.status == Status.ANSWERED and outcome.final_sql == other


def test_empty_pool_is_said_and_a_single_passing_candidate_needs_no_vote(tools: ToolDouble) -> None:
    with ReplayServer([sql_block(GOOD_SQL), "Yes"]) as server:
        outcome, turns = run(server, tools, pool=())
        requests = server.chat_requests()
    retrieve = next(t for t in turns if t.kind == "retrieve")
    assert retrieve.observation == "The example pool is empty: no positive examples."
    assert "[valid]" not in requests[0].messages[1]["content"]
    assert [t.kind for t in turns][-2:] == ["generate", "verify"]
    assert outcome.final_sql == GOOD_SQL and len(requests) == 2


def test_session_exemplars_join_the_pool(tools: ToolDouble) -> None:
    exemplar = Exemplar(schema_text="", question="How many concerts did Sting give in 2019?", evidence=None,
                        steps=(), final_sql="SELECT 1")
    with ReplayServer([sql_block(GOOD_SQL), "Yes"]) as server:
        _, turns = run(server, tools, config=SCLSQLConfig(positives=1, schema_linking="tools"), pool=(),
                       exemplars=(exemplar,))
    retrieve = next(t for t in turns if t.kind == "retrieve")
    assert retrieve.extra["pool_size"] == 1 and retrieve.extra["positives"][0]["sql"] == "SELECT 1"


def test_empty_results_are_negatives_and_no_executable_candidate_gives_up(tools: ToolDouble) -> None:
    empty = "SELECT COUNT(*) FROM concert WHERE year = 2017 GROUP BY singer_id HAVING COUNT(*) > 5"
    script = [sql_block(empty), sql_block(BROKEN_SQL), "I do not know."]
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools)
        requests = server.chat_requests()
    verifies = [t for t in turns if t.kind == "verify"]
    assert [v.extra["cause"] for v in verifies] == [
        "the query returned no rows", "the query failed: SQL error: no such column: nme",
        "the reply contained no SQL query"]
    assert "Cause: the query returned no rows" in requests[1].messages[1]["content"]
    assert "[invalid] SQL: (none)" not in requests[2].messages[1]["content"]
    assert len(requests) == 3  # three generations, no LLM verification, no vote
    # The empty-result query ran, so it is the only candidate and the answer.
    assert outcome.status == Status.ANSWERED and outcome.final_sql == empty


def test_all_failing_loops_give_up(tools: ToolDouble) -> None:
    script = [sql_block(BROKEN_SQL)] * 3
    with ReplayServer(script) as server:
        outcome, turns = run(server, tools)
    assert sum(t.kind == "generate" for t in turns) == 3
    assert outcome.status == Status.GAVE_UP and outcome.final_sql == BROKEN_SQL and outcome.result is None


def test_vote_off_answers_with_the_last_loops_candidate(tools: ToolDouble) -> None:
    with ReplayServer([sql_block(WRONG_SQL), "No. Wrong filter.", sql_block(GOOD_SQL), "No. Not sure."]) as server:
        outcome, turns = run(server, tools, config=SCLSQLConfig(schema_linking="tools", vote=False, max_loops=2))
    assert "vote" not in [t.kind for t in turns] and outcome.final_sql == GOOD_SQL


def test_resume_replays_stored_steps_without_calling_the_llm_again(tools: ToolDouble) -> None:
    with ReplayServer(LOOP_SCRIPT) as server:
        full, turns = run(server, tools)
        full_requests = server.chat_requests()
    cut = [t.kind for t in turns].index("generate") + 3  # generate, verify, generate stored
    calls_before = len(tools.calls)
    with ReplayServer(LOOP_SCRIPT[3:]) as server:
        resumed, more = run(server, tools, previous=[stored_copy(t) for t in turns[:cut]])
        requests = server.chat_requests()
    assert [r.messages for r in requests] == [r.messages for r in full_requests[3:]]
    assert [t.kind for t in more] == ["verify", "generate", "verify"]
    assert more[0].index == cut and more[0].completion is None  # the execution check of loop 2
    assert not any(name != "ExecuteSQL" for name, _a, _k in tools.calls[calls_before:])  # no new linking
    assert resumed.final_sql == full.final_sql == GOOD_SQL


def test_preview_registry_and_config_round_trip(tools: ToolDouble) -> None:
    assert STRATEGIES["scl_sql"] is SCLSQL
    config = SCLSQLConfig(max_loops=2, schema_linking="tools")
    snapshot = config.to_dict()
    assert create_strategy("scl_sql", snapshot | {"example_pool": [["q", "s"]]}).config == config
    defaults = SCLSQLConfig()
    assert (defaults.positives, defaults.max_loops, defaults.alpha, defaults.temperature,
            defaults.schema_linking) == (3, 3, 1, 0.1, "llm")
    with pytest.raises(ValueError):
        SCLSQLConfig(alpha=0.5)
    with pytest.raises(ValueError):
        SCLSQLConfig(schema_linking="magic")
    ctx = SessionContext(question=QUESTION, schema=tools.schema, example_pool=POOL_EXAMPLES)
    messages = SCLSQL(TOOLS).preview_messages(ctx)
    assert messages[1].content.count("[valid]") == 3 and "SearchColumn" in SUBSTITUTIONS
    # With the paper's LLM linking the first call is the linking prompt.
    first = SCLSQL().preview_messages(ctx)
    assert first[0].content.startswith("Entities: ") and "CREATE TABLE singer" in first[0].content


def test_llm_schema_linking_prunes_the_prompts_schema_and_keeps_join_keys(tools: ToolDouble) -> None:
    link = "singer.name\nconcert.year\nalbum.title\nsinger.nickname"
    with ReplayServer([link, sql_block(GOOD_SQL), "Yes"]) as server:
        outcome, turns = run(server, tools, config=SCLSQLConfig())
        requests = server.chat_requests()
    assert [t.kind for t in turns] == ["split", "link", "retrieve", "generate", "verify"]
    linked = turns[1]
    assert linked.extra["linked"] == {"singer": ["name"], "concert": ["year"]}
    assert linked.extra["unknown"] == ["album.title", "singer.nickname"]
    link_prompt = requests[0].messages[0]["content"]
    assert link_prompt.startswith("Entities: ") and "Adele" in link_prompt.split("\n")[0]
    assert "CREATE TABLE grade" in link_prompt and f"Question: {QUESTION}" in link_prompt  # the full schema
    prompt = requests[1].messages[1]["content"]
    schema = prompt.split("Database schema:\n")[1].split("\n\n")[0]
    assert "CREATE TABLE grade" not in schema and "CREATE TABLE enrollment" not in schema
    assert "CREATE TABLE singer (\n  singer_id INTEGER,\n  name TEXT,\n  PRIMARY KEY (singer_id)\n);" in schema
    assert "country" not in schema
    assert "  singer_id INTEGER,\n  year INTEGER" in schema and "REFERENCES singer(singer_id)" in schema
    assert outcome.final_sql == GOOD_SQL


def test_linking_that_names_nothing_keeps_the_full_schema(tools: ToolDouble) -> None:
    with ReplayServer(["I do not know.", sql_block(GOOD_SQL), "Yes"]) as server:
        _, turns = run(server, tools, config=SCLSQLConfig())
        requests = server.chat_requests()
    assert "full schema is kept" in turns[1].observation
    assert "CREATE TABLE grade" in requests[1].messages[1]["content"]


def test_retrieval_leaves_the_question_itself_out(tools: ToolDouble) -> None:
    own = PoolExample("d:own", QUESTION, GOOD_SQL)
    with ReplayServer([sql_block(GOOD_SQL), "Yes"]) as server:
        _, turns = run(server, tools, pool=(own, *POOL_EXAMPLES), question_key="d:own")
        requests = server.chat_requests()
    retrieve = next(t for t in turns if t.kind == "retrieve")
    assert "d:own" not in [p["key"] for p in retrieve.extra["positives"]]
    assert retrieve.extra["left_out"] == 1 and retrieve.extra["pool_size"] == 4
    assert f"[valid] Question: {QUESTION}" not in requests[0].messages[1]["content"]


def test_split_question_masks_entities_and_numbers() -> None:
    entities, skeleton = split_question("How many concerts did Adele give in 2017?")
    assert "Adele" in entities and "2017" in entities
    assert skeleton.startswith("how many ") and skeleton.endswith("?") and MASK in skeleton
    assert "adele" not in skeleton and "2017" not in skeleton
    assert split_question("") == ((), "")


def test_rank_examples_by_skeleton_jaccard() -> None:
    _, skeleton = split_question(QUESTION)
    ranked = rank_examples(skeleton, POOL)
    assert ranked[0][2] == POOL[0][0] and ranked[0][0] == pytest.approx(1.0) and ranked[0][1] == 0
    assert ranked[-1][2] == POOL[1][0]
    assert jaccard(frozenset({"a", "b"}), frozenset({"b", "c"})) == pytest.approx(1 / 3)
    assert jaccard(frozenset(), frozenset()) == 0.0
    assert skeleton_words("how many [E] in [E] ?") == {"how", "many", "in"}


def test_parse_vote() -> None:
    assert parse_vote("Vote: 2. Because.", 3) == 2
    assert parse_vote("I pick candidate #3", 3) == 3
    assert parse_vote("Vote: 7", 3) is None
    assert parse_vote("none of them", 3) is None
