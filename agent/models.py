from __future__ import annotations

import dataclasses
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from agent.dsn_secrets import seal_dsn
from agent.llm import Message
from agent.sql import ForeignKey as SchemaForeignKey
from agent.sql import SchemaInfo
from agent.strategies import TurnRecord

# Every TurnRecord field is a Turn column of the same name, except the messages (stored as ``prompt``,
# the part new since the previous turn, plus ``prompt_prefix_len``). Turn.from_record / to_record, the
# API's TurnSerializer and the tests all derive from this one list.
TURN_RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TurnRecord) if f.name != "messages")
_RECORD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TurnRecord)}

name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$",
    "Use letters, digits, '_', '.' or '-' (it is used in URLs and on the command line).",
)

# A refused name reads the same whether what holds it is something the user may see or not (a database or a
# dataset not granted to them), so a refusal never confirms that an object hidden from them exists.
NAME_UNAVAILABLE = "This name is not available; choose another."


def names_unavailable(names) -> str:
    return (f"These database names are not available: {', '.join(sorted(names))}. Nothing was imported; "
            "rename them or ask a Data admin.")


_SECRET_KEYS = ("password", "sslpassword", "passfile", "sslkey")
# keyword DSNs: password=value, password = 'quoted value with \' escapes', any case
_KEYWORD_SECRET = re.compile(r"(?i)\b(" + "|".join(_SECRET_KEYS) + r")\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def mask_dsn(dsn: str) -> str:
    """The DSN with every password replaced, safe to render in the UI, the API and logs.

    Covers the userinfo (``user:pw@host``), ``password=`` (and ``sslpassword=``...) query parameters of a URL,
    and keyword DSNs (``host=h password='p w'``)."""
    if "://" not in dsn:
        return _KEYWORD_SECRET.sub(lambda m: f"{m.group(1)}=***", dsn)
    try:
        parts = urlsplit(dsn)
        port = parts.port
    except ValueError:  # unparseable: hide everything after the scheme rather than risk showing a password
        return dsn.split("://", 1)[0] + "://***"
    netloc = parts.netloc
    if parts.password is not None or "@" in netloc:
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        if port:
            host = f"{host}:{port}"
        user = parts.username or ""
        netloc = f"{user}:***@{host}" if parts.password is not None else f"{user}@{host}"
    query = "&".join(
        f"{key}=***" if key.lower() in _SECRET_KEYS else (f"{key}={value}" if sep else key)
        for key, sep, value in (item.partition("=") for item in parts.query.split("&") if item))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Workspace(models.Model):
    """A team's shared space: its databases (and the datasets, runs, queues and exemplar sets on them) are
    visible to every member, so sharing 19 databases with a team is one membership, not 19 grants.

    Access to a database is its grants, or membership of its workspace (``agent.policies.visible_databases``).
    What a member may *do* there stays their roles (groups); a membership's role says only whether they manage
    the workspace's members. The ``default`` workspace holds databases registered without one; it has no
    members unless someone adds them.
    """

    DEFAULT = "default"

    slug = models.CharField(max_length=100, unique=True, validators=[name_validator])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("workspace_detail", args=[self.slug])


class WorkspaceMembershipQuerySet(models.QuerySet):
    def of(self, user) -> WorkspaceMembershipQuerySet:
        """The memberships that make ``user`` a member: their own and their groups'."""
        return self.filter(models.Q(user=user) | models.Q(group__in=user.groups.all()))


class WorkspaceMembership(models.Model):
    """One user or one group in a workspace: members see everything in it; admins also manage its members."""

    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        ADMIN = "admin", "Admin (manages members)"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.CASCADE,
                             related_name="workspace_memberships")
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="workspace_memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.MEMBER)
    added_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = WorkspaceMembershipQuerySet.as_manager()

    class Meta:
        ordering = ["workspace", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(user__isnull=False, group__isnull=True)
                           | models.Q(user__isnull=True, group__isnull=False)),
                name="workspace_membership_user_xor_group"),
            models.UniqueConstraint(fields=["workspace", "user"], condition=models.Q(user__isnull=False),
                                    name="unique_workspace_member_user"),
            models.UniqueConstraint(fields=["workspace", "group"], condition=models.Q(group__isnull=False),
                                    name="unique_workspace_member_group"),
            models.CheckConstraint(condition=models.Q(role__in=["member", "admin"]),
                                   name="workspace_membership_role_known"),
        ]

    def __str__(self) -> str:
        return f"{self.user or self.group} in {self.workspace} ({self.role})"


class DatabaseQuerySet(models.QuerySet):
    def ready(self) -> DatabaseQuerySet:
        return self.filter(status=Database.Status.READY)

    def granted_to(self, user) -> DatabaseQuerySet:
        """The databases ``user`` was granted (directly or through a group), those of a workspace they belong to
        (directly or through a group), plus the demo database; none for an inactive or anonymous account or one
        without the read permission. The one rule ``agent.policies`` and the session runner (which may not
        import the policies) both apply: everything built on databases follows from it."""
        if user is None or not (user.is_authenticated and user.is_active and user.has_perm("agent.view_database")):
            return self.none()
        if user.is_superuser:
            return self.all()
        granted = DatabaseGrant.objects.filter(models.Q(user=user) | models.Q(group__in=user.groups.all()))
        granted = granted.values("database_id")
        workspaces = WorkspaceMembership.objects.of(user).values("workspace_id")
        return self.filter(models.Q(is_demo=True) | models.Q(pk__in=granted) | models.Q(workspace__in=workspaces))


class Database(models.Model):
    """A registered target database: what the agent queries, never the app's own database."""

    class Engine(models.TextChoices):
        SQLITE = "sqlite", "SQLite file"
        POSTGRESQL = "postgresql", "PostgreSQL"

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for introspection"
        INTROSPECTING = "introspecting", "Introspecting"
        READY = "ready", "Ready"
        ERROR = "error", "Error"

    class IndexStatus(models.TextChoices):
        NONE = "none", "Not built"
        QUEUED = "queued", "Queued"
        BUILDING = "building", "Building"
        READY = "ready", "Ready"
        STALE = "stale", "Stale (target changed)"
        FAILED = "failed", "Failed"

    name = models.CharField(max_length=100, unique=True, validators=[name_validator])
    engine = models.CharField(max_length=20, choices=Engine.choices)
    location = models.TextField(help_text="Path of a SQLite file, or a PostgreSQL DSN.")
    description = models.TextField(blank=True)
    is_demo = models.BooleanField(default=False)
    workspace = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.PROTECT, related_name="databases",
        help_text="Its members see it (and what is built on it) without a grant of their own.")

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    status_message = models.TextField(blank=True)
    schema = models.JSONField(null=True, blank=True, editable=False)
    schema_fingerprint = models.CharField(max_length=64, blank=True, editable=False)
    introspected_at = models.DateTimeField(null=True, blank=True, editable=False)
    table_count = models.PositiveIntegerField(default=0, editable=False)
    column_count = models.PositiveIntegerField(default=0, editable=False)

    index_status = models.CharField(max_length=20, choices=IndexStatus.choices, default=IndexStatus.NONE)
    index_manifest = models.JSONField(null=True, blank=True, editable=False)
    index_error = models.TextField(blank=True, editable=False)
    column_descriptions = models.JSONField(
        default=dict, blank=True,
        help_text='{"table.column": "description"}: fed to SearchColumn (BIRD imports fill it from database_description).')
    foreign_key_patches = models.JSONField(
        default=list, blank=True,
        help_text="Foreign keys the target does not declare, added to its schema and join graph (a dataset "
                  "patch such as Spider's flight_2): [{table, columns, ref_table, ref_columns, source}].")
    column_backend = models.CharField(
        max_length=40, default="hybrid",
        help_text="Ranking used by SearchColumn: hybrid (MiniLM embeddings fused with BM25, the default), minilm, "
                  "bm25 (no model) or openai (an embeddings endpoint).")

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = DatabaseQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=models.Q(engine__in=["sqlite", "postgresql"]), name="database_engine_known"),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        # A DSN's password never reaches the table in plain text, whoever saves (services, admin, commands).
        if self.engine == self.Engine.POSTGRESQL:
            self.location = seal_dsn(self.location)
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("database_detail", args=[self.name])

    def clean(self) -> None:
        if self.engine == self.Engine.POSTGRESQL and not self.location.startswith(("postgres://", "postgresql://")):
            raise ValidationError({"location": "A PostgreSQL location is a DSN: postgresql://user@host:5432/dbname"})

    @property
    def display_location(self) -> str:
        return mask_dsn(self.location) if self.engine == self.Engine.POSTGRESQL else self.location

    def descriptions(self) -> dict[tuple[str, str], str]:
        return {tuple(key.split(".", 1)): text for key, text in (self.column_descriptions or {}).items()
                if "." in key and text}

    def patched_foreign_keys(self) -> list[SchemaForeignKey]:
        return [SchemaForeignKey.from_dict(d) for d in self.foreign_key_patches or []]

    def schema_info(self) -> SchemaInfo | None:
        return SchemaInfo.from_dict(self.schema) if self.schema else None


def api_key_env_allowed(name: str) -> bool:
    """Whether an endpoint may read its key from the environment variable ``name`` (empty: no key)."""
    import fnmatch

    from agent.conf import agent_settings

    return not name or any(fnmatch.fnmatchcase(name, pattern) for pattern in agent_settings.API_KEY_ENV_ALLOWED)


def check_api_key_env(name: str) -> None:
    """Only variables the settings allow (default ``*_API_KEY``): never, say, the admin password's."""
    from agent.conf import agent_settings

    if not api_key_env_allowed(name):
        patterns = ", ".join(agent_settings.API_KEY_ENV_ALLOWED)
        raise ValidationError({"api_key_env": [
            f"{name} cannot hold an API key: only environment variables named like {patterns} are read "
            "(T2S_API_KEY_ENV_ALLOWED)."]})


class LLMEndpoint(models.Model):
    """An OpenAI-compatible endpoint. The API key is never stored: only the name of the variable holding it."""

    name = models.CharField(max_length=100, unique=True, validators=[name_validator])
    base_url = models.URLField(max_length=500, blank=True, help_text="Empty: api.openai.com.")
    model = models.CharField(max_length=200)
    api_key_env = models.CharField(
        max_length=100, default="OPENAI_API_KEY", blank=True,
        help_text="Name of the environment variable that holds the key (the key itself is never stored).")
    input_price_per_mtok = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True,
                                               help_text="USD per million prompt tokens; empty: cost unknown.")
    output_price_per_mtok = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    max_concurrency = models.PositiveIntegerField(default=8, help_text="Concurrent calls allowed from runs.")
    timeout_s = models.FloatField(default=60.0, validators=[MinValueValidator(0.1)],
                                  help_text="Seconds one HTTP attempt may take before it counts as timed out.")
    max_retries = models.PositiveSmallIntegerField(
        default=3, validators=[MaxValueValidator(10)],
        help_text="Retries after a failed attempt (timeouts, 429, 5xx, garbage bodies); 0: none.")
    max_tokens = models.PositiveIntegerField(
        default=4096, help_text="Ceiling on a call's max_tokens that a session's options may ask for.")
    allowed_models = models.JSONField(
        default=list, blank=True, help_text='Other models a session may choose on this endpoint, e.g. ["gpt-4o"].')
    is_default = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["is_default"], condition=models.Q(is_default=True),
                                    name="one_default_llm_endpoint"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.model})"

    def clean(self) -> None:
        check_api_key_env(self.api_key_env)


class AgentSessionQuerySet(models.QuerySet):
    def active(self) -> AgentSessionQuerySet:
        return self.filter(status__in=AgentSession.ACTIVE)


class AgentSession(models.Model):
    """One question answered by one strategy on one database; its turns are stored as they happen."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        ANSWERED = "answered", "Answered"
        GAVE_UP = "gave_up", "Gave up"
        MAX_ROUNDS = "max_rounds", "Max rounds reached"
        TOKEN_LIMIT = "token_limit", "Token limit reached"
        LLM_ERROR = "llm_error", "LLM error"
        CANCELLED = "cancelled", "Cancelled"
        FAILED = "failed", "Failed"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    database = models.ForeignKey(Database, on_delete=models.PROTECT, related_name="sessions")
    question = models.TextField()
    evidence = models.TextField(blank=True)
    strategy = models.CharField(max_length=50, default="interactive_t2s")
    model = models.CharField(max_length=200, blank=True,
                             help_text="The LLM the session calls (from its config; a column so lists filter on it).")
    config = models.JSONField(default=dict, help_text="Snapshot: strategy config, LLM, exemplar set version, tools.")
    llm_endpoint = models.ForeignKey(LLMEndpoint, null=True, blank=True, on_delete=models.SET_NULL)
    created_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="agent_sessions")
    billed_to = models.ForeignKey(
        "auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="billed_sessions",
        help_text="The account whose daily budget this session's LLM calls count to: who asked, or who launched "
                  "the run it belongs to. Empty: an operator's command (no budget).")

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    final_sql = models.TextField(blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    rounds = models.PositiveIntegerField(default=0)
    tool_calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(null=True, blank=True)
    llm_latency_ms = models.FloatField(default=0)
    tool_latency_ms = models.FloatField(default=0)
    elapsed_ms = models.FloatField(null=True, blank=True)

    cancel_requested = models.BooleanField(default=False)
    lease = models.CharField(max_length=300, blank=True,
                             help_text="The worker running it and a token: '<worker name>#<random>'.")
    attempts = models.PositiveIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True,
                                     help_text="When its task was last published; long QUEUED means the message was lost.")
    waiting_for_llm_since = models.DateTimeField(
        null=True, blank=True, help_text="Set while its LLM call waits out a provider outage (connection refused, "
                                         "429, 5xx) past the endpoint's retries.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    follow_up_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="follow_ups",
        help_text="The session this one continues: its question and answer (and those before it) are in the prompt.")

    objects = AgentSessionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        # The sessions list and /api/sessions/ sort and filter on these; each index ends with the id, the
        # keyset tie-break (agent.keyset), and serves both directions (scanned backwards for descending sorts).
        # The question filter's trigram index is PostgreSQL-only (migration 0018).
        indexes = [
            models.Index(fields=["database", "-created_at"]),
            models.Index(fields=["status", "heartbeat_at"]),
            models.Index(fields=["-created_at", "-id"], name="session_created_idx"),
            models.Index(fields=["status", "-created_at", "-id"], name="session_status_created_idx"),
            models.Index(fields=["strategy", "-created_at", "-id"], name="session_strategy_created_idx"),
            models.Index(fields=["model", "-created_at", "-id"], name="session_model_created_idx"),
            models.Index(fields=["created_by", "-created_at", "-id"], name="session_user_created_idx"),
            models.Index(fields=["rounds", "id"], name="session_rounds_idx"),
            models.Index(models.F("prompt_tokens") + models.F("completion_tokens"), "id", name="session_tokens_idx"),
            models.Index(fields=["cost", "id"], name="session_cost_idx"),
            models.Index(fields=["elapsed_ms", "id"], name="session_latency_idx"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.question[:60]}"

    def get_absolute_url(self) -> str:
        return reverse("session_detail", args=[self.pk])

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class TurnQuerySet(models.QuerySet):
    def for_session(self, session: AgentSession) -> TurnQuerySet:
        return self.filter(session=session).order_by("index")


class Turn(models.Model):
    """One step of a session, committed as soon as it happens.

    ``prompt`` holds only the messages this turn's LLM call added to the previous
    turn's prompt (a ReAct prompt grows by one exchange per round), so a long
    session does not store its system prompt a dozen times; ``agent.services.sessions.session_records``
    rebuilds the exact prompts.
    """

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveIntegerField()
    kind = models.CharField(max_length=30, default="react")
    prompt = models.JSONField(default=list, blank=True)
    prompt_prefix_len = models.PositiveIntegerField(default=0, help_text="Messages reused from the previous turn.")
    completion = models.TextField(null=True, blank=True)  # noqa: DJ001 (None: the LLM call failed)
    thought = models.TextField(blank=True)
    action = models.TextField(blank=True)
    tool = models.CharField(max_length=50, blank=True)
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    observation = models.TextField(null=True, blank=True)  # noqa: DJ001 (None: no action ran)
    tool_ok = models.BooleanField(null=True)
    sql = models.TextField(blank=True)
    result = models.JSONField(null=True, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(null=True, blank=True)
    llm_latency_ms = models.FloatField(null=True, blank=True)
    tool_latency_ms = models.FloatField(null=True, blank=True)
    llm_attempts = models.PositiveIntegerField(default=0)
    model = models.CharField(max_length=200, blank=True)
    finish_reason = models.CharField(max_length=50, blank=True)
    error = models.TextField(blank=True)
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TurnQuerySet.as_manager()

    class Meta:
        ordering = ["session", "index"]
        constraints = [models.UniqueConstraint(fields=["session", "index"], name="unique_turn_index")]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.index} {self.tool or self.kind}"

    @classmethod
    def from_record(cls, record: TurnRecord, *, session_id: int, prompt: list[Message],
                    prompt_prefix_len: int) -> Turn:
        """An unsaved Turn holding ``record`` (JSON-safe; None in a text column is stored as "")."""
        data: dict[str, Any] = record.to_dict()
        values = {}
        for name in TURN_RECORD_FIELDS:
            value = data[name]
            if value is None and not cls._meta.get_field(name).null:
                value = ""
            values[name] = value
        return cls(session_id=session_id, prompt=[m.to_dict() for m in prompt],
                   prompt_prefix_len=prompt_prefix_len, **values)

    def to_record(self, messages: list[Message]) -> TurnRecord:
        """The TurnRecord this turn stores, with its full prompt ``messages`` (rebuilt by the caller)."""
        data: dict[str, Any] = {}
        for name in TURN_RECORD_FIELDS:
            value = getattr(self, name)
            data[name] = None if value == "" and _RECORD_DEFAULTS[name] is None else value
        data["messages"] = [m.to_dict() for m in messages]
        return TurnRecord.from_dict(data)

class ExamplePool(models.Model):
    """Question-SQL pairs that retrieving strategies draw examples from (DART-SQL, SCL-SQL).

    Immutable and content-addressed: a run resolves its pool once (a dataset's gold pairs, an exemplar
    set's final queries, reviewed predictions), stores it here under the digest of its content, and every
    session of the run refers to it by id, so a thousand sessions do not each copy the pool. Each example
    is ``{"key", "question", "sql", "db_id"}``; the key names its origin (``dataset:<id>:<index>``, ...)
    and is what leave-one-out matches.
    """

    source = models.CharField(max_length=300, help_text="What the pool was built from, e.g. 'dataset spider-dev'.")
    digest = models.CharField(max_length=64, unique=True)
    size = models.PositiveIntegerField()
    examples = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.source} ({self.size} examples)"


class DatabaseGrant(models.Model):
    """Access to one database for one user or one group (a role group or any other).

    A database is visible only to those granted it; the demo database is granted to everyone who may read.
    """

    database = models.ForeignKey(Database, on_delete=models.CASCADE, related_name="grants")
    user = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.CASCADE,
                             related_name="database_grants")
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.CASCADE,
                              related_name="database_grants")
    granted_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["database", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(user__isnull=False, group__isnull=True)
                           | models.Q(user__isnull=True, group__isnull=False)),
                name="database_grant_user_xor_group"),
            models.UniqueConstraint(fields=["database", "user"], condition=models.Q(user__isnull=False),
                                    name="unique_database_grant_user"),
            models.UniqueConstraint(fields=["database", "group"], condition=models.Q(group__isnull=False),
                                    name="unique_database_grant_group"),
        ]

    def __str__(self) -> str:
        return f"{self.database} → {self.user or self.group}"


class UserBudget(models.Model):
    """One account's own daily LLM budget, instead of the settings' defaults (``agent/services/budgets.py``).

    A field left empty takes the default (``T2S_DAILY_TOKEN_BUDGET`` / ``T2S_DAILY_COST_BUDGET``); 0 means no
    limit for this account.
    """

    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="llm_budget")
    tokens_per_day = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Prompt + completion tokens per UTC day. Empty: the default; 0: no limit.")
    cost_per_day = models.DecimalField(
        max_digits=12, decimal_places=4, null=True, blank=True,
        validators=[MinValueValidator(0)],
        help_text="Cost per UTC day, in the endpoints' price currency. Empty: the default; 0: no limit.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["user__username"]

    def __str__(self) -> str:
        return f"budget of {self.user}"


class ImportJob(models.Model):
    """An upload being imported on a worker (a dataset archive): what the progress bar polls.

    The import services report ``progress(done, total)``; the task writes it here, so the page shows it with any
    broker and no Celery result backend. ``result_url`` is where the finished import lives.
    """

    class Kind(models.TextChoices):
        DATASET = "dataset", "dataset"

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "importing"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    kind = models.CharField(max_length=20, choices=Kind.choices)
    name = models.CharField(max_length=200, help_text="What is being imported, e.g. the new dataset's name.")
    params = models.JSONField(default=dict, blank=True)
    staging = models.TextField(blank=True, help_text="Folder holding the uploaded files until the import ends.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    stage = models.CharField(max_length=200, blank=True, help_text="What the import is doing now.")
    done = models.PositiveBigIntegerField(default=0)
    total = models.PositiveBigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    result_url = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey("auth.User", null=True, on_delete=models.SET_NULL, related_name="import_jobs")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(
        default=timezone.now, help_text="Last written (progress included): an unfinished job silent for "
                                        "UPLOAD_ABANDONED_AFTER_S was abandoned, and is cleaned up.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=models.Q(status__in=["queued", "running", "done", "failed"]),
                                   name="import_job_status_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.name} ({self.get_status_display()})"

    def get_absolute_url(self) -> str:
        return reverse("import_job", args=[self.pk])

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    @property
    def percent(self) -> int | None:
        if not self.total:
            return None
        return min(100, round(100 * self.done / self.total))


class AskPreference(models.Model):
    """What an account last chose on Ask, so the page opens on the same database and strategy (kept on the
    server, so it follows the account across browsers; changed only by the account's own asking)."""

    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="ask_preference")
    database = models.ForeignKey(Database, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    strategy = models.CharField(max_length=50, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Ask preference of {self.user}"


class LLMCallLease(models.Model):
    """One LLM call in flight on an endpoint, when the app database holds the concurrency slots (embedded mode).

    At most one row per (endpoint, slot), so at most ``max_concurrency`` calls hold a slot; a holder renews
    ``expires_at`` while its call runs, and a row past it belongs to a process that died and is taken over.
    """

    endpoint = models.CharField(max_length=100)
    slot = models.PositiveIntegerField()
    token = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    acquired_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["endpoint", "slot"], name="unique_llm_call_slot")]

    def __str__(self) -> str:
        return f"{self.endpoint} slot {self.slot}"


class AuditEntry(models.Model):
    """Who did what to access or spend: databases, LLM endpoints, grants, budgets, roles, runs (``agent/audit.py``).

    Written only by the audit recorder, never changed: the admin and the page list them read-only.
    """

    class Action(models.TextChoices):
        DATABASE_REGISTER = "database.register", "registered a database"
        DATABASE_CHANGE = "database.change", "changed a database"
        DATABASE_DELETE = "database.delete", "deleted a database"
        ENDPOINT_CREATE = "endpoint.create", "added an LLM endpoint"
        ENDPOINT_CHANGE = "endpoint.change", "changed an LLM endpoint"
        ENDPOINT_DELETE = "endpoint.delete", "deleted an LLM endpoint"
        GRANT = "access.grant", "granted access to a database"
        REVOKE = "access.revoke", "revoked access to a database"
        BUDGET_CHANGE = "budget.change", "changed an account's budget"
        ROLE_ADD = "role.add", "added an account to a role or group"
        ROLE_REMOVE = "role.remove", "removed an account from a role or group"
        ROLE_PERMISSIONS = "role.permissions", "changed a role's or group's permissions"
        ACCOUNT_FLAGS = "account.flags", "changed an account's staff, superuser or active flag"
        RUN_LAUNCH = "run.launch", "launched a run"
        RUN_RESUME = "run.resume", "resumed a run"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="audit_entries")
    actor_name = models.CharField(max_length=150, blank=True,
                                  help_text="The actor's username when it acted (kept if the account goes).")
    via = models.CharField(max_length=20, blank=True, help_text="web, api, admin, command or worker.")
    action = models.CharField(max_length=40, choices=Action.choices)
    target_type = models.CharField(max_length=40)
    target_id = models.CharField(max_length=64, blank=True)
    target = models.CharField(max_length=300, help_text="What it was done to, as it was named then.")
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["action", "-created_at"]), models.Index(fields=["actor", "-created_at"]),
                   models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        when = f"{self.created_at:%Y-%m-%d %H:%M} " if self.created_at else ""
        return f"{when}{self.actor_name or 'system'} {self.action} {self.target}"


class AnswerFeedback(models.Model):
    """A person's verdict on a session's answer: right or wrong, optionally with the SQL that would be right.

    One per session and author (a change replaces it). A corrected query is kept only once it ran read-only
    (through the connector's guard, which refuses what it cannot check), with its first rows."""

    class Verdict(models.TextChoices):
        RIGHT = "right", "Right"
        WRONG = "wrong", "Wrong"

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="feedback")
    author = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="answer_feedback")
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    corrected_sql = models.TextField(blank=True)
    corrected_preview = models.JSONField(null=True, blank=True, help_text="The corrected query's first rows.")
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["session", "-updated_at"]
        constraints = [
            models.UniqueConstraint(fields=["session", "author"], name="unique_answer_feedback_per_author"),
            models.CheckConstraint(condition=models.Q(verdict__in=["right", "wrong"]),
                                   name="answer_feedback_verdict_valid"),
        ]

    def __str__(self) -> str:
        return f"session {self.session_id}: {self.verdict} by {self.author}"
