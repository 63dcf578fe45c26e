"""The manifest of one database's indexes: what was built, from which state of the target, where.

Layout of an index directory::

    index_dir/manifest.json        replaced atomically (os.replace) after a build completes
    index_dir/v-<stamp>/           one complete build; the manifest names the current one
        schema.json  columns.json  column_vectors.npy (embedding backends)  values.sqlite  graph.json

A reader resolves the version directory through the manifest, so it sees
either the previous complete build or the new one, never a half-written one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent.sql import Connector

MANIFEST_NAME = "manifest.json"
# 2: statistics keep whitespace and list values in row order, declared types and the authors' column
# vectors stored (paper profile). An older build is stale, so the next use queues a rebuild.
FORMAT_VERSION = 2


class IndexMissing(Exception):
    """The indexes of a database have not been built (or their files are gone)."""


@dataclass(frozen=True)
class IndexManifest:
    fingerprint: str  # connector.fingerprint() of the target when the build started
    built_at: str  # ISO-8601 UTC, unique per build (microseconds)
    version: str  # name of the version directory holding this build
    engine: str
    column_backend: str
    embedding: Mapping[str, Any] = field(default_factory=dict)  # backend options, never secrets
    sizes: Mapping[str, int] = field(default_factory=dict)  # bytes per index file
    build_seconds: Mapping[str, float] = field(default_factory=dict)  # per index, plus "total"
    counts: Mapping[str, int] = field(default_factory=dict)  # tables, columns, text_columns, cells, ...
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("embedding", "sizes", "build_seconds", "counts"):
            d[key] = dict(d[key])
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> IndexManifest:
        return cls(
            fingerprint=d["fingerprint"],
            built_at=d["built_at"],
            version=d["version"],
            engine=d.get("engine", ""),
            column_backend=d.get("column_backend", "bm25"),
            embedding=dict(d.get("embedding", {})),
            sizes=dict(d.get("sizes", {})),
            build_seconds=dict(d.get("build_seconds", {})),
            counts=dict(d.get("counts", {})),
            format_version=int(d.get("format_version", 1)),
        )

    def path(self, index_dir: Path, name: str) -> Path:
        return Path(index_dir) / self.version / name


def read_manifest(index_dir: Path | str) -> IndexManifest | None:
    """The manifest of the current build, or None when nothing complete has been built there."""
    path = Path(index_dir) / MANIFEST_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as exc:
        raise IndexMissing(f"Unreadable index manifest {path}: {exc}") from exc
    manifest = IndexManifest.from_dict(data)
    if not (Path(index_dir) / manifest.version).is_dir():
        return None
    return manifest


def write_manifest(index_dir: Path, manifest: IndexManifest) -> None:
    tmp = Path(index_dir) / f".{MANIFEST_NAME}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(manifest.to_dict(), indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, Path(index_dir) / MANIFEST_NAME)


def is_stale(manifest: IndexManifest | None, connector: Connector) -> bool:
    """True when the target changed since the build, the build is of an older format, or nothing was built."""
    return manifest is None or manifest.format_version < FORMAT_VERSION or manifest.fingerprint != connector.fingerprint()
