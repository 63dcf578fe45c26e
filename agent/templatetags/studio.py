from django import template

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
    from agent.sql import QueryResult

    return QueryResult.from_json(data) if data else None


@register.filter
def badge_class(obj) -> str:
    """Badge colour for a session or a run: ok when it succeeded, pending while active, error otherwise."""
    if obj.status in ("answered", "done"):
        return "ok"
    if obj.status in ("queued", "running", "pending", "evaluating"):
        return "pending"
    return "error"
