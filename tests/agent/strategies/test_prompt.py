from __future__ import annotations

from agent.llm import Message
from agent.sql import ColumnInfo, ForeignKey, SchemaInfo, TableInfo
from agent.strategies import InteractiveT2S, InteractiveT2SConfig, SessionContext
from agent.strategies.prompt import (
    Exemplar,
    Step,
    build_messages,
    estimate_message_tokens,
    estimate_tokens,
    schema_text,
    tool_description,
)
from agent.tools import tool_names

from .tool_double import ToolDouble

EXEMPLAR = Exemplar(
    schema_text="| Table | Primary Key | Foreign Key | Row Count |\n| --- | --- | --- | --- |\n| Activity | actid |  | 16 |",
    question="Which activities are there?",
    evidence="activity refers to activity_name",
    steps=(
        Step("I need the activity name column.", 'SearchColumn("activity name")',
             "Activity.activity_name (TEXT): e.g. 'Soccer'"),
        Step("Now run it.", 'ExecuteSQL("SELECT activity_name FROM Activity")', "[('Soccer',)]"),
        Step("The query is complete.", "Done"),
    ),
    final_sql="SELECT activity_name FROM Activity",
)


def test_schema_text_lists_tables_keys_and_counts_but_no_columns(school_db) -> None:
    runner = ToolDouble(school_db)
    text = schema_text(runner.schema)
    runner.close()
    assert text.splitlines() == [
        "| Table | Primary Key | Foreign Key | Row Count |",
        "| --- | --- | --- | --- |",
        "| concert | concert_id | singer_id references singer(singer_id) | 4 |",
        "| enrollment | student_id, course_id |  | 3 |",
        "| grade |  | (student_id, course_id) references enrollment(student_id, course_id) | 3 |",
        "| singer | singer_id |  | 3 |",
    ]
    assert "country" not in text and "score" not in text


def test_schema_text_escapes_pipes_and_separates_several_foreign_keys() -> None:
    schema = SchemaInfo("sqlite", (
        TableInfo("a|b", (ColumnInfo("a|b", "x", "INT"),), ("x",), (
            ForeignKey("a|b", ("x",), "c", ("y",)), ForeignKey("a|b", ("p", "q"), "d", ("r", "s"))), None),
    ))
    assert schema_text(schema).splitlines()[2] == (
        "| a\\|b | x | x references c(y); (p, q) references d(r, s) |  |")


def test_tool_description_covers_every_enabled_tool() -> None:
    text = tool_description()
    for name in tool_names():
        assert f"{name}(" in text
    assert "one of: SearchValue, SearchColumn, FindShortestPath, ExecuteSQL, Done" in text
    assert "1. SearchValue(" in text and "4. ExecuteSQL(" in text


def test_tool_description_without_find_shortest_path_is_renumbered_and_never_mentions_it() -> None:
    text = tool_description(["SearchValue", "SearchColumn", "ExecuteSQL"])
    assert "FindShortestPath" not in text
    assert "3. ExecuteSQL(" in text
    assert "one of: SearchValue, SearchColumn, ExecuteSQL, Done" in text
    assert "Join tables on the foreign keys listed in the schema" in text


def test_tool_description_names_the_dialect_and_evidence_rule() -> None:
    text = tool_description(dialect="PostgreSQL", use_evidence=True)
    assert "PostgreSQL database" in text and "read-only PostgreSQL query" in text
    assert "Evidence" in text
    assert "Evidence" not in tool_description(use_evidence=False)


def test_messages_have_system_exemplars_then_schema_and_question(school_db) -> None:
    runner = ToolDouble(school_db)
    messages = build_messages(schema=runner.schema, question="How many singers?", evidence="singer = person",
                              exemplars=[EXEMPLAR], use_evidence=True)
    runner.close()
    system, user = messages
    assert system.role == "system" and user.role == "user"
    assert "Here are some examples:" in system.content
    assert ("Example 1\nDatabase schema:\n| Table | Primary Key | Foreign Key | Row Count |" in system.content)
    assert ("Q: Which activities are there?\nEvidence: activity refers to activity_name\n"
            "Thought: I need the activity name column.\nAction: SearchColumn(\"activity name\")\n"
            "Observation: Activity.activity_name (TEXT): e.g. 'Soccer'\n") in system.content
    assert system.content.endswith("Thought: The query is complete.\nAction: Done")
    assert user.content.startswith("Database schema:\n| Table | Primary Key |")
    assert user.content.endswith("Q: How many singers?\nEvidence: singer = person")


def test_evidence_is_left_out_when_disabled(school_db) -> None:
    runner = ToolDouble(school_db)
    messages = build_messages(schema=runner.schema, question="Q1", evidence="secret hint", exemplars=[EXEMPLAR],
                              use_evidence=False)
    runner.close()
    assert all("secret hint" not in m.content and "Evidence:" not in m.content for m in messages)


def test_history_alternates_assistant_steps_and_observations() -> None:
    messages = build_messages(schema="| T |", question="q", history=[("Thought: a\nAction: Done()", "obs")])
    assert messages[2:] == [Message("assistant", "Thought: a\nAction: Done()"), Message("user", "Observation: obs")]


def test_strategy_preview_is_the_same_prompt_for_the_ablation(school_db) -> None:
    runner = ToolDouble(school_db)
    ctx = SessionContext(question="How many singers?", schema=runner.schema, exemplars=(EXEMPLAR,))
    runner.close()
    config = InteractiveT2SConfig(enabled_tools=("SearchValue", "SearchColumn", "ExecuteSQL"))
    preview = InteractiveT2S(config).preview_messages(ctx)
    assert preview == build_messages(schema=ctx.schema, question=ctx.question, exemplars=ctx.exemplars,
                                     enabled_tools=config.enabled_tools, use_evidence=True)
    assert "FindShortestPath" not in preview[0].content


def test_token_counts_come_from_gpt_4os_tokenizer_offline() -> None:
    from agent.llm.tokens import encoder

    assert estimate_tokens("") == 0
    assert encoder().encode_ordinary("hello world") == [24912, 2375]  # o200k_base ids, as tiktoken gives them
    assert estimate_tokens("hello world") == 2
    assert estimate_tokens("SELECT name FROM singer WHERE country = 'UK'") == 10
    assert estimate_tokens("<|endoftext|>") > 1  # special-token text is counted as text, never refused
    messages = [Message("system", "hello world"), Message("user", "hi")]
    assert estimate_message_tokens(messages) > estimate_tokens("hello world hi")


# --- the paper's Table 10 ablation -------------------------------------------------------------

def _paper_spider_shots():
    from pathlib import Path

    from agent.strategies.exemplars import parse_trajectory

    folder = Path(__file__).resolve().parents[3] / "annotations" / "exemplars" / "paper_prompts" / "spider"
    shots = []
    for db in ("academic", "activity_1"):
        schema = (folder / db / "schema.txt").read_text()
        for file in sorted((folder / db).glob("*.txt")):
            if file.name != "schema.txt":
                shots.append(parse_trajectory(file.read_text(), schema_text=schema))
    return folder, shots


def test_without_find_shortest_path_the_sets_no_findpath_text_is_sent_and_its_steps_dropped():
    from agent.strategies.prompt import build_messages

    folder, shots = _paper_spider_shots()
    full_text = (folder / "tool_desc.txt").read_text().strip()
    no_findpath = (folder / "tool_desc_no_findpath.txt").read_text().strip()
    assert any(s.action.startswith("FindShortestPath(") for shot in shots for s in shot.steps)
    kwargs = {"schema": "| Table |", "question": "q", "exemplars": shots, "custom_tool_description": full_text,
              "custom_tool_description_no_findpath": no_findpath}
    full = build_messages(**kwargs)[0].content
    assert full.startswith(full_text) and "Action: FindShortestPath(" in full
    ablation = build_messages(**kwargs, enabled_tools=["SearchValue", "SearchColumn", "ExecuteSQL"])[0].content
    assert ablation.startswith(no_findpath)
    assert "FindShortestPath" not in ablation  # neither in the text nor in any exemplar step
    # every other step survives, in order
    assert ablation[len(no_findpath):].count("\nAction: ") == sum(1 for shot in shots for s in shot.steps
                                             if not s.action.startswith("FindShortestPath("))
    # another ablation (no SearchValue) has no set text for it: our generated description, steps dropped too
    other = build_messages(**kwargs, enabled_tools=["SearchColumn", "FindShortestPath", "ExecuteSQL"])[0].content
    assert not other.startswith(no_findpath) and "Action: SearchValue(" not in other


def test_a_custom_description_that_introduces_the_exemplars_is_not_followed_by_a_second_introduction() -> None:
    """The paper's tool_desc.txt ends with "Here are some exemplars:"; the default layout adds its own line only
    when the description has none (the prompt once read "...exemplars:\n\nHere are some examples:")."""
    from agent.strategies.prompt import system_prompt

    paper = system_prompt([EXEMPLAR], custom_tool_description="Tools: ...\n\nHere are some exemplars:\n")
    assert "Here are some examples:" not in paper and paper.count("Here are some exemplars:") == 1
    ours = system_prompt([EXEMPLAR], custom_tool_description="Tools: ...")
    assert ours.count("Here are some examples:") == 1
