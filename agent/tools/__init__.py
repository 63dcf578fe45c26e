"""The agent's tools (SearchColumn, SearchValue, FindShortestPath, ExecuteSQL) and their indexes.

    from agent.sql import connect
    from agent.tools import ToolBox, build_indexes

    db = connect("sqlite", "chinook.sqlite")
    build_indexes(db, Path("var/indexes/chinook"))
    tools = ToolBox(db, Path("var/indexes/chinook"))
    print(tools.run("SearchValue", ["AC/DC"]).observation)

No Django here: the app's tasks and views call these functions.
"""

from __future__ import annotations

from .base import TOOL_NAMES, ToolResult, ToolRunner
from .build import COLUMN_BACKENDS, build_indexes
from .embeddings import BackendUnavailable
from .manifest import IndexManifest, IndexMissing, is_stale, read_manifest
from .toolbox import ToolBox, clear_cache, usage

__all__ = [
    "COLUMN_BACKENDS", "TOOL_NAMES", "BackendUnavailable", "IndexManifest", "IndexMissing", "ToolBox",
    "ToolResult", "ToolRunner", "build_indexes", "clear_cache", "is_stale", "read_manifest", "usage",
]
