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
