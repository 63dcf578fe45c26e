"""Spider dev as benchmark material: gold columns, string literals and joined tables per question."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp

DEFAULT_SPIDER = Path("/work/shared/data/spider_dev")
_DQ_STRING = re.compile(r'"([^"]*)"')


@dataclass(frozen=True)
class Literal:
    table: str
    column: str
    value: str  # without LIKE wildcards
    like: bool  # compared with LIKE: a hit is a cell containing the value


@dataclass(frozen=True)
class GoldQuery:
    db_id: str
    question: str
    query: str
    columns: tuple[tuple[str, str], ...]  # (table, column), lower-case, real tables only
    literals: tuple[Literal, ...]
    tables: tuple[str, ...]  # distinct real tables in FROM/JOIN, lower-case


def load_dev(root: Path = DEFAULT_SPIDER) -> list[dict[str, str]]:
    return json.loads((root / "dev.json").read_text())


def natural_names(root: Path = DEFAULT_SPIDER) -> dict[str, dict[tuple[str, str], str]]:
    """tables.json's natural-language column names ("song name"), the paper's Spider 'semantic names'."""
    out: dict[str, dict[tuple[str, str], str]] = {}
    for db in json.loads((root / "tables.json").read_text()):
        tables = db["table_names_original"]
        names = {}
        for (t_idx, orig), (_t, natural) in zip(db["column_names_original"], db["column_names"], strict=True):
            if t_idx >= 0:
                names[(tables[t_idx], orig)] = natural
        out[db["db_id"]] = names
    return out


def parse_gold(db_id: str, question: str, query: str, schema_cols: dict[str, set[str]]) -> GoldQuery | None:
    """Extract what a gold query touches; ``schema_cols`` maps lower table name -> lower column names."""
    text = _DQ_STRING.sub(lambda m: "'" + m.group(1).replace("'", "''") + "'", query)
    try:
        tree = sqlglot.parse_one(text, read="sqlite")
    except sqlglot.errors.ParseError:
        return None
    aliases: dict[str, str] = {}
    tables: list[str] = []
    for t in tree.find_all(exp.Table):
        name = t.name.lower()
        if name in schema_cols:
            aliases[t.alias_or_name.lower()] = name
            if name not in tables:
                tables.append(name)

    def resolve(col: exp.Column) -> tuple[str, str] | None:
        name = col.name.lower()
        if col.table:
            table = aliases.get(col.table.lower())
            return (table, name) if table and name in schema_cols[table] else None
        for table in tables:
            if name in schema_cols[table]:
                return table, name
        return None

    columns = []
    for col in tree.find_all(exp.Column):
        hit = resolve(col)
        if hit and hit not in columns:
            columns.append(hit)
    literals = []
    for node in tree.find_all(exp.EQ, exp.NEQ, exp.Like, exp.ILike, exp.In):
        col = node.this if isinstance(node.this, exp.Column) else None
        others = node.expressions if isinstance(node, exp.In) else [node.expression]
        if col is None and isinstance(node, (exp.EQ, exp.NEQ)) and isinstance(node.expression, exp.Column):
            col, others = node.expression, [node.this]
        if col is None:
            continue
        hit = resolve(col)
        for other in others:
            if hit and isinstance(other, exp.Literal) and other.is_string:
                like = isinstance(node, (exp.Like, exp.ILike))
                value = other.this.strip("%") if like else other.this
                if value.strip():
                    literals.append(Literal(hit[0], hit[1], value, like))
    return GoldQuery(db_id, question, query, tuple(columns), tuple(dict.fromkeys(literals)), tuple(tables))


# --- perturbations of a literal, seeded so every run asks the same questions ----------------------


def perturb_lower(value: str) -> str:
    return value.lower()


def perturb_typo(value: str, rng: random.Random) -> str | None:
    words = [(m.start(), m.end()) for m in re.finditer(r"[A-Za-z]{4,}", value)]
    if not words:
        return None
    start, end = rng.choice(words)
    word = value[start:end]
    i = rng.randrange(1, len(word) - 1)
    kind = rng.choice(("swap", "delete", "substitute"))
    if kind == "swap":
        typo = word[:i] + word[i + 1] + word[i] + word[i + 2:]
    elif kind == "delete":
        typo = word[:i] + word[i + 1:]
    else:
        letters = "abcdefghijklmnopqrstuvwxyz".replace(word[i].lower(), "")
        typo = word[:i] + rng.choice(letters) + word[i + 1:]
    return None if typo == word else value[:start] + typo + value[end:]


def perturb_partial(value: str) -> str | None:
    """The longest word of a multi-word value, or the first two thirds of a single long word."""
    words = re.findall(r"\w+", value)
    if len(words) > 1:
        longest = max(words, key=len)
        return longest if len(longest) >= 3 else None
    if len(value) >= 6:
        return value[: max(4, (2 * len(value)) // 3)]
    return None
