"""The token diff of a gold and a predicted query, as the run item and review pages show it.

SQL keywords and (in SQLite, Spider's engine) table and column names are case-insensitive, so tokens that differ
only in case (``CARS_DATA`` and ``cars_data``) count as the same; the gold query's spelling is shown for them.
"""

from __future__ import annotations

import difflib


class _Token(str):
    """A token equal to any other of the same letters in another case (difflib compares by == and hash)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.casefold() == other.casefold()

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.casefold())


def sql_token_diff(gold: str, predicted: str, *, context: int = 100) -> list[str]:
    """``difflib.unified_diff`` lines (``--- gold``, ``+++ predicted``, ``@@``, then `` ``/``-``/``+`` tokens)
    over whitespace-separated tokens, ignoring case; empty when the queries differ in case or spacing only."""
    return list(difflib.unified_diff([_Token(t) for t in gold.split()], [_Token(t) for t in (predicted or "").split()],
                                     "gold", "predicted", lineterm="", n=context))
