from django.contrib import admin

from agent.admin import GrantScopedAdmin, GrantScopedInline, ReadOnlyAdmin
from annotations import policies

from .models import Exemplar, ExemplarSet, ExemplarSetVersion, ExemplarStep


class ExemplarStepInline(admin.TabularInline):
    model = ExemplarStep
    extra = 0
    fields = ("position", "thought", "action", "observation", "ok", "stale")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ExemplarStep)
class ExemplarStepAdmin(GrantScopedAdmin):
    grant_scope = (("exemplar", policies.visible_exemplars),)
    list_display = ("exemplar", "position", "thought", "ok", "stale")
    raw_id_fields = ("exemplar",)


@admin.register(Exemplar)
class ExemplarAdmin(GrantScopedAdmin, ReadOnlyAdmin):
    grant_scope = (("", policies.visible_exemplars),)  # on a visible database, or on none (imported)
    list_display = ("id", "question", "database", "source_database", "state", "author", "reviewer", "updated_at")
    list_filter = ("state", "database")
    search_fields = ("question", "notes", "source")
    inlines = [ExemplarStepInline]

    # View and delete only (ReadOnlyAdmin): edits go through the console, so review rules and stale marks hold.


class VersionInline(GrantScopedInline):
    """A set's versions, each only to whom sees every database it draws on (a set in a workspace is seen by its
    members, who may still miss a database one of its versions draws on)."""

    grant_scope = (("", policies.visible_versions),)
    model = ExemplarSetVersion
    extra = 0
    fields = ("number", "note", "source", "created_by", "created_at")
    readonly_fields = fields
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ExemplarSet)
class ExemplarSetAdmin(GrantScopedAdmin):
    grant_scope = (("", policies.visible_sets),)  # its workspace, or (in none) the databases of its versions
    list_display = ("name", "workspace", "created_by", "created_at")
    list_filter = ("workspace",)
    inlines = [VersionInline]


@admin.register(ExemplarSetVersion)
class ExemplarSetVersionAdmin(GrantScopedAdmin, ReadOnlyAdmin):
    """Read-only: versions are immutable (publish a new one from the set page)."""

    grant_scope = (("", policies.visible_versions),)

    list_display = ("exemplar_set", "number", "note", "created_by", "created_at")
    readonly_fields = ("exemplar_set", "number", "tool_description", "exemplars", "content_hash", "note", "source",
                       "created_by", "created_at")


    def has_delete_permission(self, request, obj=None) -> bool:
        return False

from annotations.experiments import admin as experiments_admin  # noqa: E402, F401 (registers suites and experiments)
from annotations.labels import admin as labels_admin  # noqa: E402, F401 (registers the labels admin)
from annotations.runs import admin as runs_admin  # noqa: E402, F401 (registers datasets and runs)
