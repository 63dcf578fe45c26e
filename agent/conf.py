"""The agent app's own settings, with their defaults here (DRF's ``api_settings`` pattern).

``agent_settings.NAME`` is ``settings.T2S["NAME"]`` when the project sets it (t2s_site/settings.py sets only
what an environment variable overrides, named in the README), else the default below. A callable default is
called on access (paths under the project's ``VAR_DIR``). Read on every access, so ``override_settings`` and
tests that replace ``settings.T2S`` take effect at once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings


def var_path(*parts: str) -> Callable[[], Path]:
    """A default under the project's ``VAR_DIR`` (``T2S_VAR_DIR``), read when the setting is."""
    return lambda: Path(getattr(settings, "VAR_DIR", "var")).joinpath(*parts)


DEFAULTS: dict[str, Any] = {
    # Tool indexes, one folder per registered database.
    "INDEX_DIR": var_path("indexes"),
    # The bundled Chinook database, registered as the demo at setup.
    "DEMO_DATABASE": Path(__file__).resolve().parent / "demo" / "chinook.sqlite",
    # Seconds one query may run on a target database.
    "QUERY_TIMEOUT_S": 10.0,
    # Rows a query returns at most.
    "QUERY_MAX_ROWS": 1000,
    # Base URL of the endpoint used when no LLMEndpoint record is marked default ("": OpenAI's API).
    "LLM_BASE_URL": "",
    # Environment variable holding that endpoint's API key.
    "LLM_API_KEY_ENV": "OPENAI_API_KEY",
    # Model of that endpoint ("": no such endpoint, and no LLM unless a record is marked default).
    "LLM_MODEL": "",
    # Concurrent calls to that endpoint across all workers (a record carries its own max_concurrency).
    "LLM_MAX_CONCURRENCY": 64,
    # Seconds an LLM call waits out a provider outage (connection refused, 429, 5xx) past its retries.
    "LLM_OUTAGE_BUDGET_S": 300.0,
    # Seconds a session may run in all; Celery's threads pool has no time limits, so sessions keep their own.
    "SESSION_MAX_SECONDS": 900,
    # Seconds between a running session's heartbeats (agent/services/leases.py).
    "SESSION_HEARTBEAT_S": 2.0,
    # Seconds without a heartbeat after which a running session's worker counts as dead and it is requeued.
    "SESSION_STALE_AFTER_S": 7.0,
    # Seconds a session may stay QUEUED after its message was published before it is published again (a message
    # lost with the broker is sent again within about this plus a quarter of it; the claim makes a duplicate harmless).
    "SESSION_QUEUED_STALE_AFTER_S": 20.0,
    # Folders of SQLite files the web, API and admin may register; browser uploads land in the first.
    "DATA_DIRS": lambda: [var_path("uploads")()],
    # Largest SQLite file a browser upload may bring.
    "UPLOAD_MAX_DATABASE_BYTES": 1024 * 1024 * 1024,
    # Largest dataset archive a browser upload may bring.
    "UPLOAD_MAX_DATASET_BYTES": 2 * 1024 * 1024 * 1024,
    # Most bytes a dataset archive may unpack to.
    "UPLOAD_MAX_EXTRACTED_BYTES": 8 * 1024 * 1024 * 1024,
    # Largest exemplar-set file a browser upload may bring.
    "UPLOAD_MAX_EXEMPLAR_BYTES": 20 * 1024 * 1024,
    # Seconds without a write after which an unfinished upload and what its import registered are removed.
    "UPLOAD_ABANDONED_AFTER_S": 24 * 3600.0,
    # Highest max_rounds a session's options may ask for.
    "MAX_ROUNDS_CEILING": 30,
    # Highest max_tokens a session's options may ask for when the endpoint's record sets none.
    "MAX_TOKENS_CEILING": 4096,
    # Tokens an account's LLM calls may use per UTC day (0: no limit; an account's UserBudget overrides it). A
    # fresh install is bounded: about forty Interactive-T2S questions with the paper's settings, or a few hundred
    # short ones; raise it per account (User budgets) for whoever runs benchmarks.
    "DAILY_TOKEN_BUDGET": 2_000_000,
    # Cost an account's LLM calls may reach per UTC day, in the endpoints' price currency (0: no limit).
    "DAILY_COST_BUDGET": 0.0,
    # Seconds an endpoint concurrency slot's lease lasts; renewed while its call runs (agent/services/llm_slots.py).
    "LLM_SLOT_LEASE_S": 30.0,
    # Seconds a call waits for a free endpoint slot before it is refused.
    "LLM_SLOT_WAIT_S": 600.0,
    # Environment variables an endpoint may read its API key from (shell patterns).
    "API_KEY_ENV_ALLOWED": ["*_API_KEY"],
    # Roles (groups, agent/roles.py) every new account gets.
    "DEFAULT_ROLES": ["Viewer", "Asker"],
    # Wrong passwords within the window that lock an account (0: no limit).
    "LOGIN_FAILURES_PER_ACCOUNT": 10,
    # Wrong passwords within the window that lock a client address (0: no limit).
    "LOGIN_FAILURES_PER_ADDRESS": 30,
    # Seconds over which wrong passwords are counted.
    "LOGIN_FAILURE_WINDOW_S": 900,
    # Seconds a locked account or address stays locked.
    "LOGIN_LOCKOUT_S": 900,
    # META key of the header a reverse proxy sets with the client's address (e.g. HTTP_X_REAL_IP; "": none).
    "CLIENT_ADDRESS_HEADER": "",
    # Fernet keys of the encrypted DSN passwords, comma separated, the first encrypts ("": the key file).
    "DSN_KEY": "",
    # The DSN key file, created 0600 on first use when DSN_KEY is empty (agent/dsn_secrets.py).
    "DSN_KEY_FILE": var_path("dsn_key"),
}


class AppSettings:
    """``app_settings.NAME``: ``settings.T2S["NAME"]`` when set, else the app's default."""

    def __init__(self, defaults: dict[str, Any]) -> None:
        self._defaults = defaults

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._defaults:
            raise AttributeError(f"No setting {name!r}; known: {', '.join(sorted(self._defaults))}")
        overrides = getattr(settings, "T2S", {})
        if name in overrides:
            return overrides[name]
        default = self._defaults[name]
        return default() if callable(default) else default


agent_settings = AppSettings(DEFAULTS)
