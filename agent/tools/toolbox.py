"""ToolBox: runs the agent's tools by name against one database and its built indexes.

Loaded indexes are shared by every ToolBox of the process through a small
LRU cache keyed by (index directory, build time), so many sessions on one
database load each index once, and a rebuild (new build time) is picked up
by the next call without serving a mix of old and new files.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent.sql import Connector, ForeignKey, Limits, SchemaInfo, with_foreign_keys

from . import registry
from .base import ToolResult
from .build import SCHEMA_FILE
from .column_index import ColumnIndex
from .errors import ToolError
from .execute_sql import DEFAULT_SHOW_ROWS
from .fk_graph import JoinGraph, graph_data
from .manifest import MANIFEST_NAME, IndexManifest, IndexMissing, read_manifest
from .search_column import DEFAULT_K
from .search_value import DEFAULT_LIMIT
from .spec import DEFAULT_PROFILE
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


class PatchedIndexes:
    """One build's indexes with foreign keys its schema does not hold (the authors' keys of a Spider database):
    the schema and the join graph have them, every other index is the build's own."""

    def __init__(self, base: LoadedIndexes, extra: Sequence[ForeignKey]) -> None:
        self.base = base
        self.schema = with_foreign_keys(base.schema, extra)
        self.graph = JoinGraph(graph_data(self.schema))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)


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


class ToolBox:
    """The real ToolRunner: the registered tools (``agent.tools.registry``) on one database.

    ``profile`` names how observations are rendered (each spec's ``observe`` hook).
    """

    def __init__(self, connector: Connector, index_dir: Path | str, *, limits: Limits | None = None,
                 enabled: Sequence[str] | None = None, column_k: int = DEFAULT_K, value_limit: int = DEFAULT_LIMIT,
                 show_rows: int = DEFAULT_SHOW_ROWS, profile: str = DEFAULT_PROFILE,
                 column_ranking: str = "index", database_name: str = "",
                 extra_foreign_keys: Sequence[ForeignKey] = ()) -> None:
        self.tool_names: tuple[str, ...] = registry.canonical(enabled)
        self.connector = connector
        self.index_dir = Path(index_dir)
        self.limits = limits
        self.column_k, self.value_limit, self.show_rows = column_k, value_limit, show_rows
        self.column_ranking = column_ranking  # "index": the index's backend; "embedding": embeddings alone
        self.profile = profile
        self.database_name = database_name  # named in the paper profile's errors, as the authors' tools did
        self.extra_foreign_keys = tuple(extra_foreign_keys)
        self._patched: PatchedIndexes | None = None
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

    def close(self) -> None:
        """Close the target's connector (the loaded indexes stay cached for the next ToolBox)."""
        self.connector.close()

    def __enter__(self) -> ToolBox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def manifest(self) -> IndexManifest:
        return self._indexes.manifest

    @property
    def schema(self) -> SchemaInfo:
        return self.indexes.schema

    @property
    def indexes(self) -> LoadedIndexes | PatchedIndexes:
        """The current build's indexes (a rebuild is picked up here), for the tools' ``execute``; with
        ``extra_foreign_keys``, their schema and join graph hold those keys too."""
        current = self._current()
        if not self.extra_foreign_keys:
            return current
        if self._patched is None or self._patched.base is not current:
            self._patched = PatchedIndexes(current, self.extra_foreign_keys)
        return self._patched

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
        spec = registry.find(name)
        if spec is None:
            guess = [t for t in registry.tool_names() if str(name).lower().replace("_", "") == t.lower()]
            hint = f" Did you mean {guess[0]}?" if guess else ""
            raise ToolError(f"Unknown tool {name!r}.{hint} Available: {', '.join(self.tool_names)}.")
        if spec.name not in self.tool_names:
            raise ToolError(f"{spec.name} is not available here; use one of: {', '.join(self.tool_names)}.")
        if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
            args = (args,)
        if kwargs is None:
            kwargs = {}
        if not isinstance(kwargs, Mapping):
            raise ToolError(f"Bad keyword arguments for {spec.usage()}.")
        output = spec.execute(self, spec.bind(args, kwargs))
        return ToolResult(spec.observation(output, self.profile), output.ok, 0.0, sql=output.sql,
                          result=output.result)


def clear_cache() -> None:
    """Forget loaded indexes (tests, or a worker that wants its memory back)."""
    with _cache_lock:
        _cache.clear()
