from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.urls import reverse

from agent.sql import SchemaInfo

name_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$",
    "Use letters, digits, '_', '.' or '-' (it is used in URLs and on the command line).",
)


def mask_dsn(dsn: str) -> str:
    """The DSN with its password replaced, safe to render in the UI, the API and logs."""
    parts = urlsplit(dsn)
    if parts.password is None:
        # key=value form: hide password=... as well
        return " ".join("password=***" if p.lower().startswith("password=") else p for p in dsn.split())
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username}:***@{host}" if parts.username else f":***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class DatabaseQuerySet(models.QuerySet):
    def ready(self) -> DatabaseQuerySet:
        return self.filter(status=Database.Status.READY)


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
    column_backend = models.CharField(
        max_length=40, default="bm25", help_text="Ranking used by SearchColumn: bm25 (no model) or an embedding backend."
    )

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

    def get_absolute_url(self) -> str:
        return reverse("database_detail", args=[self.name])

    def clean(self) -> None:
        if self.engine == self.Engine.POSTGRESQL and not self.location.startswith(("postgres://", "postgresql://")):
            raise ValidationError({"location": "A PostgreSQL location is a DSN: postgresql://user@host:5432/dbname"})

    @property
    def display_location(self) -> str:
        return mask_dsn(self.location) if self.engine == self.Engine.POSTGRESQL else self.location

    def schema_info(self) -> SchemaInfo | None:
        return SchemaInfo.from_dict(self.schema) if self.schema else None
