from __future__ import annotations

import pytest

from agent.strategies.parsing import Action, ActionParseError, parse_action, parse_step

# (completion text, expected thought, expected Action)
GOOD_STEPS = [
    pytest.param('Thought: find the value\nAction: SearchValue("Soccer activity")', "find the value",
                 Action("SearchValue", ("Soccer activity",)), id="plain"),
    pytest.param('Thought: x\nAction: `SearchColumn(["male professor", "professor name"])`', "x",
                 Action("SearchColumn", (["male professor", "professor name"],)), id="backticks-list"),
    pytest.param('Thought: join\nAction: FindShortestPath(start=["Student.Fname", "Faculty.Fname"], '
                 'end="Activity.activity_name")', "join",
                 Action("FindShortestPath", (), {"start": ["Student.Fname", "Faculty.Fname"],
                                                 "end": "Activity.activity_name"}), id="keywords"),
    pytest.param('Thought: t\nAction: SearchValue("Illinois", "state", column="name")', "t",
                 Action("SearchValue", ("Illinois", "state"), {"column": "name"}), id="positional-and-keyword"),
    pytest.param('Thought: t\nAction: SearchValue(query=["Midwest", "Illinois"], column=[None, "name"])', "t",
                 Action("SearchValue", (), {"query": ["Midwest", "Illinois"], "column": [None, "name"]}),
                 id="list-with-none"),
    pytest.param('Thought: t\nAction: ExecuteSQL("SELECT COUNT(*) FROM t WHERE a = \'x)\'")\nThis counts rows.',
                 "t", Action("ExecuteSQL", ("SELECT COUNT(*) FROM t WHERE a = 'x)'",)),
                 id="paren-in-string-and-trailing-text"),
    pytest.param("Thought: done\nAction: Done", "done", Action("Done"), id="done"),
    pytest.param("Thought: done\nAction: Done.", "done", Action("Done"), id="done-period"),
    pytest.param("Thought: done\nAction: Done()", "done", Action("Done"), id="done-call"),
    pytest.param("Thought: done\nAction: `Done`", "done", Action("Done"), id="done-backticks"),
    pytest.param("The query is complete.\nAction: done", "The query is complete.", Action("Done"),
                 id="done-lowercase-no-thought-label"),
    pytest.param("I will search.\nAction: SearchValue('O\\'Brien')", "I will search.",
                 Action("SearchValue", ("O'Brien",)), id="escaped-quote"),
    pytest.param('Thought: t\nAction: SearchValue("say \\"hi\\"")', "t", Action("SearchValue", ('say "hi"',)),
                 id="escaped-double-quote"),
    pytest.param('Thought: multi\nAction: ExecuteSQL("""\nSELECT name\nFROM t\nWHERE x = "a"\n""")', "multi",
                 Action("ExecuteSQL", ('\nSELECT name\nFROM t\nWHERE x = "a"\n',)), id="triple-quoted-sql"),
    pytest.param("Thought: multi\nAction: ExecuteSQL('''SELECT 'a' FROM t''')", "multi",
                 Action("ExecuteSQL", ("SELECT 'a' FROM t",)), id="triple-single-quotes"),
    pytest.param('Thought: fence\nAction:\n```python\nExecuteSQL("SELECT 1")\n```', "fence",
                 Action("ExecuteSQL", ("SELECT 1",)), id="code-fence"),
    pytest.param('Thought: x Action: SearchValue("y")', "x", Action("SearchValue", ("y",)), id="same-line"),
    pytest.param('**Thought:** x\n**Action:** SearchValue("y", table="T")', "x",
                 Action("SearchValue", ("y",), {"table": "T"}), id="markdown-bold-labels"),
    pytest.param('SearchValue("y")', "", Action("SearchValue", ("y",)), id="bare-call"),
    pytest.param('Thought: t\nAction: ExecuteSQL("SELECT `a` FROM t")`', "t",
                 Action("ExecuteSQL", ("SELECT `a` FROM t",)), id="backtick-identifiers"),
    pytest.param('Thought: t\nAction: ExecuteSQL("SELECT "name" FROM t")', "t",
                 Action("ExecuteSQL", ('SELECT "name" FROM t',)), id="unescaped-inner-quotes-repaired"),
    pytest.param('Thought: t\nAction: ExecuteSQL(sql="SELECT 1")', "t", Action("ExecuteSQL", (), {"sql": "SELECT 1"}),
                 id="sql-keyword"),
    pytest.param('Thought: numbers\nAction: SearchValue("x", limit=5, exact=True)', "numbers",
                 Action("SearchValue", ("x",), {"limit": 5, "exact": True}), id="number-and-bool"),
    pytest.param('Thought: a\nsecond line of thought\nAction: SearchValue("y")', "a\nsecond line of thought",
                 Action("SearchValue", ("y",)), id="multiline-thought"),
    pytest.param('  \nThought: pad\nAction:   SearchColumn( "a" , )  \n', "pad", Action("SearchColumn", ("a",)),
                 id="whitespace-and-trailing-comma"),
    pytest.param('Thought: two\nAction: SearchValue("a")\nAction: SearchValue("b")', "two",
                 Action("SearchValue", ("a",)), id="first-of-two-actions"),
]


@pytest.mark.parametrize(("text", "thought", "action"), GOOD_STEPS)
def test_parse_step_accepts_what_models_write(text: str, thought: str, action: Action) -> None:
    step = parse_step(text)
    assert step.error is None
    assert step.thought == thought
    assert step.action == action


# (completion text, a fragment the error message must contain)
BAD_STEPS = [
    pytest.param("Thought: I am thinking only", "No action found", id="no-action"),
    pytest.param("", "No action found", id="empty"),
    pytest.param("Thought: t\nAction:", "empty", id="empty-action"),
    pytest.param('Thought: t\nAction: ExecuteSQL("SELECT 1"', "not a well-formed call", id="unclosed-paren"),
    pytest.param("Thought: t\nAction: SearchColumn(Faculty.Fname)", "not a literal value", id="unquoted-name"),
    pytest.param('Thought: t\nAction: SearchValue(__import__("os"))', "not a literal value", id="code-injection"),
    pytest.param('Thought: t\nAction: os.system("ls")', "Could not read an action", id="attribute-call"),
    pytest.param('Thought: t\nAction: search the value "x"', "Could not read an action", id="prose"),
    pytest.param("Thought: t\nAction: SearchValue(*['a'])", "not supported", id="star-args"),
    pytest.param('Thought: t\nAction: SearchValue("a" + "b")', "not a literal value", id="expression"),
]


@pytest.mark.parametrize(("text", "fragment"), BAD_STEPS)
def test_parse_step_turns_malformed_actions_into_a_message_for_the_model(text: str, fragment: str) -> None:
    step = parse_step(text)
    assert step.action is None
    assert step.error is not None and fragment in step.error
    assert "Action: ToolName(arguments)" in step.error or "Action:" in step.error


def test_parse_step_keeps_the_written_action_text_when_it_fails() -> None:
    step = parse_step('Thought: t\nAction: `ExecuteSQL("SELECT 1"`')
    assert step.thought == "t"
    assert step.action_text == 'ExecuteSQL("SELECT 1"`'


@pytest.mark.parametrize(("text", "expected"), [
    ('SearchValue("France")', Action("SearchValue", ("France",))),
    ('Action: SearchValue("France", table="Country")', Action("SearchValue", ("France",), {"table": "Country"})),
    ("`ExecuteSQL('SELECT 1')`", Action("ExecuteSQL", ("SELECT 1",))),
    ("Done", Action("Done")),
    ('FindShortestPath("a.x", "b.y") trailing words', Action("FindShortestPath", ("a.x", "b.y"))),
])
def test_parse_action_for_the_console(text: str, expected: Action) -> None:
    assert parse_action(text) == expected


@pytest.mark.parametrize("text", ["", "SearchValue(", "SearchValue(France)", "lambda: 1", "import os"])
def test_parse_action_raises_action_parse_error(text: str) -> None:
    with pytest.raises(ActionParseError):
        parse_action(text)


def test_action_render_is_parseable_again() -> None:
    action = Action("SearchValue", ("O'Brien",), {"table": "people", "column": ["a", None]})
    assert parse_action(action.render()) == action
    assert Action("Done").render() == "Done"
