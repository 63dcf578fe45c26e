"""Text helpers shared by the tools: normalisation, tokenising, quoting cells as data."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")

CELL_CHARS = 100  # a cell shown to the agent is cut to this many characters


def fold(text: str) -> str:
    """Lower-case, strip accents and collapse whitespace: 'Côte  d’Ivoire' -> "cote d'ivoire"."""
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    stripped = stripped.replace("\u2019", "'").replace("\u2018", "'")
    return _SPACE.sub(" ", stripped).strip().lower()


def split_name(name: str) -> str:
    """Identifier to words: 'AlbumId' -> 'Album Id', 'first_name' -> 'first name'."""
    spaced = _CAMEL.sub(" ", name).replace("_", " ").replace("-", " ").replace(".", " ")
    return _SPACE.sub(" ", spaced).strip()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Light English stemming: plurals and the commonest verb endings only.

    Heavier stemmers conflate too much for short column names ('name' and
    'named' should meet, 'status' and 'stat' should not).
    """
    if len(word) <= 3 or word.isdigit():
        return word
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("xes", "x"), ("ches", "ch"), ("shes", "sh")):
        if word.endswith(suffix):
            return word[: -len(suffix)] + repl
    if word.endswith("ing") and len(word) > 5:
        return word[:-3]
    if word.endswith("ed") and len(word) > 4:
        return word[:-2] if not word.endswith("eed") else word[:-1]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokens(text: str) -> list[str]:
    """Folded word tokens (identifiers split first)."""
    return _WORD.findall(fold(split_name(text)))


def stemmed_tokens(text: str) -> list[str]:
    return [stem(t) for t in tokens(text)]


def cut(text: str, limit: int = CELL_CHARS) -> str:
    text = " ".join(text.split()) if ("\n" in text or "\t" in text or "\r" in text) else text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def sql_literal(value: object, limit: int = CELL_CHARS) -> str:
    """A cell as an SQL literal, so database text is always shown as data: "O'Hara" -> 'O''Hara'."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(bytes(value))} bytes>"
    text = cut(str(value), limit)
    return "'" + text.replace("'", "''") + "'"


_SIMPLE_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def ident(name: str, case_sensitive: bool = False) -> str:
    """An identifier as the agent should write it: bare when simple, else double-quoted.

    ``case_sensitive`` (PostgreSQL) also quotes names with capitals, which the engine would
    otherwise fold to lower case. A display name ``schema.table`` is quoted part by part.
    """
    def bare(part: str) -> bool:
        return bool(_SIMPLE_IDENT.fullmatch(part)) and not (case_sensitive and part != part.lower())

    if bare(name):
        return name
    parts = name.split(".")
    if case_sensitive and len(parts) == 2 and all(_SIMPLE_IDENT.fullmatch(p) for p in parts):
        return ".".join(p if bare(p) else '"' + p + '"' for p in parts)
    return '"' + name.replace('"', '""') + '"'


def qualified(table: str, column: str, case_sensitive: bool = False) -> str:
    return f"{ident(table, case_sensitive)}.{ident(column, case_sensitive)}"


def loose_name(text: str) -> str:
    """A user-typed name for lookup: quotes/brackets dropped, case-folded, spaces around dots removed."""
    cleaned = re.sub(r'["`\[\]]', "", text)
    cleaned = re.sub(r"\s*\.\s*", ".", cleaned)
    return " ".join(cleaned.split()).lower()
