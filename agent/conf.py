"""The agent app's own settings, with their defaults here (DRF's ``api_settings`` pattern).

A project overrides any of them in ``settings.T2S`` (t2s_site/settings.py fills
that dict from environment variables); anything it leaves out takes the
default below. Read on every access, so ``override_settings`` and tests that
replace ``settings.T2S`` take effect at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    "INDEX_DIR": Path("var") / "indexes",  # tool indexes, one folder per registered database
    "DEMO_DATABASE": Path(__file__).resolve().parent / "demo" / "chinook.sqlite",
    "QUERY_TIMEOUT_S": 10.0,  # per query run on a target database
    "QUERY_MAX_ROWS": 1000,
    "LLM_BASE_URL": "",  # the default endpoint when no LLMEndpoint record is marked default
    "LLM_API_KEY_ENV": "OPENAI_API_KEY",
    "LLM_MODEL": "",
    # Celery's threads pool has no time limits: sessions enforce their own wall-clock limit.
    "SESSION_MAX_SECONDS": 900,
    # A running session's worker touches it every HEARTBEAT_S; silent for STALE_AFTER_S (about three beats)
    # means the worker died, and any worker's sweep requeues it (agent/services/leases.py).
    "SESSION_HEARTBEAT_S": 2.0,
    "SESSION_STALE_AFTER_S": 7.0,
    # A session QUEUED this long after its message was published is published again (a lost message).
    "SESSION_QUEUED_STALE_AFTER_S": 300.0,
    # Sessions a worker thread runs after its task's own, handed over by its run's dispatch instead of published
    # (agent/services/handover.py); 0: every session is a message of its own.
    "SESSION_HANDOVER_MAX": 32,
    # SQLite files the web, the API and the admin may register (browser uploads land in the first); commands may
    # name any readable file but the app's own data (agent/services/locations.py).
    "DATA_DIRS": [Path("var") / "uploads"],
    # Browser uploads (agent/services/uploads.py): a SQLite file, a dataset archive (and what it may unpack to),
    # an exemplar set. Larger uploads are refused before anything is stored.
    "UPLOAD_MAX_DATABASE_BYTES": 1024 * 1024 * 1024,
    "UPLOAD_MAX_DATASET_BYTES": 2 * 1024 * 1024 * 1024,
    "UPLOAD_MAX_EXTRACTED_BYTES": 8 * 1024 * 1024 * 1024,
    "UPLOAD_MAX_EXEMPLAR_BYTES": 20 * 1024 * 1024,
    # An upload that never finished (its request died while storing, its import's worker died, its message was
    # lost) is removed once nothing was written to it for this long: its files, what its import registered, its job
    # (failed jobs too, once this old). Finished imports and registered databases are never touched.
    "UPLOAD_ABANDONED_AFTER_S": 24 * 3600.0,
    # Spend bounds (agent/services/spend.py): session options never exceed these or the endpoint's record.
    "MAX_ROUNDS_CEILING": 30,
    "MAX_TOKENS_CEILING": 4096,  # when the endpoint's record sets none
    # Daily LLM budget per account (prompt + completion tokens, cost in the endpoints' price currency) over the
    # turns of the current UTC day; 0: no limit. An account's UserBudget overrides either.
    "DAILY_TOKEN_BUDGET": 0,
    "DAILY_COST_BUDGET": 0.0,
    # An endpoint's max_concurrency holds across workers (agent/services/llm_slots.py): a call's slot lease lasts
    # LEASE_S and is renewed while the call runs; a call waits at most WAIT_S for a free slot.
    "LLM_SLOT_LEASE_S": 30.0,
    "LLM_SLOT_WAIT_S": 600.0,
    # max_concurrency of the endpoint configured by environment variables (T2S_LLM_BASE_URL...), which has no
    # record to carry one: calls to it across all workers.
    "LLM_MAX_CONCURRENCY": 64,
    # Environment variables an endpoint may read its API key from (shell patterns).
    "API_KEY_ENV_ALLOWED": ["*_API_KEY"],
    # Roles (groups, agent/roles.py) every new account gets.
    "DEFAULT_ROLES": ["Viewer", "Asker"],
    # Sign-in throttling (agent/services/login_throttle.py): this many wrong passwords within the window lock
    # the account, or the address they come from, for LOGIN_LOCKOUT_S (0 switches a limit off).
    "LOGIN_FAILURES_PER_ACCOUNT": 10,
    "LOGIN_FAILURES_PER_ADDRESS": 30,
    "LOGIN_FAILURE_WINDOW_S": 900,
    "LOGIN_LOCKOUT_S": 900,
    # Behind a reverse proxy: the META key of the header it sets with the client's address (e.g. HTTP_X_REAL_IP).
    "CLIENT_ADDRESS_HEADER": "",
    # Key of the encrypted DSN passwords (agent/dsn_secrets.py): Fernet keys, comma separated, else the key file.
    "DSN_KEY": "",
    "DSN_KEY_FILE": Path("var") / "dsn_key",
}


class AppSettings:
    """``app_settings.NAME``: ``settings.T2S["NAME"]`` when set, else the app's default."""

    def __init__(self, defaults: dict[str, Any]) -> None:
        self._defaults = defaults

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._defaults:
            raise AttributeError(f"No setting {name!r}; known: {', '.join(sorted(self._defaults))}")
        return getattr(settings, "T2S", {}).get(name, self._defaults[name])


agent_settings = AppSettings(DEFAULTS)
