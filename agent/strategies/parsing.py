"""Read ``Thought: ... Action: Tool(args)`` steps out of model text, with ``ast`` and never ``eval``.

The parser is lenient about what real models produce (backticks, a missing
``Thought:`` label, keyword or positional arguments, triple-quoted SQL, text
after the call) and strict about what reaches a tool: only literal values
(strings, numbers, lists, tuples, dicts, None, booleans) become arguments.
Errors carry a message written for the model, which the loop sends back as
the Observation.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from agent.tools.spec import DONE, render_call

FORMAT_HINT = (
    "Write one action per step, on a line of its own, in the form Action: ToolName(arguments), "
    "for example Action: SearchColumn(\"student name\") or Action: ExecuteSQL(\"SELECT ...\"); "
    "write Action: Done when the last executed SQL query answers the question."
)

_ACTION_LABEL = re.compile(r"^[ \t>*_#-]*\**action\**[ \t]*\**[ \t]*:[ \t]*\**", re.IGNORECASE | re.MULTILINE)
# "Thought: ... Action: X(...)" on one line; case-sensitive so a thought's "next action: ..." is not taken.
_INLINE_ACTION_LABEL = re.compile(r"(?<=\s)Action:[ \t]*")
_THOUGHT_LABEL = re.compile(r"^\s*\**thought\**\s*\**\s*:\s*\**", re.IGNORECASE)
_CALL_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s*\(")
_DONE_WORD = re.compile(r"^done\b(?!\s*\()", re.IGNORECASE)
_FENCE = re.compile(r"^```[A-Za-z]*[ \t]*\n?")
_SINGLE_STRING_CALL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*\(\s*(\"|')(.*)\2\s*\)$", re.DOTALL)


class ActionParseError(ValueError):
    """The action text is not a call we can run; ``str(exc)`` is meant for the model."""


@dataclass(frozen=True)
class Action:
    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def is_done(self) -> bool:
        return self.name == DONE

    def render(self) -> str:
        """The call's one text form (``agent.tools.spec.render_call``), which parses back to this action."""
        return render_call(self.name, self.args, self.kwargs)


@dataclass(frozen=True)
class ParsedStep:
    thought: str
    action_text: str | None  # the call as written (backticks removed), None when no action was found
    action: Action | None
    error: str | None  # for the model, when action is None


def parse_step(text: str) -> ParsedStep:
    """Split one completion into its thought and action; never raises."""
    body = text.strip()
    match = _ACTION_LABEL.search(body) or _INLINE_ACTION_LABEL.search(body)
    if match:
        thought_part = body[: match.start()]
        action_region = body[match.end():]
    else:
        # No "Action:" label: accept a bare call or "Done" on the last line, as some models write it.
        lines = body.splitlines()
        last = _strip_ticks(lines[-1]) if lines else ""
        if last and (_DONE_WORD.match(last) or _CALL_START.match(last)):
            thought_part, action_region = "\n".join(lines[:-1]), lines[-1]
        else:
            return ParsedStep(_clean_thought(body), None, None, f"No action found. {FORMAT_HINT}")
    thought = _clean_thought(thought_part)
    try:
        action, action_text = _parse_region(action_region)
    except ActionParseError as exc:
        region = _strip_ticks(action_region).strip()
        message = str(exc) if FORMAT_HINT in str(exc) else f"{exc} {FORMAT_HINT}"
        return ParsedStep(thought, region or None, None, message)
    return ParsedStep(thought, action_text, action, None)


def parse_action(text: str) -> Action:
    """Parse one action such as ``SearchValue("France", table="Country")`` or ``Done``.

    Text after the call is ignored; raises ``ActionParseError`` with a message for the model.
    """
    match = _ACTION_LABEL.match(text.strip())
    region = text.strip()[match.end():] if match else text
    return _parse_region(region)[0]


def _parse_region(region: str) -> tuple[Action, str]:
    candidate = _strip_ticks(region)
    if not candidate:
        raise ActionParseError(f"The action is empty. {FORMAT_HINT}")
    if _DONE_WORD.match(candidate):
        return Action(DONE), DONE
    call_match = _CALL_START.match(candidate)
    if not call_match:
        first = candidate.splitlines()[0][:80]
        raise ActionParseError(f"Could not read an action from {first!r}. {FORMAT_HINT}")
    call_text, node = _first_call(candidate)
    if node is None:
        repaired = _repair_single_string(candidate)
        if repaired is not None:
            return repaired
        raise ActionParseError(
            "The action is not a well-formed call (unbalanced parentheses or quotes?). "
            "Quote every argument; for SQL that contains quotes use triple quotes, e.g. "
            "ExecuteSQL(\"\"\"SELECT name FROM t WHERE x = 'it''s'\"\"\"). " + FORMAT_HINT
        )
    return _to_action(node), call_text.strip()


def _first_call(text: str) -> tuple[str, ast.Call | None]:
    """The shortest prefix of ``text`` that is a complete call expression (tried at each ``)``)."""
    pos = text.find(")")
    while pos != -1:
        prefix = text[: pos + 1]
        try:
            tree = ast.parse(prefix.strip(), mode="eval")
        except SyntaxError:
            pos = text.find(")", pos + 1)
            continue
        if isinstance(tree.body, ast.Call):
            return prefix, tree.body
        pos = text.find(")", pos + 1)
    return text, None


def _to_action(node: ast.Call) -> Action:
    func = node.func
    if not isinstance(func, ast.Name):
        raise ActionParseError(f"Call a tool by its plain name, e.g. SearchColumn(...). {FORMAT_HINT}")
    name = DONE if func.id.lower() == "done" else func.id
    if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
        raise ActionParseError("Write the arguments out; * and ** are not supported.")
    args = tuple(_literal(a, name) for a in node.args)
    kwargs = {k.arg: _literal(k.value, name) for k in node.keywords if k.arg is not None}
    return Action(name, args, kwargs)


def _literal(node: ast.expr, name: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        snippet = ast.unparse(node)[:60]
        raise ActionParseError(
            f"The argument {snippet} of {name} is not a literal value. Put column names, values and SQL in "
            f"quotes, e.g. {name}(\"Faculty.Fname\")."
        ) from None


def _repair_single_string(text: str) -> tuple[Action, str] | None:
    """Accept ``ExecuteSQL("SELECT "x" FROM t")``: one string whose inner quotes were not escaped.

    Only the whole remaining text as one call with one string argument is
    repaired; anything more ambiguous is reported back to the model instead.
    """
    end = text.rfind(")")
    if end == -1 or text[end + 1:].strip(" \t\n`.;"):
        return None
    match = _SINGLE_STRING_CALL.match(text[: end + 1].strip())
    if not match:
        return None
    name, _quote, inner = match.groups()
    return Action(DONE if name.lower() == "done" else name, (inner,)), match.group(0)


def _strip_ticks(text: str) -> str:
    """Drop an opening code fence or backticks; a closing one is just text after the call.

    Only the opening side is removed because SQL inside the call may itself
    contain backticks (quoted identifiers), so searching for the closing
    backtick could cut the call short.
    """
    text = text.strip()
    fence = _FENCE.match(text)
    if fence:
        text = text[fence.end():]
    return text.lstrip("`").strip()


def _clean_thought(text: str) -> str:
    return _THOUGHT_LABEL.sub("", text.strip(), count=1).strip()
