"""DAIL-SQL's prompt (Gao et al. 2023), the base prompt DART-SQL builds on.

- Question representation: DAIL's code representation (CR_P): the schema as
  CREATE TABLE statements, then ``/* Answer the following: <question> */``
  and ``SELECT`` for the model to continue.
- Example organisation: question-SQL pairs under
  ``/* Some SQL examples are provided based on similar problems: */``.
- Example selection (DAIL selection): the question's domain words are masked
  (schema names as ``<mask>``, values as ``<unk>``) and pool questions are
  ranked by the similarity of their masked text to the masked question; the
  ranking prefers examples whose SQL skeleton is similar (at least
  ``threshold``) to the skeleton of a preliminary query for the question.

DAIL ranks by the Euclidean distance of sentence-transformer embeddings of the
masked questions; no such model is available offline here, so the masked
questions are compared by TF-IDF cosine over words and word pairs. Pool
questions are masked with the identifiers and literals of their own SQL (their
database's schema is not at hand), the question with its database's schema.
Pure Python; no Django.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from agent.sql import SchemaInfo

from .pool import PoolExample

MASK = "<mask>"
UNK = "<unk>"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|'[^']*'|\"[^\"]*\"")
_SQL_TOKEN = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|`[^`]*`|\[[^\]]*\]|\d+(?:\.\d+)?|[A-Za-z_][A-Za-z0-9_.]*|"
                        r"<=|>=|!=|<>|[(),*=<>+\-/%]")
SQL_KEYWORDS = frozenset("""
select from where group by order having limit offset join inner outer left right full cross natural on using
and or not in like between is null exists distinct as asc desc union intersect except all any count sum avg
min max case when then else end cast with over partition
""".split())


def _name_words(name: str) -> set[str]:
    parts = re.split(r"[_\s]+|(?<=[a-z])(?=[A-Z])", name)
    words = {p.lower() for p in parts if p}
    words.add(name.lower())
    return words


def schema_words(schema: SchemaInfo) -> frozenset[str]:
    """Words of the schema's table and column names (``singer_id`` gives ``singer``, ``id``, ``singer_id``)."""
    words: set[str] = set()
    for table in schema.tables:
        words |= _name_words(table.name)
        for column in table.columns:
            words |= _name_words(column.name)
    return frozenset(w for w in words if len(w) > 1)


def sql_words(sql: str) -> tuple[frozenset[str], frozenset[str]]:
    """(identifier words, value words) of a query: what masks a pool question written for it."""
    names: set[str] = set()
    values: set[str] = set()
    for token in _SQL_TOKEN.findall(sql):
        if token[0] in "'\"":  # Spider's gold queries quote string values with either quote
            values |= {w.lower() for w in re.findall(r"\w+", token)}
        elif re.fullmatch(r"\d+(?:\.\d+)?", token):
            values.add(token)
        elif re.match(r"[A-Za-z_`\[]", token) and token.lower() not in SQL_KEYWORDS:
            for part in token.strip("`[]").split("."):
                names |= _name_words(part)
    names = {w for w in names if len(w) > 1 and w not in {"t1", "t2", "t3", "t4", "t5", "t6"}}
    return frozenset(names), frozenset(values)


def mask_question(question: str, names: frozenset[str], values: frozenset[str] = frozenset()) -> str:
    """The question with schema words as ``<mask>`` and values (numbers, quoted text, known values) as ``<unk>``."""
    out: list[str] = []
    for token in _WORD.findall(question):
        low = token.lower()
        if token[0] in "'\"" or re.fullmatch(r"\d+(?:\.\d+)?", token) or low in values:
            out.append(UNK)
        elif low in names or low.rstrip("s") in names:
            out.append(MASK)
        else:
            out.append(low)
    return " ".join(out)


def sql_skeleton(sql: str) -> tuple[str, ...]:
    """The query's skeleton: keywords and operators kept, identifiers as ``_``, values as ``value``."""
    out: list[str] = []
    for token in _SQL_TOKEN.findall(sql):
        low = token.lower()
        if token[0] in "'\"" or re.fullmatch(r"\d+(?:\.\d+)?", token):
            out.append("value")
        elif low in SQL_KEYWORDS or not re.match(r"[A-Za-z_`\[]", token):
            out.append(low)
        elif not out or out[-1] != "_":
            out.append("_")
    return tuple(out)


def skeleton_similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """Jaccard similarity of the two skeletons' token sets."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 0.0


def _features(text: str) -> Counter[str]:
    words = text.split()
    return Counter(words + [f"{x} {y}" for x, y in zip(words, words[1:], strict=False)])


@dataclass(frozen=True)
class Selected:
    example: PoolExample
    question_similarity: float
    skeleton_similarity: float | None
    masked: str


def select_examples(question: str, schema: SchemaInfo, pool: Sequence[PoolExample], *, k: int,
                    preliminary_sql: str | None = None, threshold: float = 0.85) -> tuple[str, list[Selected]]:
    """DAIL selection: (the masked question, the ``k`` chosen examples best first).

    Candidates are sorted by masked-question similarity; those whose skeleton similarity to the
    preliminary query reaches ``threshold`` come first, the others after them (all of them in
    question-similarity order). Without a preliminary query the order is question similarity alone.
    Ties keep pool order.
    """
    masked = mask_question(question, schema_words(schema))
    if k <= 0 or not pool:
        return masked, []
    docs = []
    for example in pool:
        names, values = sql_words(example.sql)
        docs.append(mask_question(example.question, names, values))
    feats = [_features(d) for d in docs]
    target = _features(masked)
    df: Counter[str] = Counter()
    for f in feats:
        df.update(f.keys())
    n = len(feats)

    def vector(f: Counter[str]) -> dict[str, float]:
        return {t: c * (math.log((1 + n) / (1 + df[t])) + 1.0) for t, c in f.items()}

    tv = vector(target)
    tnorm = math.sqrt(sum(v * v for v in tv.values())) or 1.0
    pre_skeleton = sql_skeleton(preliminary_sql) if preliminary_sql else None
    scored: list[tuple[int, float, int, Selected]] = []
    for i, (example, f, doc) in enumerate(zip(pool, feats, docs, strict=True)):
        ev = vector(f)
        enorm = math.sqrt(sum(v * v for v in ev.values())) or 1.0
        sim = sum(tv[t] * ev[t] for t in tv.keys() & ev.keys()) / (tnorm * enorm)
        sk = skeleton_similarity(pre_skeleton, sql_skeleton(example.sql)) if pre_skeleton is not None else None
        tier = 0 if sk is None or sk >= threshold else 1
        scored.append((tier, -sim, i, Selected(example, round(sim, 4), None if sk is None else round(sk, 4), doc)))
    scored.sort(key=lambda x: (x[0], x[1], x[2]))
    return masked, [s for *_rest, s in scored[:k]]
