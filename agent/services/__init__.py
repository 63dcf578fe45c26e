"""Writes of the agent app (HackSoft style: views, tasks and commands call these)."""

from .databases import (
    database_build_indexes,
    database_refresh,
    database_refresh_queue,
    database_register,
    database_save,
    engine_for_location,
    index_dir_for,
    normalise_location,
    open_connector,
    schema_matches,
    toolbox_for,
)

__all__ = ["database_build_indexes", "database_refresh", "database_refresh_queue",
           "database_register", "database_save", "engine_for_location", "index_dir_for", "normalise_location",
           "open_connector", "schema_matches", "toolbox_for"]
