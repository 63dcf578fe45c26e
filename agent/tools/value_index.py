"""The cell-value index behind SearchValue: an SQLite sidecar file with FTS5, no server.

Every distinct text cell of every column is stored once (``cells``: value,
row count, and a CRC of its case/accent-folded form, indexed, for equality up
to case and accents) and tokenised into an FTS5 index (``cells_fts``,
external content, ``detail=none``: we never need phrase positions, and it
halves the size). Typos are handled by a symmetric-deletion table over the
token vocabulary (``terms``/``dels``): every word of 4+ letters is stored
under itself and each of its one-letter deletions, so a query word with one
edit (insertion, deletion, substitution, transposition) finds its vocabulary
word with a handful of B-tree lookups instead of a scan. Words with digits
(codes, e-mail handles) are left out of it: one edit there makes another
valid code. See benchmarks/results/tools.md for why this won over bm25s,
rank-bm25 and a LIKE scan of the target.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz.distance import OSA

from agent.sql import Connector, SchemaInfo, SQLError
from agent.sql.stats import type_kind

from .text import fold

log = logging.getLogger(__name__)

VALUES_FILE = "values.sqlite"
MAX_CELL_CHARS = 1000  # longer cells are prose; their head is enough to find them
_FTS_TOKEN = re.compile(r"[^\W_]+")  # what FTS5's unicode61 tokenizer calls a token
_MIN_TYPO_LEN = 4  # one edit in a shorter word is a different word
_MAX_TYPO_LEN = 24
_COMMON_DF = 0.05  # tokens in more than 5% of cells carry no signal when others are present
_AND_CANDIDATES = 400  # cells holding every word, fetched for ranking
_OR_CANDIDATES = 60  # cells per rare word when not all words match
_PAGE = 50_000


@dataclass(frozen=True)
class Cell:
    table: str
    column: str
    value: str
    count: int  # rows holding this value
    tier: int  # 0 exact, 1 same after case/accent folding, 2 all words, 3 some words / close spelling
    score: float  # rapidfuzz similarity to the query, 0..100


@dataclass(frozen=True)
class _Group:
    expr: str  # FTS5 expression for one query word (with its spelling alternatives)
    df: int  # cells holding it (0 when unknown: a prefix)


@dataclass(frozen=True)
class ValueIndexStats:
    text_columns: int
    cells: int  # distinct (column, value) pairs indexed
    text_cells: int  # non-null text cells read from the target
    terms: int
    skipped_cells: int = 0  # text cells too long to read (over READ_MAX_BYTES)


def fts_tokens(text: str) -> list[str]:
    return _FTS_TOKEN.findall(fold(text))


# --- reading the target ------------------------------------------------------


def text_columns(schema: SchemaInfo) -> list[tuple[str, str]]:
    """Columns whose cells may be text. SQLite stores text anywhere, so every column is read there."""
    out = []
    for table in schema.tables:
        for col in table.columns:
            declared = col.type.lower()
            if schema.engine != "sqlite" and (type_kind(declared) != "text" or "bytea" in declared
                                              or "json" in declared or "[]" in declared):
                continue
            out.append((table.name, col.name))
    return out


# What one build may read from a target: the target is uploaded by users, so a hostile file (a 1 GB cell,
# millions of huge cells) must not grow the worker that builds the index.
READ_MAX_BYTES = 1 << 20  # SQLITE_LIMIT_LENGTH of the reading connection: a longer text cell is skipped unread
MAX_TEXT_CELLS = 50_000_000  # non-null text cells read from one database (2.4 M in the largest benchmark)
MAX_INDEX_CELLS = 5_000_000  # distinct (column, value) pairs indexed (1.8 M in the largest benchmark)
MAX_SKIPPED_CELLS = 10_000  # text cells over READ_MAX_BYTES; each costs a restart of its table's scan
_HELD_CHARS = 32_000_000  # characters of distinct values counted in memory before they are handed on


class ValueIndexLimit(ValueError):
    """A target past one of the build's limits; the message names the limit (shown as the index error)."""


class CellSource:
    """(table, column, value, count) for every distinct non-empty text cell, values cut to ``MAX_CELL_CHARS``.

    Iterate once. Afterwards ``skipped`` counts text cells longer than ``READ_MAX_BYTES`` (never read: the
    SQLite reader checks the type with ``typeof``, which does not load a value, and SQLite refuses to load one
    over its length limit), and ``spilled`` says a table's counts were handed on in parts (the same value may
    then come more than once, with partial counts: ``build_value_index`` adds them up)."""

    def __init__(self, connector: Connector, schema: SchemaInfo) -> None:
        self.connector, self.schema = connector, schema
        self.skipped = 0
        self.spilled = False
        self.text_cells = 0

    def __iter__(self) -> Iterator[tuple[str, str, str, int]]:
        by_table: dict[str, list[str]] = {}
        for table, column in text_columns(self.schema):
            by_table.setdefault(table, []).append(column)
        path = getattr(self.connector, "path", None)
        if self.connector.engine == "sqlite" and path is not None:
            return self._iter_sqlite(Path(path), by_table)
        return self._iter_generic(by_table)

    def _read(self, n: int = 1) -> None:
        self.text_cells += n
        if self.text_cells > MAX_TEXT_CELLS:
            raise ValueIndexLimit(f"SearchValue index: more than {MAX_TEXT_CELLS:,} text cells to read "
                                  "(the limit of one build)")

    def _skip(self, table: str, column: str) -> None:
        self.skipped += 1
        if self.skipped > MAX_SKIPPED_CELLS:
            raise ValueIndexLimit(f"SearchValue index: more than {MAX_SKIPPED_CELLS:,} text cells longer than "
                                  f"{READ_MAX_BYTES:,} bytes (the limit of one build)")
        if self.skipped <= 3:
            log.warning("SearchValue index: a cell of %s.%s is longer than %d bytes and is left out",
                        table, column, READ_MAX_BYTES)

    def _iter_sqlite(self, path: Path, by_table: dict[str, list[str]]) -> Iterator[tuple[str, str, str, int]]:
        # One scan per table, counted in Python: much faster than one GROUP BY per column.
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, READ_MAX_BYTES)
        conn.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
        try:
            for table, cols in by_table.items():
                yield from self._scan_table(conn, table, cols)
        finally:
            conn.close()

    def _scan_table(self, conn: sqlite3.Connection, table: str, cols: list[str]) -> Iterator[
            tuple[str, str, str, int]]:
        connector = self.connector
        qt = connector.quote_table(table)
        # typeof() reads a cell's type without its content: blobs and numbers are never loaded.
        exprs = [f"CASE WHEN typeof({q}) = 'text' THEN substr({q}, 1, {MAX_CELL_CHARS}) END"
                 for q in (connector.quote_ident(c) for c in cols)]
        counters: list[Counter[str]] = [Counter() for _ in cols]
        held = 0

        def count(rows: Sequence[Sequence[Any]]) -> None:
            """Count the text cells of rows shaped (rowid, cell, cell, ...)."""
            nonlocal held
            n = 0
            for row in rows:
                for i in range(1, len(row)):
                    v = row[i]
                    if v.__class__ is str:
                        n += 1
                        counter = counters[i - 1]
                        c = counter.get(v)
                        if c is None:
                            held += len(v) + 64
                            counter[v] = 1
                        else:
                            counter[v] = c + 1
            self._read(n)

        def flush() -> Iterator[tuple[str, str, str, int]]:
            nonlocal held
            for col, counter in zip(cols, counters, strict=True):
                for value, n in counter.items():
                    yield table, col, value, n
                counter.clear()
            held = 0

        rowid = _has_rowid(conn, table, qt)
        last: int | None = None  # rowid of the last row counted
        while True:
            if rowid:
                sql = (f"SELECT rowid, {', '.join(exprs)} FROM {qt}"
                       + (" WHERE rowid > ?" if last is not None else "") + " ORDER BY rowid")
            else:
                sql = f"SELECT NULL, {', '.join(exprs)} FROM {qt}"
            batch: list[Any] = []
            try:
                # Row by row into a batch (not fetchmany): rows read before a failing one are all kept, so a
                # restart resumes right at the row at fault.
                for row in conn.execute(sql, () if last is None else (last,)):
                    batch.append(row)
                    if len(batch) >= _PAGE:
                        count(batch)
                        last = batch[-1][0]
                        batch = []
                        if held > _HELD_CHARS:  # counted in parts; build_value_index adds the parts up
                            self.spilled = True
                            yield from flush()
                count(batch)
                break
            except sqlite3.Error as exc:
                if batch:
                    count(batch)
                    last = batch[-1][0]
                if not _too_big(exc):
                    # A broken view or table must not stop the whole build; its cells are left out, and said so.
                    log.warning("SearchValue index: %s skipped, its rows could not be read: %s", table, exc)
                    return
                if not rowid:  # a view or WITHOUT ROWID table: no way past the cell, keep what was read
                    self._skip(table, "?")
                    log.warning("SearchValue index: the rest of %s is left out (a cell over %d bytes)",
                                table, READ_MAX_BYTES)
                    break
                last, done = self._step_past(conn, table, qt, cols, exprs, last, count)
                if done:
                    break
        yield from flush()

    def _step_past(self, conn: sqlite3.Connection, table: str, qt: str, cols: list[str], exprs: list[str], last: int | None,
                   count: Any) -> tuple[int | None, bool]:
        """After a too-long cell stopped a scan: read the next rows one at a time (the driver reads one row
        ahead, so the row at fault is one of the next two), that row a column at a time, skipping its
        too-long cells. Returns the last rowid counted and whether the table is done."""
        for _ in range(2):
            after = " WHERE rowid > ?" if last is not None else ""
            found = conn.execute(f"SELECT rowid FROM {qt}{after} ORDER BY rowid LIMIT 1",
                                 () if last is None else (last,)).fetchone()
            if found is None:
                return last, True
            rid = found[0]
            try:
                count(conn.execute(f"SELECT rowid, {', '.join(exprs)} FROM {qt} WHERE rowid = ?", (rid,)).fetchall())
            except sqlite3.Error as exc:
                if not _too_big(exc):
                    raise
                values: list[Any] = [rid]
                for col, expr in zip(cols, exprs, strict=True):
                    try:
                        values.append(conn.execute(f"SELECT {expr} FROM {qt} WHERE rowid = ?", (rid,)).fetchone()[0])
                    except sqlite3.Error as cell_exc:
                        if not _too_big(cell_exc):
                            raise
                        values.append(None)
                        self._skip(table, col)
                count([values])
                return rid, False
            last = rid
        return last, False

    def _iter_generic(self, by_table: dict[str, list[str]]) -> Iterator[tuple[str, str, str, int]]:
        # Keyset pagination over GROUP BY: works through the connector's capped internal runner. Cells are
        # cut on the server and longer ones left out there, so no long value crosses the connection.
        connector = self.connector
        run: Any = connector._internal  # type: ignore[attr-defined]
        for table, cols in by_table.items():
            qt = connector.quote_table(table)
            for col in cols:
                qc = connector.quote_ident(col)
                last: str | None = None
                while True:
                    where = "" if last is None else "WHERE v > %s"
                    sql = (f"SELECT v, n FROM (SELECT substr(CAST({qc} AS TEXT), 1, {MAX_CELL_CHARS}) AS v, "
                           f"COUNT(*) AS n FROM {qt} WHERE {qc} IS NOT NULL "
                           f"AND octet_length(CAST({qc} AS TEXT)) <= {READ_MAX_BYTES} GROUP BY 1) s {where} "
                           f"ORDER BY v LIMIT {_PAGE}")
                    try:
                        rows = run(sql, (last,)) if last is not None else run(sql)
                    except SQLError:
                        break
                    for v, n in rows:
                        self._read(int(n))
                        yield table, col, v, int(n)
                    if len(rows) < _PAGE:
                        break
                    last = rows[-1][0]


def _has_rowid(conn: sqlite3.Connection, table: str, qt: str) -> bool:
    """A table with a rowid (not a view, not WITHOUT ROWID): its scan can resume past a row."""
    kind = conn.execute("SELECT type FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    if kind is None or kind[0] != "table":
        return False
    try:
        conn.execute(f"SELECT rowid FROM {qt} LIMIT 0")
    except sqlite3.Error:
        return False
    return True


def _too_big(exc: sqlite3.Error) -> bool:
    return "too big" in str(exc)


def iter_cells(connector: Connector, schema: SchemaInfo) -> CellSource:
    """(table, column, value, count) for every distinct non-empty text cell, read within the build's limits."""
    return CellSource(connector, schema)


# --- building ----------------------------------------------------------------


def build_value_index(cells: Iterable[tuple[str, str, str, int]], path: Path, *,
                      case_sensitive: bool = False) -> ValueIndexStats:
    conn = sqlite3.connect(path)
    conn.executescript("""
        PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA page_size = 8192;
        CREATE TABLE cols(id INTEGER PRIMARY KEY, tbl TEXT NOT NULL, col TEXT NOT NULL);
        CREATE TABLE cells(id INTEGER PRIMARY KEY, col_id INTEGER NOT NULL, value TEXT NOT NULL,
                           n INTEGER NOT NULL, h INTEGER NOT NULL);
        CREATE VIRTUAL TABLE cells_fts USING fts5(value, content='cells', content_rowid='id',
                           tokenize='unicode61 remove_diacritics 2', detail='none');
        CREATE TABLE terms(id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE, df INTEGER NOT NULL);
        CREATE TABLE dels(key TEXT NOT NULL, term_id INTEGER NOT NULL, PRIMARY KEY (key, term_id)) WITHOUT ROWID;
        CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
    """)
    col_ids: dict[tuple[str, str], int] = {}
    text_cells = added = 0
    batch: list[tuple[int, str, str, int]] = []
    for table, column, value, n in cells:
        value = value.strip("\x00")
        if not value.strip():
            continue
        key = (table, column)
        col_id = col_ids.get(key)
        if col_id is None:
            col_id = col_ids[key] = len(col_ids) + 1
            conn.execute("INSERT INTO cols VALUES (?, ?, ?)", (col_id, table, column))
        text_cells += n
        stored = value[:MAX_CELL_CHARS]
        batch.append((col_id, stored, n, _hash(fold(stored))))
        added += 1
        if added > MAX_INDEX_CELLS:
            conn.close()
            raise ValueIndexLimit(f"SearchValue index: more than {MAX_INDEX_CELLS:,} distinct text values "
                                  "(per column) to index (the limit of one build)")
        if len(batch) >= _PAGE:
            conn.executemany("INSERT INTO cells(col_id, value, n, h) VALUES (?, ?, ?, ?)", batch)
            batch.clear()
    if batch:
        conn.executemany("INSERT INTO cells(col_id, value, n, h) VALUES (?, ?, ?, ?)", batch)
    if getattr(cells, "spilled", False):  # a table counted in parts: one row per (column, value), counts added
        conn.executescript("""
            CREATE TEMP TABLE merged AS SELECT MIN(id) AS id, col_id, value, SUM(n) AS n, h FROM cells
                GROUP BY col_id, value;
            DELETE FROM cells;
            INSERT INTO cells(id, col_id, value, n, h) SELECT id, col_id, value, n, h FROM merged ORDER BY id;
            DROP TABLE merged;
        """)
    conn.execute("INSERT INTO cells_fts(cells_fts) VALUES ('rebuild')")
    conn.execute("CREATE INDEX cells_h ON cells(h)")
    conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, cells_fts, 'row')")
    conn.execute("INSERT INTO terms(term, df) SELECT term, doc FROM temp.vocab ORDER BY term")
    conn.executemany("INSERT OR IGNORE INTO dels VALUES (?, ?)", _deletions(conn))
    n_cells = conn.execute("SELECT COUNT(*) FROM cells").fetchone()[0]
    n_terms = conn.execute("SELECT COUNT(*) FROM terms").fetchone()[0]
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [("cells", str(n_cells)),
                                                         ("case_sensitive", "1" if case_sensitive else "0")])
    conn.commit()
    conn.execute("VACUUM")
    conn.close()
    return ValueIndexStats(len(col_ids), n_cells, text_cells, n_terms, getattr(cells, "skipped", 0))


def _deletions(conn: sqlite3.Connection) -> Iterator[tuple[str, int]]:
    rows = conn.execute("SELECT id, term FROM terms").fetchall()
    for term_id, term in rows:
        if not (_MIN_TYPO_LEN <= len(term) <= _MAX_TYPO_LEN) or _has_digit(term):
            continue
        yield term, term_id
        for key in _one_deletions(term):
            yield key, term_id


def _has_digit(term: str) -> bool:
    # Codes and numbers ('ab12', '2019') are not words: one edit makes another valid code.
    return any(ch.isdigit() for ch in term)


def _hash(norm: str) -> int:
    # 32-bit CRC of the folded cell: a small integer index instead of a second copy of every cell.
    return zlib.crc32(norm.encode("utf-8"))


def _one_deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1:] for i in range(len(word))}


# --- searching ---------------------------------------------------------------


class ValueIndex:
    """Read side of values.sqlite. One read-only SQLite connection per thread."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(self.path)
        self._local = threading.local()
        conn = self._conn()
        self.columns: dict[int, tuple[str, str]] = {
            i: (t, c) for i, t, c in conn.execute("SELECT id, tbl, col FROM cols")}
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        self.cell_total = int(meta["cells"])
        self.case_sensitive = meta.get("case_sensitive") == "1"  # identifiers fold case (PostgreSQL)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True, check_same_thread=False)
            conn.execute("PRAGMA query_only = ON")
            conn.execute("PRAGMA cache_size = -16000")
            self._local.conn = conn
        return conn

    def column_ids(self, tables: Sequence[str] = (), columns: Sequence[str] = ()) -> list[int] | None:
        """Ids of indexed columns matching the filters (case-insensitive); None means no filter."""
        if not tables and not columns:
            return None
        tl = {t.lower() for t in tables}
        cl = {c.lower() for c in columns}
        out = []
        for i, (t, c) in self.columns.items():
            if tl and t.lower() not in tl:
                continue
            if cl and c.lower() not in cl and f"{t}.{c}".lower() not in cl:
                continue
            out.append(i)
        return out

    def search(self, query: str, *, limit: int = 10, col_ids: list[int] | None = None) -> list[Cell]:
        conn = self._conn()
        qnorm = fold(query)[:MAX_CELL_CHARS]
        if not qnorm or (col_ids is not None and not col_ids):
            return []
        col_filter = ""
        params: list[Any] = []
        if col_ids is not None:
            col_filter = f" AND c.col_id IN ({','.join('?' * len(col_ids))})"
            params = list(col_ids)
        found: dict[int, tuple[int, int, str, int]] = {}  # cell id -> (tier, col_id, value, n)
        for cid, col_id, value, n in conn.execute(
                f"SELECT c.id, c.col_id, c.value, c.n FROM cells c WHERE c.h = ?{col_filter}", [_hash(qnorm), *params]):
            if fold(value) == qnorm:  # the hash only narrows the search; equal hashes may differ
                found[cid] = (0 if value == query else 1, col_id, value, n)
        if len(found) < limit:
            # FTS5's bm25 costs ~50 us per matching cell (it reads each cell's length), far too slow for
            # common words over millions of cells, so candidates are fetched unranked, rarest words
            # first, and ranked by string similarity below.
            groups = self._token_groups(conn, fts_tokens(qnorm))
            sql = ("SELECT c.id, c.col_id, c.value, c.n FROM cells_fts f JOIN cells c ON c.id = f.rowid "
                   f"WHERE cells_fts MATCH ?{col_filter} LIMIT ?")
            queries = [(" AND ".join(g.expr for g in groups), 2, _AND_CANDIDATES)] if groups else []
            if len(groups) > 1:
                queries += [(g.expr, 3, _OR_CANDIDATES) for g in sorted(groups, key=lambda g: g.df)[:4]]
            for match, tier, cap in queries:
                try:
                    rows = conn.execute(sql, [match, *params, cap]).fetchall()
                except sqlite3.OperationalError:
                    rows = []
                for cid, col_id, value, n in rows:
                    if cid not in found:
                        found[cid] = (tier, col_id, value, n)
                if tier == 2 and len(found) >= limit:
                    break  # cells with every word outrank any with some: the rest cannot make the list
        cells = []
        for tier, col_id, value, n in found.values():
            table, column = self.columns[col_id]
            score = 100.0 if tier == 0 else float(fuzz.WRatio(qnorm, fold(value[:200])))
            cells.append(Cell(table, column, value, n, tier, score))
        cells.sort(key=lambda c: (c.tier, -round(c.score), -c.count, len(c.value), c.table, c.column, c.value))
        return cells[:limit]

    def _token_groups(self, conn: sqlite3.Connection, toks: list[str]) -> list[_Group]:
        """One FTS5 OR-group per query token: the token if known, else close spellings and its prefix.

        Groups matching a large share of all cells are left out while rarer ones remain: they would
        only flood the candidates (a typo of 'test' in an e-mail address must not fetch every e-mail).
        """
        toks = list(dict.fromkeys(toks))[:16]
        if not toks:
            return []
        df = dict(conn.execute(
            f"SELECT term, df FROM terms WHERE term IN ({','.join('?' * len(toks))})", toks).fetchall())
        groups = []
        for tok in toks:
            if tok in df:
                groups.append(_Group(f'"{tok}"', df[tok]))
                continue
            close = self._close_terms(conn, tok)
            options = [f'"{t}"' for t, _ in close] + ([f'"{tok}"*'] if len(tok) >= 3 else [])
            if options:
                groups.append(_Group("(" + " OR ".join(options) + ")", sum(d for _, d in close)))
        rare = [g for g in groups if g.df <= _COMMON_DF * max(self.cell_total, 1)]
        return rare or groups

    def _close_terms(self, conn: sqlite3.Connection, tok: str, limit: int = 5) -> list[tuple[str, int]]:
        if not (_MIN_TYPO_LEN - 1 <= len(tok) <= _MAX_TYPO_LEN + 1) or _has_digit(tok):
            return []
        keys = sorted({tok} | _one_deletions(tok))
        rows = conn.execute(
            "SELECT t.term, t.df FROM dels d JOIN terms t ON t.id = d.term_id "
            f"WHERE d.key IN ({','.join('?' * len(keys))})", keys).fetchall()
        close = {(term, df) for term, df in rows if OSA.distance(tok, term) <= 1}
        return sorted(close, key=lambda r: (-r[1], r[0]))[:limit]

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

