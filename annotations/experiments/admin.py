"""Experiments in the admin: read-only, because suites' versions, candidate snapshots and experiments are
records a verdict was computed from; they are made and changed through the app's pages, API and commands."""

from django.contrib import admin
from django.db.models import Q

from agent.admin import RecordAdmin
from annotations import policies
from annotations.experiments.models import (
    Candidate,
    CandidateItem,
    CandidateSnapshot,
    ExemplarOrigin,
    Experiment,
    ExperimentRun,
    Suite,
    SuiteQuestion,
    SuiteVersion,
)


@admin.register(Suite)
class SuiteAdmin(RecordAdmin):
    grant_scope = (("", policies.visible_suites),)
    list_display = ("name", "dataset", "created_by", "created_at")
    search_fields = ("name",)


@admin.register(SuiteVersion)
class SuiteVersionAdmin(RecordAdmin):
    grant_scope = (("suite", policies.visible_suites),)
    list_display = ("suite", "number", "question_count", "created_by", "created_at")
    list_filter = ("suite",)


@admin.register(SuiteQuestion)
class SuiteQuestionAdmin(RecordAdmin):
    grant_scope = (("version__suite", policies.visible_suites),)
    list_display = ("version", "position", "question")
    raw_id_fields = ("version", "question")


@admin.register(Candidate)
class CandidateAdmin(RecordAdmin):
    grant_scope = (("", policies.visible_candidates),)
    list_display = ("exemplar_set", "number", "title", "state", "created_by", "updated_at")
    list_filter = ("state", "exemplar_set")


@admin.register(CandidateItem)
class CandidateItemAdmin(RecordAdmin):
    grant_scope = (("candidate", policies.visible_candidates),)
    list_display = ("candidate", "position", "exemplar")
    raw_id_fields = ("candidate", "exemplar")


@admin.register(CandidateSnapshot)
class CandidateSnapshotAdmin(RecordAdmin):
    grant_scope = (("candidate", policies.visible_candidates),)
    list_display = ("candidate", "content_hash", "created_at")


@admin.register(Experiment)
class ExperimentAdmin(RecordAdmin):
    grant_scope = (("", policies.visible_experiments),)
    list_display = ("id", "name", "exemplar_set", "candidate", "strategy", "trials", "cancelled", "created_at")
    list_filter = ("exemplar_set", "cancelled")


@admin.register(ExperimentRun)
class ExperimentRunAdmin(RecordAdmin):
    grant_scope = (("experiment", policies.visible_experiments), ("run", policies.visible_runs))
    list_display = ("experiment", "arm", "trial", "run")
    raw_id_fields = ("experiment", "run")


@admin.register(ExemplarOrigin)
class ExemplarOriginAdmin(RecordAdmin):
    grant_scope = (("exemplar", policies.visible_exemplars),)

    def scope_rows(self, request, queryset):
        # and the run it was taken from, when it names one
        queryset = super().scope_rows(request, queryset)
        return queryset.filter(Q(run__isnull=True) | Q(run__in=policies.visible_runs(request.user).values("pk")))

    list_display = ("exemplar", "run", "item", "created_at")
    raw_id_fields = ("exemplar", "run", "item")
