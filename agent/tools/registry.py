"""The registry of the agent's tools: name -> ToolSpec, in the order the prompt lists them.

Adding a tool is a module with a ``SPEC`` (see ``agent.tools.spec``) and one
line in ``_BUILTIN`` below; dispatch, the consoles, the prompt, the parser's
rendering and the API pick it up from here. ``register`` adds one at run
time (plugins, tests).

No Django here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from . import execute_sql, find_shortest_path, search_column, search_value
from .spec import DONE, ToolSpec

_BUILTIN: tuple[ToolSpec, ...] = (
    search_value.SPEC,
    search_column.SPEC,
    find_shortest_path.SPEC,
    execute_sql.SPEC,
)

_lock = threading.Lock()
_specs: dict[str, ToolSpec] = {s.name: s for s in _BUILTIN}


def register(spec: ToolSpec) -> ToolSpec:
    """Add a tool (after the others). A name already taken, or ``Done``, is refused."""
    if spec.name == DONE or not spec.name.isidentifier():
        raise ValueError(f"{spec.name!r} cannot be a tool name")
    with _lock:
        if spec.name in _specs:
            raise ValueError(f"A tool named {spec.name!r} is already registered")
        _specs[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    with _lock:
        _specs.pop(name, None)


@contextmanager
def registered(spec: ToolSpec) -> Iterator[ToolSpec]:
    """``with registered(SPEC): ...``: the tool exists inside the block only."""
    register(spec)
    try:
        yield spec
    finally:
        unregister(spec.name)


def tool_names() -> tuple[str, ...]:
    """Every registered tool, in the canonical (prompt) order."""
    return tuple(_specs)


def get(name: str) -> ToolSpec:
    """The spec of ``name``; KeyError when there is none."""
    return _specs[name]


def find(name: object) -> ToolSpec | None:
    return _specs.get(name) if isinstance(name, str) else None


def specs(names: Sequence[str] | None = None) -> tuple[ToolSpec, ...]:
    """The specs of ``names`` (all when None), in the canonical order; an unknown name raises ValueError."""
    if names is None:
        return tuple(_specs.values())
    unknown = [n for n in names if n not in _specs]
    if unknown:
        raise ValueError(f"Unknown tools {unknown}; expected some of {list(_specs)}")
    wanted = set(names)
    return tuple(s for s in _specs.values() if s.name in wanted)


def canonical(names: Sequence[str] | None = None) -> tuple[str, ...]:
    """The names of ``specs(names)``: validated and in the canonical order."""
    return tuple(s.name for s in specs(names))
