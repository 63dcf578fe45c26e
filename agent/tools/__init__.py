"""The agent's tools (SearchColumn, SearchValue, FindShortestPath, ExecuteSQL) and their indexes.

    from agent.sql import connect
    from agent.tools import ToolBox, build_indexes

    db = connect("sqlite", "chinook.sqlite")
    build_indexes(db, Path("var/indexes/chinook"))
    tools = ToolBox(db, Path("var/indexes/chinook"))
    print(tools.run("SearchValue", ["AC/DC"]).observation)

Each tool is one module with a ``SPEC`` (``agent.tools.spec.ToolSpec``) listed in
``agent.tools.registry``; everything that knows about tools reads it from there.

No Django here: the app's tasks and views call these functions.
"""

from __future__ import annotations

from . import registry
from .base import ToolResult, ToolRunner
from .build import COLUMN_BACKENDS, build_indexes
from .column_index import DEFAULT_COLUMN_BACKEND
from .embeddings import BackendUnavailable
from .manifest import IndexManifest, IndexMissing, is_stale, read_manifest
from .registry import tool_names
from .spec import DEFAULT_PROFILE, FormField, Param, ToolOutput, ToolSpec, render_call
from .toolbox import ToolBox, clear_cache

__all__ = [
    "COLUMN_BACKENDS", "DEFAULT_COLUMN_BACKEND", "DEFAULT_PROFILE", "BackendUnavailable", "FormField", "IndexManifest", "IndexMissing",
    "Param", "ToolBox", "ToolOutput", "ToolResult", "ToolRunner", "ToolSpec", "build_indexes", "clear_cache",
    "is_stale", "read_manifest", "registry", "render_call", "tool_names",
]
