"""Writes of the agent app (HackSoft style: views, tasks and commands call these)."""

from .databases import (
    database_build_indexes,
    database_delete,
    database_refresh,
    database_register,
    engine_for_location,
    index_dir_for,
    open_connector,
    toolbox_for,
)

__all__ = ["database_build_indexes", "index_dir_for", "toolbox_for", "database_delete", "database_refresh", "database_register", "engine_for_location", "open_connector"]
