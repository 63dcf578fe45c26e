"""The tool registry is the one place a tool is described: a fifth tool added there alone shows up everywhere."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from agent.forms import AskForm
from agent.sql import Connector, SQLError
from agent.strategies.parsing import Action, parse_action
from agent.strategies.prompt import tool_description
from agent.tools import FormField, Param, ToolBox, ToolOutput, ToolSpec, build_indexes, clear_cache, registry
from agent.tools.errors import ToolError
from agent.tools.spec import render_call
from annotations.exemplars.forms import compose_action


def _count_rows(ctx: Any, a: Mapping[str, Any]) -> ToolOutput:
    table = a["table"]
    if not isinstance(table, str) or not table.strip():
        raise ToolError('CountRows needs a table name, e.g. CountRows("singer").')
    try:
        result = ctx.connector.execute(f'SELECT COUNT(*) FROM "{table.strip()}"')
    except SQLError as exc:
        return ToolOutput(str(exc), ok=False)
    return ToolOutput((table.strip(), result.rows[0][0]))


def _observe(output: ToolOutput, profile: str) -> str:
    if not output.ok:
        return f"Error: {output.data}"
    table, count = output.data
    return f"{table} has {count} rows" if profile == "default" else f"{table}: {count}"


COUNT_ROWS = ToolSpec(
    name="CountRows",
    params=(Param("table", "str", aliases=("name",)),),
    description="Counts the rows of one table.",
    guidance="Check how large a table is with CountRows before scanning it.",
    execute=_count_rows,
    observe=_observe,
    fields=(FormField("table", "Table to count", "table", required=True, suggest="tables"),),
    profiles=("default", "terse"),
)


@pytest.fixture
def fifth_tool():
    with registry.registered(COUNT_ROWS):
        yield COUNT_ROWS
    assert "CountRows" not in registry.tool_names()


def test_a_registered_tool_is_dispatched_by_the_toolbox(fifth_tool, connector: Connector, index_dir: Path) -> None:
    build_indexes(connector, index_dir)
    try:
        tools = ToolBox(connector, index_dir)
        assert tools.tool_names[-1] == "CountRows"
        assert tools.run("CountRows", ["singer"]).observation == "singer has 7 rows"
        assert tools.run("CountRows", [], {"name": "concert"}).observation == "concert has 5 rows"  # alias
        bad = tools.run("CountRows", ["nowhere"])
        assert not bad.ok and "no such table" in bad.observation
        assert "Usage: CountRows(table)" in tools.run("CountRows").observation
        terse = ToolBox(connector, index_dir, profile="terse")
        assert terse.run("CountRows", ["singer"]).observation == "singer: 7"
        assert not ToolBox(connector, index_dir, enabled=["ExecuteSQL"]).run("CountRows", ["singer"]).ok
    finally:
        clear_cache()


def test_a_registered_tool_is_in_the_prompt(fifth_tool) -> None:
    text = tool_description()
    assert "5. CountRows(table: str)" in text
    assert "Counts the rows of one table." in text
    assert "5. Check how large a table is with CountRows" in text
    assert "one of: SearchValue, SearchColumn, FindShortestPath, ExecuteSQL, CountRows, Done" in text
    assert "CountRows" not in tool_description(["SearchValue", "ExecuteSQL"])


def test_a_registered_tool_is_in_the_forms_and_its_calls_round_trip(fifth_tool) -> None:
    assert ("CountRows", "CountRows") in AskForm().fields["tools"].choices
    action = compose_action("CountRows", {"table": " singer "})
    assert action == 'CountRows("singer")'
    assert parse_action(action) == Action("CountRows", ("singer",))


@pytest.mark.django_db
def test_a_registered_tool_gets_a_console_form_that_runs_it(fifth_tool, user_client, demo_database) -> None:
    page = user_client.get(reverse("tool_console"), {"database": "chinook", "tool": "CountRows"})
    html = page.content.decode()
    assert '<option value="CountRows" selected>' in html
    assert 'Table to count <input name="table"' in html and 'list="tables"' in html
    response = user_client.post(reverse("tool_console"), {"database": "chinook", "tool": "CountRows",
                                                          "table": "Artist"}, HTTP_HX_REQUEST="true")
    assert 'CountRows(&quot;Artist&quot;)' in response.content.decode()
    assert "Artist has 275 rows" in response.content.decode()


def test_names_are_unique_and_done_is_not_a_tool() -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.get("ExecuteSQL"))
    with pytest.raises(ValueError, match="cannot be a tool name"):
        registry.register(ToolSpec("Done", (), "", "", _count_rows, _observe, ()))
    with pytest.raises(ValueError, match="unknown parameters"):
        ToolSpec("X", (Param("a"),), "", "", _count_rows, _observe, (FormField("b", "B", "b"),))


def test_an_unknown_observation_profile_is_refused(connector: Connector, index_dir: Path) -> None:
    build_indexes(connector, index_dir)
    try:
        result = ToolBox(connector, index_dir, profile="nope").run("ExecuteSQL", ["SELECT 1"])
    finally:
        clear_cache()
    assert not result.ok and "no observation profile 'nope'" in result.observation


@pytest.mark.parametrize(("name", "args", "kwargs"), [
    ("SearchValue", ("Côte d'Ivoire",), {"table": "singer"}),
    ("ExecuteSQL", ('SELECT "Name" FROM t WHERE x = \'it\'\'s\'\n  AND y = 1',), {}),
    ("SearchColumn", (["singer age", "concert year"],), {}),
    ("Fake", (1, 2.5, None, True, ("a",)), {"d": {"k": [1]}}),
    ("Done", (), {}),
])
def test_a_rendered_call_parses_back_to_the_same_call(name: str, args: tuple, kwargs: dict) -> None:
    text = render_call(name, args, kwargs)
    assert parse_action(text) == Action(name, args, kwargs)
    assert Action(name, args, kwargs).render() == text


def test_a_registered_tool_is_listed_by_the_api(fifth_tool, user_client) -> None:
    tools = user_client.get(reverse("api_tools")).json()
    assert [t["name"] for t in tools] == list(registry.tool_names())
    count = next(t for t in tools if t["name"] == "CountRows")
    assert count["heading"] == "CountRows(table: str)" and count["description"] == "Counts the rows of one table."
    assert count["params"] == [{"name": "table", "type": "str", "required": True, "default": None,
                                "aliases": ["name"]}]
    assert count["profiles"] == ["default", "terse"]
    value = next(t for t in tools if t["name"] == "SearchValue")
    assert {p["name"]: p["required"] for p in value["params"]} == {"query": True, "table": False, "column": False}
