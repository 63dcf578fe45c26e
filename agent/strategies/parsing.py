"""Read ``Thought: ... Action: Tool(args)`` steps out of model text, with ``ast`` and never ``eval``.

The parser is lenient about what real models produce (backticks, a missing
``Thought:`` label, keyword or positional arguments, triple-quoted SQL, text
after the call) and strict about what reaches a tool: only literal values
(strings, numbers, lists, tuples, dicts, None, booleans) become arguments.
Errors carry a message written for the model, which the loop sends back as
the Observation.

Hostile text is bounded: ``parse_step`` reads at most ``MAX_PARSE_CHARS``
(100,000) characters of a completion and ``MAX_ACTION_CHARS`` (20,000) of its
action (a longer one is parsed from its start, and a call cut by a limit is
reported to the model with the limit), finds the end of the call with one
linear scan (strings, brackets; at most ``MAX_NESTING`` levels) and hands only
that call to ``ast.parse``, once. Every step is linear in the input: a 1 MB
completion parses in a few milliseconds, and no input makes it raise. What is
*stored* of a completion is capped separately (``agent.text.MAX_COMPLETION_CHARS``).
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

# No two neighbouring repeats match the same characters: a long run of spaces or stars costs linear time.
_ACTION_LABEL = re.compile(r"^[ \t>*_#-]*+action[ \t*]*+:[ \t]*+\**+", re.IGNORECASE | re.MULTILINE)
# "Thought: ... Action: X(...)" on one line; case-sensitive so a thought's "next action: ..." is not taken.
_INLINE_ACTION_LABEL = re.compile(r"(?<=\s)Action:[ \t]*")
_THOUGHT_LABEL = re.compile(r"^\s*\**thought[\s*]*:\s*\**", re.IGNORECASE)
_CALL_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s*\(")
_DONE_WORD = re.compile(r"^done\b(?!\s*\()", re.IGNORECASE)
_FENCE = re.compile(r"^```[A-Za-z]*[ \t]*\n?")
MAX_PARSE_CHARS = 100_000  # of a completion: the thought and the action label are looked for here
MAX_ACTION_CHARS = 20_000  # of the text after "Action:": the call must end within it
MAX_NESTING = 50
# What the call scanner stops at: an opening quote (triple first), a comment or a bracket.
_SCAN_TOKEN = re.compile(r'"""' + r"|'''|[\"'#()\[\]{}]")
# The rest of a string after its opening quote, as "unrolled loops" with possessive repeats: a run of
# plain characters is one step and nothing is retried, so a string that never closes costs linear time.
_STRING_REST = {
    '"': re.compile(r'[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"', re.DOTALL),
    "'": re.compile(r"[^'\\\n]*+(?:\\.[^'\\\n]*+)*+'", re.DOTALL),
    '"""': re.compile(r'[^"\\]*+(?:(?:\\.|"(?!""))[^"\\]*+)*+"""', re.DOTALL),
    "'''": re.compile(r"[^'\\]*+(?:(?:\\.|'(?!''))[^'\\]*+)*+" + "'''", re.DOTALL),
}
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
    try:
        return _parse_step(text)
    except Exception as exc:  # noqa: BLE001 - the documented contract: malformed text is an observation
        return ParsedStep("", None, None, f"Could not read the step ({type(exc).__name__}). {FORMAT_HINT}")


def _parse_step(text: str) -> ParsedStep:
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    cut = len(text) > MAX_PARSE_CHARS
    body = text[:MAX_PARSE_CHARS].strip()
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
            too_long = f"The step is longer than {MAX_PARSE_CHARS:,} characters; only its start was read. " if cut else ""
            return ParsedStep(_clean_thought(body), None, None, f"{too_long}No action found. {FORMAT_HINT}")
    thought = _clean_thought(thought_part)
    try:
        action, action_text = _parse_region(action_region)
    except ActionParseError as exc:
        region = _strip_ticks(action_region).strip()
        message = str(exc) if FORMAT_HINT in str(exc) else f"{exc} {FORMAT_HINT}"
        if cut:
            message = (f"The step is longer than {MAX_PARSE_CHARS:,} characters; only its start was read. "
                       + message)
        return ParsedStep(thought, region[:2000] or None, None, message)
    return ParsedStep(thought, action_text, action, None)


def parse_action(text: str) -> Action:
    """Parse one action such as ``SearchValue("France", table="Country")`` or ``Done``.

    Text after the call is ignored; raises ``ActionParseError`` with a message for the model.
    """
    text = text[:MAX_PARSE_CHARS]
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
    cut = len(candidate) > MAX_ACTION_CHARS
    candidate = candidate[:MAX_ACTION_CHARS]
    call_text, node = _first_call(candidate)
    if node is None:
        repaired = None if cut else _repair_single_string(candidate)
        if repaired is not None:
            return repaired
        if cut:
            raise ActionParseError(f"The action is longer than {MAX_ACTION_CHARS:,} characters and its call "
                                   f"does not end before that limit. {FORMAT_HINT}")
        raise ActionParseError(
            "The action is not a well-formed call (unbalanced parentheses or quotes?). "
            "Quote every argument; for SQL that contains quotes use triple quotes, e.g. "
            "ExecuteSQL(\"\"\"SELECT name FROM t WHERE x = 'it''s'\"\"\"). " + FORMAT_HINT
        )
    return _to_action(node), call_text.strip()


def _first_call(text: str) -> tuple[str, ast.Call | None]:
    """The call at the start of ``text`` (up to its balancing ``)``), parsed; None when it is not one."""
    end = _call_end(text)
    if end is None:
        return text, None
    prefix = text[:end]
    try:
        tree = ast.parse(prefix.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return text, None
    if isinstance(tree.body, ast.Call):
        return prefix, tree.body
    return text, None


def _call_end(text: str) -> int | None:
    """Index just past the ``)`` that closes the first ``(``, skipping strings and comments; one pass.

    Strings follow Python's rules (``'``, ``"``, triple quotes, backslash escapes; a one-line
    string may not span lines), so a ``)`` inside SQL text never ends the call. Raises
    ActionParseError past ``MAX_NESTING`` levels of brackets.
    """
    depth = 0
    pos = text.find("(")
    if pos == -1:
        return None
    while True:
        token = _SCAN_TOKEN.search(text, pos)
        if token is None:
            return None
        kind = token.group(0)
        pos = token.end()
        if kind in _STRING_REST:
            rest = _STRING_REST[kind].match(text, pos)
            if rest is None:
                return None
            pos = rest.end()
        elif kind == "#":
            newline = text.find("\n", pos)
            if newline == -1:
                return None
            pos = newline + 1
        elif kind in "([{":
            depth += 1
            if depth > MAX_NESTING:
                raise ActionParseError(f"The action nests brackets more than {MAX_NESTING} deep; "
                                       "write its arguments as plain strings or lists.")
        else:
            depth -= 1
            if depth <= 0:
                return pos


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
        try:
            snippet = ast.unparse(node)[:60]
        except (ValueError, RecursionError, MemoryError):
            snippet = "(unreadable)"
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
