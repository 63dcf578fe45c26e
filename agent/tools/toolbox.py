"""ToolBox: runs the agent's tools by name against one database and its built indexes.

Loaded indexes are shared by every ToolBox of the process through a small
LRU cache keyed by (index directory, build time), so many sessions on one
database load each index once, and a rebuild (new build time) is picked up
by the next call without serving a mix of old and new files.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent.sql import Connector, Limits, SchemaInfo

from .base import TOOL_NAMES, ToolResult
from .build import SCHEMA_FILE
from .column_index import ColumnIndex
from .errors import ToolError
from .execute_sql import DEFAULT_SHOW_ROWS, execute_sql
from .find_shortest_path import find_shortest_path
from .fk_graph import JoinGraph
from .manifest import MANIFEST_NAME, IndexManifest, IndexMissing, read_manifest
from .search_column import DEFAULT_K, search_column
from .search_value import DEFAULT_LIMIT, search_value
from .value_index import VALUES_FILE, ValueIndex

log = logging.getLogger(__name__)
_CACHE_SIZE = 32


class LoadedIndexes:
    """The indexes of one build, each loaded on first use."""

    def __init__(self, index_dir: Path, manifest: IndexManifest) -> None:
        self.dir = index_dir / manifest.version
        self.manifest = manifest
        self._lock = threading.Lock()
        self._schema: SchemaInfo | None = None
        self._columns: ColumnIndex | None = None
        self._values: ValueIndex | None = None
        self._graph: JoinGraph | None = None

    def _load(self, attr: str, loader: Callable[[], Any]) -> Any:
        value = getattr(self, attr)
        if value is None:
            with self._lock:
                value = getattr(self, attr)
                if value is None:
                    try:
                        value = loader()
                    except FileNotFoundError as exc:
                        raise IndexMissing(f"Index file missing: {exc.filename or exc}; rebuild the indexes.") from exc
                    setattr(self, attr, value)
        return value

    @property
    def schema(self) -> SchemaInfo:
        return self._load("_schema", lambda: SchemaInfo.from_dict(
            json.loads((self.dir / SCHEMA_FILE).read_text(encoding="utf-8"))))

    @property
    def columns(self) -> ColumnIndex:
        m = self.manifest
        return self._load("_columns", lambda: ColumnIndex(self.dir, m.column_backend, m.embedding,
                                                          case_sensitive=m.engine != "sqlite"))

    @property
    def values(self) -> ValueIndex:
        return self._load("_values", lambda: ValueIndex(self.dir / VALUES_FILE))

    @property
    def graph(self) -> JoinGraph:
        return self._load("_graph", lambda: JoinGraph.load(self.dir))


_cache: OrderedDict[tuple[str, str], LoadedIndexes] = OrderedDict()
_cache_lock = threading.Lock()


def loaded_indexes(index_dir: Path, manifest: IndexManifest) -> LoadedIndexes:
    key = (str(Path(index_dir).resolve()), manifest.built_at)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is None:
            hit = _cache[key] = LoadedIndexes(Path(index_dir), manifest)
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
        else:
            _cache.move_to_end(key)
        return hit


# Signatures the agent writes (the paper's tool descriptions), bound with inspect to report misuse.
_ARG = inspect.Parameter.POSITIONAL_OR_KEYWORD
_SIGNATURES: dict[str, inspect.Signature] = {
    "SearchColumn": inspect.Signature([inspect.Parameter("query", _ARG)]),
    "SearchValue": inspect.Signature([inspect.Parameter("query", _ARG), inspect.Parameter("table", _ARG, default=None),
                                      inspect.Parameter("column", _ARG, default=None)]),
    "FindShortestPath": inspect.Signature([inspect.Parameter("start", _ARG), inspect.Parameter("end", _ARG)]),
    "ExecuteSQL": inspect.Signature([inspect.Parameter("sql", _ARG)]),
}
_ALIASES = {  # other names for the first argument that models (and the paper's text) use
    "SearchColumn": {"semantic": "query", "phrase": "query"},
    "SearchValue": {"value": "query"},
    "ExecuteSQL": {"query": "sql"},
}


def usage(name: str) -> str:
    params = []
    for p in _SIGNATURES[name].parameters.values():
        params.append(p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}")
    return f"{name}({', '.join(params)})"


class ToolBox:
    """The real ToolRunner: SearchColumn, SearchValue, FindShortestPath, ExecuteSQL on one database."""

    def __init__(self, connector: Connector, index_dir: Path | str, *, limits: Limits | None = None,
                 enabled: Sequence[str] = TOOL_NAMES, column_k: int = DEFAULT_K, value_limit: int = DEFAULT_LIMIT,
                 show_rows: int = DEFAULT_SHOW_ROWS) -> None:
        unknown = [n for n in enabled if n not in TOOL_NAMES]
        if unknown:
            raise ValueError(f"Unknown tools {unknown}; expected names from {TOOL_NAMES}")
        self.connector = connector
        self.index_dir = Path(index_dir)
        self.limits = limits
        self.tool_names: tuple[str, ...] = tuple(n for n in TOOL_NAMES if n in enabled)
        self.column_k, self.value_limit, self.show_rows = column_k, value_limit, show_rows
        self._manifest_stamp: tuple[int, int] | None = None
        self._indexes = self._current()

    def _current(self) -> LoadedIndexes:
        path = self.index_dir / MANIFEST_NAME
        try:
            st = path.stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_ino)
        except OSError:
            stamp = None
        if stamp is not None and stamp == self._manifest_stamp:
            return self._indexes
        manifest = read_manifest(self.index_dir)
        if manifest is None:
            raise IndexMissing(f"No indexes built in {self.index_dir}; run build_indexes() for this database first.")
        self._manifest_stamp = stamp
        self._indexes = loaded_indexes(self.index_dir, manifest)
        return self._indexes

    @property
    def manifest(self) -> IndexManifest:
        return self._indexes.manifest

    @property
    def schema(self) -> SchemaInfo:
        return self._current().schema

    def run(self, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> ToolResult:
        started = time.perf_counter()
        try:
            result = self._dispatch(name, args, kwargs)
        except ToolError as exc:
            result = ToolResult(str(exc), False, 0.0)
        except IndexMissing as exc:
            result = ToolResult(f"{name} is unavailable: {exc}", False, 0.0)
        except Exception as exc:  # the agent loop must go on whatever a tool does
            log.exception("tool %s failed", name)
            result = ToolResult(f"{name} failed: {type(exc).__name__}: {exc}", False, 0.0)
        return replace(result, elapsed_ms=(time.perf_counter() - started) * 1000)

    def _dispatch(self, name: object, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> ToolResult:
        if not isinstance(name, str) or name not in _SIGNATURES:
            guess = [t for t in TOOL_NAMES if str(name).lower().replace("_", "") == t.lower()]
            hint = f" Did you mean {guess[0]}?" if guess else ""
            raise ToolError(f"Unknown tool {name!r}.{hint} Available: {', '.join(self.tool_names)}.")
        if name not in self.tool_names:
            raise ToolError(f"{name} is not available here; use one of: {', '.join(self.tool_names)}.")
        if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
            args = (args,)
        if kwargs is None:
            kwargs = {}
        if not isinstance(kwargs, Mapping):
            raise ToolError(f"Bad keyword arguments for {usage(name)}.")
        kw = {_ALIASES.get(name, {}).get(str(k), str(k)): v for k, v in kwargs.items()}
        try:
            bound = _SIGNATURES[name].bind(*args, **kw)
        except TypeError as exc:
            raise ToolError(f"Wrong arguments for {name}: {exc}. Usage: {usage(name)}.") from None
        bound.apply_defaults()
        a = bound.arguments
        indexes = self._current()
        if name == "SearchColumn":
            return search_column(indexes.columns, a["query"], k=self.column_k)
        if name == "SearchValue":
            return search_value(indexes.values, a["query"], a["table"], a["column"], limit=self.value_limit)
        if name == "FindShortestPath":
            return find_shortest_path(indexes.graph, a["start"], a["end"])
        return execute_sql(self.connector, a["sql"], limits=self.limits, show_rows=self.show_rows)


def clear_cache() -> None:
    """Forget loaded indexes (tests, or a worker that wants its memory back)."""
    with _cache_lock:
        _cache.clear()
