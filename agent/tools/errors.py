"""Errors the tools turn into an observation for the agent (never raised out of ToolBox.run)."""

from __future__ import annotations

from collections.abc import Iterable

from rapidfuzz import fuzz, process


class ToolError(Exception):
    """A problem with a tool call the agent can fix; the message is the observation."""


def closest(name: str, choices: Iterable[str], limit: int = 3) -> list[str]:
    """The names most like ``name``, best first (for 'did you mean' hints)."""
    options = sorted(set(choices))
    hits = process.extract(name, options, scorer=fuzz.WRatio, limit=limit, score_cutoff=50)
    return [h[0] for h in hits]


def str_list(value: object, what: str) -> list[str]:
    """Accept a string or a list/tuple of strings (the paper's Union[str, List[str]])."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ToolError(f"{what} must be a string or a list of strings, not {type(value).__name__}.")
