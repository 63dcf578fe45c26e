from django.contrib import admin

from agent.admin import GrantScopedAdmin
from annotations import policies
from annotations.labels.version import labels_changed
from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem


class FailuresChangedAdmin(GrantScopedAdmin):
    """An item's decision or a question's database, difficulty or joins edited here changes which questions are
    failures a queue holds, which cached label counts read (annotations.labels.version); deletes reach it through
    the items' post_delete."""

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        labels_changed()


@admin.register(Dataset)
class DatasetAdmin(GrantScopedAdmin):
    grant_scope = (("", policies.visible_datasets),)
    list_display = ("name", "kind", "question_count", "executable_count", "updated_at")
    list_filter = ("kind",)
    search_fields = ("name", "source_path")


@admin.register(DatasetQuestion)
class DatasetQuestionAdmin(FailuresChangedAdmin):
    grant_scope = (("dataset", policies.visible_datasets),)
    list_display = ("dataset", "index", "db_id", "difficulty", "table_count", "question")
    list_filter = ("dataset", "difficulty", "table_count")
    search_fields = ("question", "gold_sql", "db_id")
    raw_id_fields = ("database",)


class RunItemInline(admin.TabularInline):
    model = RunItem
    extra = 0
    can_delete = False
    fields = ("question", "eval_status", "ex", "soft_f1", "predicted_sql")
    readonly_fields = fields
    show_change_link = True
    max_num = 0


@admin.register(Run)
class RunAdmin(GrantScopedAdmin):
    grant_scope = (("", policies.visible_runs),)
    list_display = ("id", "name", "dataset", "source", "strategy", "status", "created_by", "created_at")
    list_filter = ("source", "status", "strategy", "dataset")
    search_fields = ("name",)
    readonly_fields = ("totals", "breakdowns", "import_issues", "evaluated_at", "created_at")


@admin.register(RunItem)
class RunItemAdmin(FailuresChangedAdmin):
    grant_scope = (("run", policies.visible_runs),)
    list_display = ("run", "question", "eval_status", "ex", "soft_f1")
    list_filter = ("eval_status", "ex", "run")
    raw_id_fields = ("run", "question", "session")
