"""Settings for t2s-studio, read from the environment with local defaults.

Embedded mode (no variables set): SQLite for the app's own database under
``var/`` and a Celery broker on a SQLite file (kombu's SQLAlchemy transport).
Service mode: ``DATABASE_URL=postgres://...`` and ``CELERY_BROKER_URL=redis://...``.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

from t2s_site.varfiles import make_private, read_or_create_secret

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("T2S_VAR_DIR", BASE_DIR / "var"))
# From here on this process creates files 0600 and directories 0700; var/ is tightened (t2s_site/varfiles.py).
make_private(VAR_DIR)
(VAR_DIR / "uploads").mkdir(exist_ok=True)
(VAR_DIR / "scratch").mkdir(mode=0o700, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


def _secret_key() -> str:
    """From SECRET_KEY, else generated once into an ignored local file."""
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    return read_or_create_secret(VAR_DIR / "secret_key").decode()


# --- core ---------------------------------------------------------------------
SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "agent",
    "annotations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "t2s_site.security.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "agent.middleware.RoleRequiredMiddleware",
    "agent.middleware.AuditContextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "t2s_site.urls"
WSGI_APPLICATION = "t2s_site.wsgi.application"
ASGI_APPLICATION = "t2s_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "t2s_site.context_processors.studio",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'app.sqlite3'}"),
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, so that a Celery worker started by a test sees the test database;
    # one per test process, so two test runs in the same tree do not share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-app-{os.getpid()}.sqlite3")}
    # Web server and worker write concurrently: WAL and a busy timeout avoid "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        # IMMEDIATE: a transaction takes the write lock up front and waits for it, instead of failing with
        # "database is locked" when it upgrades from reading to writing while the other process writes.
        {"timeout": 20, "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
         "transaction_mode": "IMMEDIATE"}
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- auth and security ------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# The backend refuses a locked account or address (wrong passwords counted in agent/services/login_throttle.py).
AUTHENTICATION_BACKENDS = ["agent.auth.ThrottledModelBackend"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# Production profile: one switch, T2S_PRODUCTION=1, for a site served over HTTPS (README, "Security and
# production"); `manage.py check --deploy` is clean with it (tests/t2s_site/test_production_profile.py).
PRODUCTION = env_bool("T2S_PRODUCTION", False)
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", PRODUCTION)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("T2S_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = int(os.environ.get("T2S_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("T2S_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("T2S_HSTS_PRELOAD", True)
    SECURE_REFERRER_POLICY = "same-origin"
    SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
    SESSION_COOKIE_SAMESITE = "Lax"
    CSRF_COOKIE_SAMESITE = "Lax"
    if env_bool("T2S_BEHIND_TLS_PROXY", False):
        # The proxy terminates TLS and says so in this header; without it every request looks like plain HTTP
        # and SSL redirect would loop. Set only when the proxy always sets (or strips) the header.
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Scripts only from our origin, never inline (templates load static/js/*.js); style attributes stay allowed, <style>
# elements do not (htmx's indicator style is off by a meta tag and shipped in studio.css). Pico's icons are data: SVGs.
CONTENT_SECURITY_POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "style-src-attr": ["'unsafe-inline'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'", "data:"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
}
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
# Uploads over the memory size are spooled here while the request reads them; a request killed mid-way leaves its
# file, which the periodic sweep of abandoned uploads removes (agent.services.uploads.scratch_sweep).
FILE_UPLOAD_TEMP_DIR = str(VAR_DIR / "scratch")
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700

# --- cache: sign-in throttling and API rate limits count here, so every web process must share it ----------
_CACHE_URL = os.environ.get("CACHE_URL", "")
if _CACHE_URL.startswith(("redis://", "rediss://")):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _CACHE_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": str(VAR_DIR / "cache"), "OPTIONS": {"MAX_ENTRIES": 20000}}}

# --- i18n and static files --------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# --- API --------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    # Signed in, with a role; each view's writes ask agent.policies / annotations.policies (see agent.api).
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated", "agent.api_permissions.PolicyPermission"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    # Per signed-in user (per address when anonymous); rates are "N/second|minute|hour|day".
    "DEFAULT_THROTTLE_CLASSES": ["agent.api_throttles.UserRateThrottle", "agent.api_throttles.AnonRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "user": os.environ.get("T2S_API_RATE_USER", "600/minute"),
        "anon": os.environ.get("T2S_API_RATE_ANON", "60/minute"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "t2s-studio API",
    "DESCRIPTION": "Text-to-SQL agents: databases, sessions, exemplars, runs and labels.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its docs page are behind login like every page (they map the whole API).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated", "agent.api_permissions.PolicyPermission"],
    # Swagger UI's assets come from the vendored sidecar package, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Several models have a "status" (or "kind") field with its own choices: one named enum each.
    "ENUM_NAME_OVERRIDES": {
        "DatabaseStatusEnum": "agent.models.Database.Status",
        "SessionStatusEnum": "agent.models.AgentSession.Status",
        "ImportJobStatusEnum": "agent.models.ImportJob.Status",
        "ImportJobKindEnum": "agent.models.ImportJob.Kind",
        "DatasetKindEnum": "annotations.runs.models.Dataset.Kind",
        "RunStatusEnum": "annotations.runs.models.Run.Status",
        "RunSourceEnum": "annotations.runs.models.Run.Source",
        "MissingPredictionsEnum": "annotations.runs.models.MissingPredictions",
        "CandidateStateEnum": "annotations.experiments.models.Candidate.State",
        "ExemplarStateEnum": "annotations.models.Exemplar.State",
    },
}

# --- Celery -----------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", f"sqla+sqlite:///{VAR_DIR / 'celery-broker.sqlite'}")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = int(os.environ.get("CELERY_TASK_SOFT_TIME_LIMIT", "1800"))
CELERY_TASK_TIME_LIMIT = CELERY_TASK_SOFT_TIME_LIMIT + 60
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker's thread (prefork child, solo worker) keeps its app-database connection from one task to the next
# for this many seconds, checked before use (t2s_site/celery.py); 0: a new connection for every task. Opening
# one was half of a session's claim on PostgreSQL. Web processes keep DB_CONN_MAX_AGE.
WORKER_DB_CONN_MAX_AGE = int(os.environ.get("T2S_WORKER_DB_CONN_MAX_AGE", "300"))
if WORKER_DB_CONN_MAX_AGE:
    # Celery's Django fixup closes every connection around every task unless this is set; it only counts
    # tasks, so it is set out of reach and our own handlers close by age or after an error instead.
    CELERY_DB_REUSE_MAX = 2**62
CELERY_BEAT_SCHEDULE = {
    "recover-stale-sessions": {"task": "agent.tasks.recover_stale_sessions", "schedule": 60.0},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Longer than the longest task, or an unacknowledged task is redelivered while still running.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT + 600}

# --- t2s-studio's own settings: their defaults are in agent/conf.py and annotations/conf.py; these are the
# environment variables that override them (the README names each), read only when set and not empty.
def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _paths(value: str) -> list[Path]:
    return [Path(part) for part in value.split(os.pathsep) if part]


def _megabytes(value: str) -> int:
    return int(value) * 1024 * 1024


def _hours_as_seconds(value: str) -> float:
    return float(value) * 3600


_T2S_FROM_ENV = {
    "INDEX_DIR": ("T2S_INDEX_DIR", Path),
    "GOLD_CACHE_DIR": ("T2S_GOLD_CACHE_DIR", Path),
    "DISPATCH_POLL_S": ("T2S_DISPATCH_POLL_S", float),
    "DATA_DIRS": ("T2S_DATA_DIRS", _paths),
    "UPLOAD_MAX_DATABASE_BYTES": ("T2S_UPLOAD_MAX_DATABASE_MB", _megabytes),
    "UPLOAD_MAX_DATASET_BYTES": ("T2S_UPLOAD_MAX_DATASET_MB", _megabytes),
    "UPLOAD_ABANDONED_AFTER_S": ("T2S_UPLOAD_ABANDONED_AFTER_H", _hours_as_seconds),
    "QUERY_TIMEOUT_S": ("T2S_QUERY_TIMEOUT_S", float),
    "QUERY_MAX_ROWS": ("T2S_QUERY_MAX_ROWS", int),
    "LLM_BASE_URL": ("OPENAI_BASE_URL", str),
    "LLM_MODEL": ("T2S_LLM_MODEL", str),
    "LLM_MAX_CONCURRENCY": ("T2S_LLM_MAX_CONCURRENCY", int),
    "LLM_OUTAGE_BUDGET_S": ("T2S_LLM_OUTAGE_BUDGET_S", float),
    "SESSION_MAX_SECONDS": ("T2S_SESSION_MAX_SECONDS", int),
    "SESSION_HEARTBEAT_S": ("T2S_SESSION_HEARTBEAT_S", float),
    "SESSION_STALE_AFTER_S": ("T2S_SESSION_STALE_AFTER_S", float),
    "SESSION_QUEUED_STALE_AFTER_S": ("T2S_SESSION_QUEUED_STALE_AFTER_S", float),
    "MAX_ROUNDS_CEILING": ("T2S_MAX_ROUNDS_CEILING", int),
    "DAILY_TOKEN_BUDGET": ("T2S_DAILY_TOKEN_BUDGET", int),
    "DAILY_COST_BUDGET": ("T2S_DAILY_COST_BUDGET", float),
    "LLM_SLOT_LEASE_S": ("T2S_LLM_SLOT_LEASE_S", float),
    "LLM_SLOT_WAIT_S": ("T2S_LLM_SLOT_WAIT_S", float),
    "API_KEY_ENV_ALLOWED": ("T2S_API_KEY_ENV_ALLOWED", _csv),
    "DEFAULT_ROLES": ("T2S_DEFAULT_ROLES", _csv),
    "LOGIN_FAILURES_PER_ACCOUNT": ("T2S_LOGIN_FAILURES_PER_ACCOUNT", int),
    "LOGIN_FAILURES_PER_ADDRESS": ("T2S_LOGIN_FAILURES_PER_ADDRESS", int),
    "LOGIN_FAILURE_WINDOW_S": ("T2S_LOGIN_FAILURE_WINDOW_S", float),
    "LOGIN_LOCKOUT_S": ("T2S_LOGIN_LOCKOUT_S", float),
    "CLIENT_ADDRESS_HEADER": ("T2S_CLIENT_ADDRESS_HEADER", str),
    "DSN_KEY": ("T2S_DSN_KEY", str),
    "DSN_KEY_FILE": ("T2S_DSN_KEY_FILE", Path),
}
T2S = {key: cast(os.environ[name]) for key, (name, cast) in _T2S_FROM_ENV.items() if os.environ.get(name)}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # httpx (the openai SDK's HTTP client) logs a line per request at INFO.
    "loggers": {"django.db.backends": {"level": "INFO"}, "httpx": {"level": "WARNING"}},
}
