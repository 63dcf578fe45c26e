from collections.abc import Callable

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import get_fields_from_path
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured, ValidationError
from django.db.models import QuerySet

from agent import policies, services
from agent.models import (
    AgentSession,
    AnswerFeedback,
    AskPreference,
    AuditEntry,
    Database,
    DatabaseGrant,
    ExamplePool,
    ImportJob,
    LLMCallLease,
    LLMEndpoint,
    Turn,
    UserBudget,
    Workspace,
    WorkspaceMembership,
)


class DatabaseAdminForm(forms.ModelForm):
    """The admin's fields (ModelAdmin supplies them), with the location checked as the registration service does
    for the web: SQLite files only from a data directory (agent/services/locations.py)."""

    def clean(self):
        data = super().clean()
        location = data.get("location")
        if location:  # absent when the stored DSN is hidden from the form
            try:
                data["location"] = services.normalise_location(
                    data.get("engine") or services.engine_for_location(location), location)
            except ValidationError as exc:
                self.add_error("location", exc.messages)
        return data


class GrantScoped:
    """The admin's side of "Who sees what": a non-superuser sees (in lists, change, delete and history pages,
    autocompletes, raw-id pop-ups and inlines) only the rows the app would show them. Each admin declares how:

    - ``grant_lookup``: the path from the row to its ``Database`` (``"database"``, ``"session__database"``; ``""``
      when the row is a database), scoped by ``policies.visible_databases`` (``Database.objects.granted_to``);
    - ``grant_scope``: ``(lookup, visible)`` pairs, ``visible(user)`` being the app's own selector for what the
      lookup reaches (``""`` = the row itself), e.g. ``("run", visible_runs)``; every pair must hold.

    Superusers see everything, as ``granted_to`` gives them every database."""

    grant_lookup: str | None = None
    grant_scope: tuple[tuple[str, Callable[..., QuerySet]], ...] = ()

    def grant_scopes(self) -> list[tuple[str, Callable[..., QuerySet]]]:
        scopes = list(self.grant_scope)
        if self.grant_lookup is not None:
            scopes.append((self.grant_lookup, policies.visible_databases))
        if not scopes:
            raise ImproperlyConfigured(f"{type(self).__name__} declares neither grant_lookup nor grant_scope.")
        return scopes

    def scope_rows(self, request, queryset: QuerySet) -> QuerySet:
        """``queryset`` as ``request.user`` may see it (subclasses add the app's further rules)."""
        for lookup, visible in self.grant_scopes():
            # Read as a list of ids, not nested as a subquery: the app's selectors are subqueries already, and
            # SQLite (the embedded default) refuses a statement nested this deep ("parser stack overflow").
            allowed = list(visible(request.user).values_list("pk", flat=True))
            queryset = queryset.filter(**{f"{lookup}__in" if lookup else "pk__in": allowed})
        return queryset

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        return queryset if request.user.is_superuser else self.scope_rows(request, queryset)

    def _related_scope(self, request, db_field, kwargs):
        # A select of related rows (a run's dataset, a grant's database) lists only those the account sees.
        related = self.admin_site._registry.get(db_field.remote_field.model)
        if not request.user.is_superuser and "queryset" not in kwargs and isinstance(related, GrantScoped):
            kwargs["queryset"] = related.get_queryset(request)
        return kwargs

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        return super().formfield_for_foreignkey(db_field, request, **self._related_scope(request, db_field, kwargs))

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        return super().formfield_for_manytomany(db_field, request, **self._related_scope(request, db_field, kwargs))


class GrantScopedAdmin(GrantScoped, admin.ModelAdmin):
    """A ModelAdmin scoped by ``GrantScoped``; its list filters on a relation (``"database"``, ``"run"``) offer
    a non-superuser only the related rows of the rows they see, never every database's name."""

    def get_list_filter(self, request):
        filters = super().get_list_filter(request)
        if request.user.is_superuser:
            return filters
        return [self._scoped_filter(f) for f in filters]

    def _scoped_filter(self, spec):
        if not isinstance(spec, str):
            return spec  # a filter class or (field, class) pair: it chooses its own choices
        try:
            field = get_fields_from_path(self.model, spec)[-1]
        except FieldDoesNotExist:
            return spec
        return (spec, admin.RelatedOnlyFieldListFilter) if field.is_relation else spec


class GrantScopedInline(GrantScoped, admin.TabularInline):
    """An inline whose rows follow their own rule rather than their parent's (a set's versions)."""


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by the app or by services (audit entries, pools, exemplars, import progress, call slots):
    shown, never added or edited here."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class DatabaseGrantInline(admin.TabularInline):
    model = DatabaseGrant
    fk_name = "database"
    extra = 0
    fields = ("user", "group", "granted_by", "created_at")
    readonly_fields = ("granted_by", "created_at")
    autocomplete_fields = ("user", "group")


@admin.register(DatabaseGrant)
class DatabaseGrantAdmin(GrantScopedAdmin):
    grant_lookup = "database"
    list_display = ("database", "user", "group", "granted_by", "created_at")
    list_filter = ("database", "group")
    autocomplete_fields = ("user", "group")
    readonly_fields = ("granted_by", "created_at")

    def save_model(self, request, obj, form, change):
        if obj.granted_by_id is None:
            obj.granted_by = request.user
        super().save_model(request, obj, form, change)


class WorkspaceMembershipInline(admin.TabularInline):
    model = WorkspaceMembership
    fk_name = "workspace"
    extra = 0
    fields = ("user", "group", "role", "added_by", "created_at")
    readonly_fields = ("added_by", "created_at")


@admin.register(Workspace)
class WorkspaceAdmin(GrantScopedAdmin):
    """Members are managed on the workspace's own page too; changes here are audited the same way."""

    grant_scope = (("", policies.member_workspaces),)

    inlines = [WorkspaceMembershipInline]
    list_display = ("slug", "name", "created_by", "created_at")
    search_fields = ("slug", "name")
    readonly_fields = ("created_by", "created_at")


@admin.register(WorkspaceMembership)
class WorkspaceMembershipAdmin(GrantScopedAdmin):
    grant_scope = (("workspace", policies.member_workspaces),)
    list_display = ("workspace", "user", "group", "role", "added_by", "created_at")
    list_filter = ("workspace", "role")
    readonly_fields = ("added_by", "created_at")


@admin.register(Database)
class DatabaseAdmin(GrantScopedAdmin):
    grant_lookup = ""
    form = DatabaseAdminForm
    inlines = [DatabaseGrantInline]
    list_display = ("name", "engine", "display_location", "status", "index_status", "table_count", "updated_at")
    list_filter = ("engine", "status", "index_status", "is_demo")
    search_fields = ("name", "description")
    readonly_fields = ("status", "status_message", "schema_fingerprint", "introspected_at", "table_count",
                       "column_count", "index_status", "index_error", "created_at", "updated_at")

    def get_fields(self, request, obj=None):
        fields = super().get_fields(request, obj)
        # Never render a stored DSN (it may hold a password) back into an edit form.
        if obj is not None and obj.engine == Database.Engine.POSTGRESQL:
            fields = [f for f in fields if f != "location"] + ["display_location"]
        return fields

    def get_readonly_fields(self, request, obj=None):
        extra = ("display_location",) if obj is not None and obj.engine == Database.Engine.POSTGRESQL else ()
        return self.readonly_fields + extra

    def save_model(self, request, obj, form, change):
        # Through the registration service: a new source is re-introspected and re-indexed after commit.
        services.database_save(database=obj, changed=form.changed_data)


@admin.register(LLMEndpoint)
class LLMEndpointAdmin(admin.ModelAdmin):
    list_display = ("name", "model", "base_url", "api_key_env", "is_default", "max_concurrency")
    list_filter = ("is_default",)


class TurnInline(admin.TabularInline):
    """The session's turns, read-only (its parent is scoped: they are on the session's database)."""

    model = Turn
    extra = 0
    can_delete = False
    fields = ("index", "kind", "tool", "action", "tool_ok", "prompt_tokens", "completion_tokens", "error")
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class RecordAdmin(GrantScopedAdmin):
    """Records written only by services, scoped like the rest: shown, never added, edited or deleted here."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class SessionRecordAdmin(RecordAdmin):
    """Sessions and their turns are written only by services (``session_create``, the runner). An edit would
    bypass the checks (a finished session set back to queued is published by the sweep unchecked; a rewritten
    turn falsifies the record), and nothing in the app deletes a session (runs' items, feedback and a worker's
    lease point at it; its database PROTECTs it)."""


class PromptHidingAdmin(admin.ModelAdmin):
    """Leaves out ``prompt_field`` (text of exemplars from other databases) when the session's prompt is hidden
    from the admin user (``policies.can_see_session_prompt``), and says so in its place."""

    prompt_field = ""

    def _session(self, obj):
        return obj

    def _hidden(self, request, obj) -> bool:
        return obj is not None and not policies.can_see_session_prompt(request.user, self._session(obj))

    def get_exclude(self, request, obj=None):
        excluded = list(super().get_exclude(request, obj) or ())
        return [*excluded, self.prompt_field] if self._hidden(request, obj) else excluded

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        return (*fields, "prompt_hidden") if self._hidden(request, obj) else fields

    @admin.display(description="Prompt")
    def prompt_hidden(self, obj) -> str:
        return policies.PROMPT_HIDDEN_NOTE


@admin.register(AgentSession)
class AgentSessionAdmin(SessionRecordAdmin, PromptHidingAdmin):
    grant_lookup = "database"
    list_display = ("id", "question", "database", "strategy", "status", "rounds", "created_by", "created_at")
    list_filter = ("status", "strategy", "database")
    search_fields = ("question", "final_sql")
    readonly_fields = ("lease", "attempts", "heartbeat_at", "queued_at", "started_at", "finished_at", "created_at")
    inlines = [TurnInline]
    prompt_field = "config"  # its few_shot snapshot holds the exemplars' text
    # No add (SessionRecordAdmin): a session starts through session_create (or a run), which checks its strategy,
    # options, pool and budget; a row added here would be queued unchecked, and the sweep publishes queued rows.


@admin.register(Turn)
class TurnAdmin(SessionRecordAdmin, PromptHidingAdmin):
    grant_lookup = "session__database"
    list_display = ("session", "index", "kind", "tool", "tool_ok", "prompt_tokens", "completion_tokens")
    list_filter = ("kind", "tool", "tool_ok")
    raw_id_fields = ("session",)
    prompt_field = "prompt"

    def _session(self, obj):
        return obj.session


@admin.register(ExamplePool)
class ExamplePoolAdmin(GrantScopedAdmin, ReadOnlyAdmin):
    """Pools are content-addressed and shared by the sessions of a run: read-only here. Shown to whom sees every
    database their examples came from (``policies.visible_pools``)."""

    grant_scope = (("", policies.visible_pools),)

    list_display = ("id", "source", "size", "created_at")
    search_fields = ("source", "digest")
    readonly_fields = ("source", "digest", "size", "examples", "created_at")



@admin.register(UserBudget)
class UserBudgetAdmin(admin.ModelAdmin):
    """An account's own daily LLM budget; empty fields take the defaults (T2S_DAILY_*_BUDGET), 0 is no limit."""

    list_display = ("user", "tokens_per_day", "cost_per_day", "updated_at")
    search_fields = ("user__username",)
    autocomplete_fields = ("user",)


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """Read-only: entries are written by the audit recorder (agent/services/audit.py), never by hand."""

    list_display = ("created_at", "actor_name", "via", "action", "target_type", "target")
    list_filter = ("action", "target_type", "via")
    search_fields = ("actor_name", "target")
    date_hierarchy = "created_at"


    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ImportJob)
class ImportJobAdmin(GrantScopedAdmin, ReadOnlyAdmin):
    grant_scope = (("", policies.visible_import_jobs),)  # the uploader's own, as on the progress page
    list_display = ("created_at", "kind", "name", "status", "done", "total", "created_by")
    list_filter = ("kind", "status")
    search_fields = ("name",)


@admin.register(AnswerFeedback)
class AnswerFeedbackAdmin(GrantScopedAdmin, ReadOnlyAdmin):
    """Verdicts are given on the session pages (a corrected query must run read-only there first): read-only here."""

    grant_lookup = "session__database"

    list_display = ("session", "author", "verdict", "updated_at")
    list_filter = ("verdict",)
    raw_id_fields = ("session",)


@admin.register(AskPreference)
class AskPreferenceAdmin(GrantScopedAdmin, ReadOnlyAdmin):
    grant_lookup = "database"
    list_display = ("user", "database", "strategy", "updated_at")


@admin.register(LLMCallLease)
class LLMCallLeaseAdmin(ReadOnlyAdmin):
    """A slot of an endpoint's max_concurrency held by a call in flight; an expired one is free to take."""

    list_display = ("endpoint", "slot", "acquired_at", "expires_at")
    list_filter = ("endpoint",)
