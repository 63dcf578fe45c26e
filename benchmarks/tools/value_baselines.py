"""Ways of doing SearchValue compared in benchmarks/results/tools.md.

- ``fts5``: the shipped index (agent/tools/value_index.py), FTS5 + symmetric-deletion typo table.
- ``fts5-notypo``: the same without the typo table (what the typo table adds).
- ``bm25s``: bm25s in memory over the same folded tokens.
- ``rank-bm25``: rank_bm25.BM25Okapi in memory over the same tokens.
- ``like``: no index; ``col LIKE '%value%'`` over every text column of the target.

Every searcher returns (table, column, value) triples, best first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from agent.sql import SchemaInfo
from agent.tools.text import fold
from agent.tools.value_index import ValueIndex, fts_tokens, text_columns

Hit = tuple[str, str, str]


class FTS5Searcher:
    def __init__(self, path: Path, typos: bool = True) -> None:
        self.name = "fts5" if typos else "fts5-notypo"
        self.index = ValueIndex(path)
        if not typos:
            self.index._close_terms = lambda conn, tok, limit=5: []  # type: ignore[method-assign]

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        return [(c.table, c.column, c.value) for c in self.index.search(query, limit=limit)]


class _CellList:
    def __init__(self, cells: Sequence[tuple[str, str, str, int]]) -> None:
        self.cells = [(t, c, v) for t, c, v, _n in cells]
        self.tokens = [fts_tokens(v[:1000]) or ["\x00"] for _t, _c, v in self.cells]

    def _top(self, scores: np.ndarray, query: str, limit: int) -> list[Hit]:
        qnorm = fold(query)
        order = np.argsort(-scores, kind="stable")[: limit * 5]
        hits = [i for i in order if scores[i] > 0]
        # Equal scores are common for short cells: put an exact match first, as the tool does.
        hits.sort(key=lambda i: (fold(self.cells[i][2]) != qnorm, -float(scores[i])))
        return [self.cells[i] for i in hits[:limit]]


class BM25sSearcher(_CellList):
    name = "bm25s"

    def __init__(self, cells: Sequence[tuple[str, str, str, int]]) -> None:
        import bm25s

        super().__init__(cells)
        self.retriever = bm25s.BM25()
        self.retriever.index(self.tokens, show_progress=False)

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        toks = fts_tokens(query)
        if not toks:
            return []
        k = min(limit * 5, len(self.cells))
        docs, scores = self.retriever.retrieve([toks], k=k, show_progress=False, n_threads=1)
        full = np.zeros(len(self.cells), dtype=np.float32)
        full[docs[0]] = scores[0]
        return self._top(full, query, limit)


class RankBM25Searcher(_CellList):
    name = "rank-bm25"

    def __init__(self, cells: Sequence[tuple[str, str, str, int]]) -> None:
        from rank_bm25 import BM25Okapi

        super().__init__(cells)
        self.bm25 = BM25Okapi(self.tokens)

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        toks = fts_tokens(query)
        if not toks:
            return []
        return self._top(np.asarray(self.bm25.get_scores(toks)), query, limit)


class LikeScanSearcher:
    name = "like"

    def __init__(self, db_path: Path, schema: SchemaInfo) -> None:
        self.conn = sqlite3.connect(Path(db_path).resolve().as_uri() + "?mode=ro", uri=True)
        self.conn.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
        self.columns = text_columns(schema)

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        exact: list[Hit] = []
        other: list[Hit] = []
        for table, column in self.columns:
            qt, qc = '"' + table.replace('"', '""') + '"', '"' + column.replace('"', '""') + '"'
            rows = self.conn.execute(
                f"SELECT DISTINCT {qc} FROM {qt} WHERE {qc} LIKE ? ESCAPE '\\' AND typeof({qc}) = 'text' "
                f"LIMIT {limit}", (pattern,)).fetchall()
            for (value,) in rows:
                (exact if value.lower() == query.lower() else other).append((table, column, value))
        return (exact + other)[:limit]
