"""The column index behind SearchColumn: one document per column, ranked by embeddings, BM25 or both.

A column's document is the paper's template, "a column named {col} in table
{table} about {description}", with identifiers split into words. BM25 needs
no model; the column-name words count twice because a phrase names the
column more often than its table. The template words themselves ("a column
named ... in table") are the same in every document, so BM25 ignores them
and only embedding backends see them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rank_bm25 import BM25Plus

from agent.sql import SchemaInfo

from .embeddings import BackendUnavailable, Embedder, make_embedder
from .paper_profile import authors_statistics
from .text import split_name, stem, stemmed_tokens, tokens

COLUMNS_FILE = "columns.json"
# hybrid: MiniLM (numpy) fused with BM25 (BENCHMARKS.md, "SearchColumn": best recall on Spider dev).
DEFAULT_COLUMN_BACKEND = "hybrid"
RRF_K = 60  # reciprocal rank fusion constant (Cormack et al. 2009)
VECTORS_FILE = "column_vectors.npy"
PAPER_VECTORS_FILE = "column_vectors_paper.npy"  # the authors' column documents, for the paper profile
AUTHORS_CANDIDATES = 10  # the authors asked their vector store for max(10, topk) columns
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ColumnDoc:
    table: str
    column: str
    type: str
    description: str  # given by the caller (e.g. BIRD CSVs), else ""
    statistics: str  # ColumnStats.describe(), else ""
    primary_key: bool = False
    paper_statistics: str | None = None  # the authors' wording (paper profile); None in older indexes
    declared_type: str | None = None  # the type as the DDL spells it (paper profile); None in older indexes

    @property
    def text(self) -> str:
        about = self.description or split_name(self.column)
        return f"a column named {split_name(self.column)} in table {split_name(self.table)} about {about}"

    @property
    def paper_text(self) -> str:
        """The document the authors embedded for a column (their spider_step4_vectorization.py)."""
        return f"a column named {_authors_words(self.column)} in {_authors_words(self.table)}."


def _authors_words(name: str) -> str:
    return name.replace("_", " ").lower()


def authors_query(phrase: str) -> str:
    """The text the authors embedded for a SearchColumn phrase (their tool/spider_search.py)."""
    return f"a column about {phrase.strip().lower()}."


def column_documents(schema: SchemaInfo, descriptions: Mapping[tuple[str, str], str] | None = None) -> list[ColumnDoc]:
    # Descriptions are matched case-insensitively: BIRD's CSV names rarely match the DDL's case.
    desc = {(t.lower(), c.lower()): d for (t, c), d in (descriptions or {}).items() if d}
    docs = []
    for table in schema.tables:
        for col in table.columns:
            docs.append(ColumnDoc(
                table=table.name, column=col.name, type=col.type or "",
                description=" ".join(desc.get((table.name.lower(), col.name.lower()), "").split()),
                statistics=col.stats.describe() if col.stats else "",
                primary_key=col.primary_key,
                paper_statistics=authors_statistics(col.type or "", col.stats),
                declared_type=col.declared_type if col.declared_type is not None else col.type))
    return docs


def write_columns(docs: list[ColumnDoc], directory: Path, embedder: Embedder | None) -> None:
    (directory / COLUMNS_FILE).write_text(json.dumps([asdict(d) for d in docs], ensure_ascii=False), encoding="utf-8")
    if embedder is not None:
        vectors = embedder.embed([d.text for d in docs]) if docs else np.zeros((0, 1), dtype=np.float32)
        np.save(directory / VECTORS_FILE, vectors.astype(np.float32))
        paper = embedder.embed([d.paper_text for d in docs]) if docs else np.zeros((0, 1), dtype=np.float32)
        np.save(directory / PAPER_VECTORS_FILE, paper.astype(np.float32))


class BM25:
    """BM25 over small token lists, scored by rank-bm25; only documents sharing a term with the query are
    scored, so a phrase naming nothing returns nothing.

    BM25+ (``BM25Plus``), not Okapi: its idf stays positive for a term in most documents (a table's name is in
    each of its columns' documents), and Okapi's floor for those lost recall on Spider dev (BENCHMARKS.md).
    """

    def __init__(self, documents: list[list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.postings: dict[str, list[int]] = {}
        for i, doc in enumerate(documents):
            for term in dict.fromkeys(doc):
                self.postings.setdefault(term, []).append(i)
        self.engine = BM25Plus(documents, k1=k1, b=b) if self.postings else None

    def scores(self, query: list[str]) -> dict[int, float]:
        terms = [t for t in dict.fromkeys(query) if t in self.postings]  # a repeated word counts once
        if self.engine is None or not terms:
            return {}
        ids = sorted({i for t in terms for i in self.postings[t]})
        return dict(zip(ids, self.engine.get_batch_scores(terms, ids), strict=True))


def bm25_tokens(doc: ColumnDoc) -> list[str]:
    col = stemmed_tokens(doc.column)
    # The identifier run together as well: people write 'countrycode' for CountryCode, 'zipcode' for zip_code.
    joined = [stem("".join(tokens(doc.column)))] if len(col) > 1 else []
    return col + col + joined + stemmed_tokens(doc.table) + stemmed_tokens(doc.description)


class ColumnIndex:
    def __init__(self, directory: Path, backend: str = DEFAULT_COLUMN_BACKEND, options: Mapping[str, Any] | None = None, *,
                 case_sensitive: bool = False) -> None:
        self.case_sensitive = case_sensitive  # identifiers fold case (PostgreSQL): quote capitals
        data = json.loads((directory / COLUMNS_FILE).read_text(encoding="utf-8"))
        self.docs = [ColumnDoc(**d) for d in data]
        self.bm25 = BM25([bm25_tokens(d) for d in self.docs])
        self.backend = "bm25"
        self.vectors: np.ndarray | None = None
        self.embedder: Embedder | None = None
        self._paper_vectors: np.ndarray | None = None
        if backend != "bm25":
            try:
                self.embedder = make_embedder(backend, options)
                self.vectors = np.load(directory / VECTORS_FILE)
                if (directory / PAPER_VECTORS_FILE).exists():
                    self._paper_vectors = np.load(directory / PAPER_VECTORS_FILE)
                self.backend = backend
            except (BackendUnavailable, OSError) as exc:
                # A worker without the optional package still answers, lexically.
                log.warning("SearchColumn falls back to BM25: %s", exc)

    def search(self, phrase: str, k: int = 5) -> list[tuple[ColumnDoc, float]]:
        return self.search_many([phrase], k)[0]

    def search_many(self, phrases: list[str], k: int = 5, *, ranking: str = "index") -> list[list[tuple[ColumnDoc, float]]]:
        """Top-k columns per phrase; an embedding backend embeds all phrases in one call.

        Embedding backends always return k columns (every column has a similarity); ``hybrid`` fuses
        the embedding ranking with BM25's by reciprocal rank (1/(60 + rank) from each list), so a
        column named by the phrase's words rises while a paraphrase still finds its column.
        ``ranking="embedding"`` ranks a hybrid index by its embeddings alone (the authors' SearchColumn).
        """
        if not self.docs:
            return [[] for _ in phrases]
        if self.embedder is not None and self.vectors is not None and phrases:
            try:
                queries = self.embedder.embed(phrases)
            except BackendUnavailable as exc:
                log.warning("SearchColumn falls back to BM25 for this query: %s", exc)
            else:
                out = []
                for phrase, query in zip(phrases, queries, strict=True):
                    sims = self.vectors @ query
                    if self.backend == "hybrid" and ranking != "embedding":
                        out.append(self._fused(phrase, sims, k))
                        continue
                    order = sorted(range(len(self.docs)), key=lambda i: (-float(sims[i]), self._key(i)))
                    out.append([(self.docs[i], float(sims[i])) for i in order[:k]])
                return out
        out = []
        for phrase in phrases:
            scores = self.bm25.scores(stemmed_tokens(phrase))
            order = sorted(scores, key=lambda i: (-scores[i], self._key(i)))
            out.append([(self.docs[i], scores[i]) for i in order[:k]])
        return out

    def _fused(self, phrase: str, sims: np.ndarray, k: int) -> list[tuple[ColumnDoc, float]]:
        dense = sorted(range(len(self.docs)), key=lambda i: (-float(sims[i]), self._key(i)))
        fused = {i: 1.0 / (RRF_K + rank) for rank, i in enumerate(dense, 1)}
        lexical = self.bm25.scores(stemmed_tokens(phrase))
        for rank, i in enumerate(sorted(lexical, key=lambda i: (-lexical[i], self._key(i))), 1):
            fused[i] += 1.0 / (RRF_K + rank)
        order = sorted(fused, key=lambda i: (-fused[i], -float(sims[i]), self._key(i)))
        return [(self.docs[i], fused[i]) for i in order[:k]]

    def search_as_authors(self, phrases: list[str], k: int = 5) -> list[list[tuple[ColumnDoc, float]]]:
        """The authors' SearchColumn ranking: the phrase embedded as "a column about {phrase}.", the columns as
        "a column named {col} in {table}.", the 10 nearest read, a column whose name is the phrase moved to
        the front (distance 0), and the top k widened to every such column. (distance, best first)

        Without embeddings (a BM25-only index) the 10 candidates come from BM25 instead.
        """
        if not self.docs:
            return [[] for _ in phrases]
        distances = self._authors_distances(phrases)
        out = []
        for phrase, dist in zip(phrases, distances, strict=True):
            candidates = sorted(dist, key=lambda i: dist[i])[:max(AUTHORS_CANDIDATES, k)]
            q = phrase.strip().lower()
            hits = [(i, 0.0 if q == self.docs[i].column.lower() else dist[i]) for i in candidates]
            hits.sort(key=lambda h: h[1])
            top = max(k, sum(1 for _, d in hits if d == 0.0))
            out.append([(self.docs[i], d) for i, d in hits[:top]])
        return out

    def _authors_distances(self, phrases: list[str]) -> list[dict[int, float]]:
        if self.embedder is not None and self.vectors is not None:
            try:
                if self._paper_vectors is None:  # an index built before the authors' documents were stored
                    self._paper_vectors = self.embedder.embed([d.paper_text for d in self.docs]).astype(np.float32)
                queries = self.embedder.embed([authors_query(p) for p in phrases])
            except BackendUnavailable as exc:
                log.warning("SearchColumn falls back to BM25 for this query: %s", exc)
            else:
                # Squared L2 between unit vectors (their vector store's default distance).
                return [{i: float(2.0 - 2.0 * s) for i, s in enumerate(self._paper_vectors @ q)} for q in queries]
        out = []
        for phrase in phrases:
            scores = self.bm25.scores(stemmed_tokens(phrase))
            out.append({i: -score for i, score in scores.items()})
        return out

    def _key(self, i: int) -> tuple[str, str]:
        return self.docs[i].table.lower(), self.docs[i].column.lower()
