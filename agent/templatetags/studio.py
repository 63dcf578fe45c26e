import math

from django import template

from agent.sql import QueryResult
from agent.tools import registry

register = template.Library()


@register.filter
def cell(value: object) -> str:
    """A result cell as text: bytes shown as a size, not decoded garbage."""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    return str(value)


@register.filter
def as_result(data):
    """A stored result (JSON) as a QueryResult for partials/result_table.html."""
    return QueryResult.from_json(data) if data else None


@register.filter
def badge_class(obj) -> str:
    """Badge colour for a session or a run: ok when it succeeded, pending while active, error otherwise."""
    if obj.status in ("answered", "done"):
        return "ok"
    if obj.status in ("queued", "running", "pending", "evaluating"):
        return "pending"
    return "error"


@register.inclusion_tag("agent/partials/tool_fields.html")
def tool_fields(tool: str, form=None, suggest_prefix: str = "", required: bool = True) -> dict:
    """The by-hand call form of one registered tool, from its spec's fields (tool and exemplar consoles).

    ``suggest_prefix`` prefixes the ids of the page's completion lists (tables, columns, qualified).
    """
    spec = registry.find(tool)
    data = form or {}
    groups: list[list[dict]] = []  # consecutive one-line inputs share a grid row
    for f in spec.fields if spec else ():
        row = {"field": f, "value": data.get(f.name, ""), "list": f"{suggest_prefix}{f.suggest}" if f.suggest else ""}
        if f.kind == "line" and groups and groups[-1][-1]["field"].kind == "line":
            groups[-1].append(row)
        else:
            groups.append([row])
    return {"groups": groups, "required": required}


def format_figure(value: object, kind: str = "number") -> str:
    """One way to write a figure: ``percent[:d]`` (a value already in percent, 2 decimals unless ``d``: "82.20%"),
    ``count`` (thousands separated), ``cost`` (US dollars, 4 decimals under a dollar, two significant digits
    below $0.0001), ``duration`` (seconds in, ms / s / min / h out), ``ms`` (milliseconds in, the same way out,
    one decimal under 1 ms), ``fixed[:d]`` (d decimals, default 2), ``number`` (a count when whole, else 2
    decimals). Missing or non-numeric values read "–"."""
    kind, _, digits = (kind or "number").partition(":")
    if value is None or value == "" or isinstance(value, bool):
        return "–"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "–"
    if number != number or number in (float("inf"), float("-inf")):  # NaN, infinities
        return "–"
    places = int(digits) if digits.isdigit() else None
    if kind == "percent":
        return f"{number:.{2 if places is None else places}f}%"
    if kind == "count":
        return f"{round(number):,}"
    if kind == "cost":
        if number and abs(number) < 0.0001:  # a cost per LLM call: "$0.0000" would hide it
            return f"${number:.{-math.floor(math.log10(abs(number))) + 1}f}"
        return f"${number:,.{4 if abs(number) < 1 and number else 2}f}"
    if kind == "duration":
        return _duration(number)
    if kind == "ms":
        return f"{number:.1f} ms" if abs(number) < 1 else _duration(number / 1000)
    if kind == "fixed":
        return f"{number:,.{2 if places is None else places}f}"
    if number.is_integer():
        return f"{int(number):,}"
    return f"{number:,.{2 if places is None else places}f}"


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


@register.filter
def figure(value: object, kind: str = "number") -> str:
    """``{{ run.totals.ex|figure:"percent" }}``: see ``format_figure``. Every page writes its figures with it."""
    return format_figure(value, kind)


@register.filter
def can_view_audit(user) -> bool:
    """The nav shows the audit log to those the policy lets read it."""
    from agent import policies

    return policies.can_view_audit(user)


@register.inclusion_tag("agent/partials/strategy_options.html")
def strategy_options() -> dict:
    """Every strategy's options as their configs declare them (type, default, bounds or choices, help): what a
    session, run or experiment may set, shown next to the forms that set them."""
    from agent.selectors import strategy_list

    return {"strategies": strategy_list()}


@register.filter
def pool_refusal(strategy: str) -> str | None:
    """Why a session of ``strategy`` cannot be started for a single question (a follow-up): it needs a pool."""
    from agent.services.sessions import pool_refusal as refusal

    return refusal(strategy)


@register.filter
def can_give_feedback(user, session) -> bool:
    """The session page offers Right / Wrong to those the policy lets judge the answer."""
    from agent import policies

    return policies.can_give_feedback(user, session)


@register.filter
def can_ask(user) -> bool:
    from agent import policies

    return policies.can_ask(user)


@register.filter
def can_cancel_session(user, session) -> bool:
    from agent import policies

    return policies.can_cancel_session(user, session)
