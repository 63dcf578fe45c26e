"""Building every index of one database into a new version directory, then switching to it."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent.sql import Connector, SchemaInfo

from .column_index import (
    COLUMNS_FILE,
    DEFAULT_COLUMN_BACKEND,
    PAPER_VECTORS_FILE,
    VECTORS_FILE,
    column_documents,
    write_columns,
)
from .embeddings import make_embedder, public_options
from .fk_graph import GRAPH_FILE, write_graph
from .manifest import IndexManifest, read_manifest, write_manifest
from .value_index import VALUES_FILE, build_value_index, iter_cells

SCHEMA_FILE = "schema.json"
COLUMN_BACKENDS = ("hybrid", "minilm", "bm25", "openai")
_TMP_MAX_AGE_S = 6 * 3600  # a temp dir this old belongs to a build that died


def build_indexes(
    connector: Connector,
    index_dir: Path,
    *,
    schema: SchemaInfo | None = None,
    column_backend: str = DEFAULT_COLUMN_BACKEND,
    descriptions: Mapping[tuple[str, str], str] | None = None,
    embedding_options: Mapping[str, Any] | None = None,
) -> IndexManifest:
    """Build schema, column, value and join-graph indexes for ``connector``'s database.

    The build goes to a temporary directory inside ``index_dir``, is renamed
    to its version directory when complete, and only then does the manifest
    switch to it (atomic ``os.replace``). Raises BackendUnavailable early when
    an embedding backend cannot run.
    """
    if column_backend not in COLUMN_BACKENDS:
        raise ValueError(f"column_backend must be one of {', '.join(COLUMN_BACKENDS)}, not {column_backend!r}")
    index_dir = Path(index_dir)
    index_dir.mkdir(parents=True, exist_ok=True)
    # Fingerprint first: a change during the build then shows as stale instead of being missed.
    fingerprint = connector.fingerprint()
    embedder = make_embedder(column_backend, embedding_options) if column_backend != "bm25" else None
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    if schema is None:
        schema = connector.introspect(with_stats=True)
    seconds["schema"] = time.perf_counter() - started
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=index_dir))
    try:
        (tmp / SCHEMA_FILE).write_text(json.dumps(schema.to_dict(), ensure_ascii=False), encoding="utf-8")
        t = time.perf_counter()
        write_columns(column_documents(schema, descriptions), tmp, embedder)
        seconds["columns"] = time.perf_counter() - t
        t = time.perf_counter()
        graph = write_graph(schema, tmp)
        seconds["graph"] = time.perf_counter() - t
        t = time.perf_counter()
        values = build_value_index(iter_cells(connector, schema), tmp / VALUES_FILE,
                                   case_sensitive=schema.engine != "sqlite")
        seconds["values"] = time.perf_counter() - t
        built = datetime.now(UTC)
        version = f"v-{built.strftime('%Y%m%dT%H%M%S%f')}-{secrets.token_hex(3)}"
        os.rename(tmp, index_dir / version)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    seconds["total"] = time.perf_counter() - started
    final = index_dir / version
    files = {"schema": SCHEMA_FILE, "columns": COLUMNS_FILE, "column_vectors": VECTORS_FILE,
             "column_vectors_paper": PAPER_VECTORS_FILE,
             "graph": GRAPH_FILE, "values": VALUES_FILE}
    sizes = {k: (final / f).stat().st_size for k, f in files.items() if (final / f).exists()}
    manifest = IndexManifest(
        fingerprint=fingerprint,
        built_at=built.isoformat(),
        version=version,
        engine=schema.engine,
        column_backend=column_backend,
        embedding=public_options(embedding_options) if embedder is not None else {},
        sizes=sizes,
        build_seconds={k: round(v, 3) for k, v in seconds.items()},
        counts={"tables": len(schema.tables), "columns": len(schema.columns),
                "foreign_keys": len(graph["keys"]), "text_columns": values.text_columns,
                "cells": values.cells, "text_cells": values.text_cells, "terms": values.terms,
                "skipped_cells": values.skipped_cells},
    )
    previous = read_manifest(index_dir)
    write_manifest(index_dir, manifest)
    _clean(index_dir, keep={version, previous.version if previous else ""})
    return manifest


def _clean(index_dir: Path, keep: set[str]) -> None:
    """Drop older builds; the previous one stays so readers that loaded it finish undisturbed."""
    now = time.time()
    for entry in index_dir.iterdir():
        if entry.name.startswith("v-") and entry.is_dir() and entry.name not in keep:
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.name.startswith(".tmp-") and entry.is_dir() and now - entry.stat().st_mtime > _TMP_MAX_AGE_S:
            shutil.rmtree(entry, ignore_errors=True)
