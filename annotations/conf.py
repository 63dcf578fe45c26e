"""The annotations app's own settings, with their defaults here (see agent/conf.py for the pattern)."""

from __future__ import annotations

from typing import Any

from agent.conf import AppSettings, var_path

DEFAULTS: dict[str, Any] = {
    # Gold query results, keyed by database fingerprint and SQL: computed once, reused by every evaluation.
    "GOLD_CACHE_DIR": var_path("gold-cache"),
    # Seconds between Celery beat's polls of the running runs (a finished session dispatches its run at once).
    "DISPATCH_POLL_S": 10.0,
}

annotations_settings = AppSettings(DEFAULTS)
