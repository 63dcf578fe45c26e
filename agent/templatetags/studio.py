from django import template

register = template.Library()


@register.filter
def cell(value: object) -> str:
    """A result cell as text: bytes shown as a size, not decoded garbage."""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    return str(value)
