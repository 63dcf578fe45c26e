from __future__ import annotations

import re

import pytest

from agent.strategies.exemplars import TrajectoryFormatError, parse_trajectory, render_trajectory
from agent.strategies.prompt import Step, render_exemplar
from tests.conftest import SHARED_DIR

REFERENCE = SHARED_DIR / "reference" / "interactive_t2s_prompts"

SAMPLE = '''# {
#     "db_id": "concert_singer",
# }
Q: How many concerts did Adele give?
Evidence: Adele is a singer name
Thought: Find the value.
Action: SearchValue("Adele")
Observation: singer.name = 'Adele'
# Difficulty: none
Thought: Query it.
Action: ExecuteSQL("""
SELECT COUNT(*)
FROM concert JOIN singer ON concert.singer_id = singer.singer_id
WHERE singer.name = 'Adele'
""")
Observation: count
2
Thought: Done.
Action: Done
'''


def test_parse_trajectory_reads_multiline_fields_and_skips_comments() -> None:
    ex = parse_trajectory(SAMPLE, schema_text="| Table |\n")
    assert ex.schema_text == "| Table |"
    assert ex.question == "How many concerts did Adele give?"
    assert ex.evidence == "Adele is a singer name"
    assert ex.steps[0] == Step("Find the value.", 'SearchValue("Adele")', "singer.name = 'Adele'")
    assert ex.steps[1].action.startswith('ExecuteSQL("""\nSELECT COUNT(*)') and ex.steps[1].action.endswith('""")')
    assert ex.steps[1].observation == "count\n2"
    assert ex.steps[2] == Step("Done.", "Done", None)
    assert ex.final_sql == ("SELECT COUNT(*)\nFROM concert JOIN singer ON concert.singer_id = singer.singer_id\n"
                            "WHERE singer.name = 'Adele'")


def test_render_then_parse_round_trips() -> None:
    ex = parse_trajectory(SAMPLE, schema_text="| Table |")
    assert parse_trajectory(render_trajectory(ex), schema_text="| Table |") == ex
    assert render_exemplar(ex, use_evidence=True).endswith(render_trajectory(ex))


def test_preamble_before_the_question_is_skipped() -> None:
    assert parse_trajectory("-- START --\nQ: q\nAction: Done", schema_text="").question == "q"


@pytest.mark.parametrize(("text", "message"), [
    ("Thought: x\nAction: Done", "no 'Q:' line"),
    ("Q: only a question", "no steps"),
    ("Q: q\nThought: no action", "step 1 has no Action"),
])
def test_malformed_trajectories_are_rejected(text: str, message: str) -> None:
    with pytest.raises(TrajectoryFormatError, match=message):
        parse_trajectory(text, schema_text="")


@pytest.mark.shared_data
def test_every_reference_trajectory_imports() -> None:
    # The two Snowflake files of the release hold a question and a gold query but no trajectory.
    files = [p for p in REFERENCE.rglob("*.txt")
             if p.name != "schema.txt" and not p.name.startswith("tool_desc")
             and re.search(r"(?m)^Action: ", p.read_text())]
    assert len(files) == 8
    for path in files:
        schema = (path.parent / "schema.txt").read_text(encoding="utf-8")
        ex = parse_trajectory(path.read_text(encoding="utf-8"), schema_text=schema)
        assert ex.question and ex.steps, path
        assert ex.steps[-1].action.rstrip(".") == "Done", path
        assert ex.final_sql, path


@pytest.mark.shared_data
def test_reference_exemplar_matches_the_figure_2_flow() -> None:
    base = REFERENCE / "spider" / "activity_1"
    ex = parse_trajectory((base / "fake-type134.txt").read_text(), schema_text=(base / "schema.txt").read_text())
    assert [s.action.split("(")[0] for s in ex.steps] == [
        "SearchValue", "SearchColumn", "SearchColumn", "FindShortestPath", "ExecuteSQL", "Done"]
    assert ex.final_sql.startswith("SELECT Student.Fname, Student.Lname, Faculty.Fname")
