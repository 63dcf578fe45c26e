"""The paper's exemplar observations (the authors' reprs) rewritten in the default profile's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.strategies.exemplars import parse_trajectory, rewritten
from agent.tools.authors_reprs import default_from_authors

PROMPTS = Path(__file__).resolve().parents[3] / "annotations" / "exemplars" / "paper_prompts"
TRAJECTORIES = sorted(p for p in PROMPTS.glob("*/*/*.txt") if p.name != "schema.txt")


@pytest.mark.parametrize("path", TRAJECTORIES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_observation_of_the_papers_exemplars_reads_as_the_default_format(path: Path) -> None:
    shot = parse_trajectory(path.read_text(encoding="utf-8"), schema_text="")
    steps = [s for s in rewritten(shot, default_from_authors).steps if s.observation is not None]
    assert steps
    for step in steps:
        assert not step.observation.startswith(("[", "{")), (step.action, step.observation)


def test_each_tool_in_the_default_words() -> None:
    column = default_from_authors("SearchColumn", ["sex"], {}, "[{'column': 'Sex', 'format': 'VARCHAR(1)', "
                                  "'table': 'Student', 'statistics': \"categorical field. ['F', 'M']\"}, "
                                  "{'column': 'Age', 'format': 'INTEGER', 'table': 'Student', "
                                  "'statistics': 'min: 16, max: 27. distinct count: 9'}]")
    assert column == ("'sex':\n- Student.Sex VARCHAR(1) | enumeration: 'F', 'M'\n"
                      "- Student.Age INTEGER | numeric range: 16 .. 27; distinct count: 9")
    value = default_from_authors("SearchValue", ["Soccer"], {}, "[{'contents': 'Soccer', 'table': 'Activity', "
                                 "'column': 'activity_name'}, {'contents': 'Soccer', 'table': 'Activity', "
                                 "'column': 'activity_name'}]")
    assert value == "'Soccer':\nActivity.activity_name = 'Soccer'"
    rows = default_from_authors("ExecuteSQL", ["SELECT name, COUNT(*) AS n FROM t GROUP BY name"], {},
                                "[('a', 1), ('b', 2)]")
    assert rows == "name | n\n'a' | 1\n'b' | 2"
    assert default_from_authors("ExecuteSQL", ["SELECT x FROM t"], {}, "no such table: t") == (
        "Error: no such table: t")
    paths = default_from_authors("FindShortestPath", [["a.x", "b.y"], "c.z"], {},
                                 "[('a.x', 'c.z', 'a.x <-> c.k = a.k <-> c.z'), ('b.y', 'c.z', 'Error. No path "
                                 "between b.y and c.z.')]")
    assert paths == "a.x <-> c.k = a.k <-> c.z\nError. No path between b.y and c.z."
