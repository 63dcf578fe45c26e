"""Exemplars (few-shot trajectories of the agent) and versioned exemplar sets.

Steps are rows of their own (``ExemplarStep``) rather than a JSON list: the
authoring console edits, runs, reorders and marks stale one step at a time
(one htmx request per step), so each request touches one row, the order is a
database constraint, and a step carries its own run metadata (ok, stale,
when it ran). What is frozen and never edited is the *published* form: a set
version stores a JSON snapshot of its exemplars' content, and that snapshot
is the only thing the agent reads.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse


class ExemplarQuerySet(models.QuerySet):
    def approved(self) -> ExemplarQuerySet:
        return self.filter(state=Exemplar.State.APPROVED)


class Exemplar(models.Model):
    """One hand-made (or promoted, or imported) trajectory: question, steps, final SQL."""

    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        IN_REVIEW = "in_review", "In review"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    database = models.ForeignKey(
        "agent.Database", on_delete=models.PROTECT, null=True, blank=True, related_name="exemplars",
        help_text="The registered database the steps ran on. Empty for imported exemplars whose database "
                  "is not registered here (their schema text comes from the imported file).")
    source_database = models.CharField(
        max_length=200, blank=True,
        help_text="Name of the database in the source an imported exemplar came from (e.g. 'address').")
    schema_text = models.TextField(
        blank=True, help_text="Table-level schema shown with the question; for a registered database it is "
                              "rendered from its schema when the exemplar is published.")
    question = models.TextField()
    evidence = models.TextField(blank=True)
    final_sql = models.TextField(blank=True)
    notes = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True, help_text='Short labels, e.g. ["empty result", "3 joins"].')
    source = models.CharField(max_length=300, blank=True,
                              help_text="Where it came from: 'session #12', 'import: spider/academic/6tables.txt'.")
    content_hash = models.CharField(
        max_length=64, blank=True, db_index=True, editable=False,
        help_text="Of its content when imported: importing the same exemplar again reuses this row.")

    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="exemplars")
    state = models.CharField(max_length=20, choices=State.choices, default=State.DRAFT)
    submitted_at = models.DateTimeField(null=True, blank=True)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="reviewed_exemplars")
    review_comment = models.TextField(blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ExemplarQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        permissions = [("review_exemplar", "Can review (approve or reject) exemplars")]
        constraints = [
            models.CheckConstraint(condition=models.Q(state__in=["draft", "in_review", "approved", "rejected"]),
                                   name="exemplar_state_known"),
        ]
        indexes = [models.Index(fields=["state", "-updated_at"]), models.Index(fields=["database", "state"])]

    def __str__(self) -> str:
        return f"#{self.pk} {self.question[:60]}"

    def get_absolute_url(self) -> str:
        return reverse("exemplars:exemplar_detail", args=[self.pk])

    @property
    def database_label(self) -> str:
        if self.database_id:
            return self.database.name
        return f"{self.source_database} (not registered)" if self.source_database else "no database"


class ExemplarStep(models.Model):
    """One Thought / Action / Observation of an exemplar, at a position (0-based, unique per exemplar)."""

    exemplar = models.ForeignKey(Exemplar, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveIntegerField()
    thought = models.TextField(blank=True)
    action = models.TextField(help_text='As the agent writes it, e.g. SearchValue("Iron Maiden") or Done.')
    observation = models.TextField(null=True, blank=True)  # noqa: DJ001 (None: Done, or never run)
    ok = models.BooleanField(null=True, help_text="Whether the tool reported success when it last ran.")
    stale = models.BooleanField(default=False, help_text="An earlier step changed since this one ran.")
    ran_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["exemplar", "position"]
        constraints = [models.UniqueConstraint(fields=["exemplar", "position"], name="unique_exemplar_step_position")]

    def __str__(self) -> str:
        return f"{self.exemplar_id}#{self.position} {self.action[:40]}"

    @property
    def is_done(self) -> bool:
        return self.action.strip().rstrip(".").strip().lower() == "done"


class ExemplarSet(models.Model):
    """A named collection of exemplars; its content lives only in its numbered, immutable versions."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    workspace = models.ForeignKey(
        "agent.Workspace", null=True, blank=True, on_delete=models.PROTECT, related_name="exemplar_sets",
        help_text="Its members (and only they) see the set. None: the paper's sets and older sets, seen by whoever "
                  "sees one of its versions.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="exemplar_sets")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("exemplars:set_detail", args=[self.pk])

    def latest_version(self) -> ExemplarSetVersion | None:
        prefetched = getattr(self, "_prefetched_objects_cache", {}).get("versions")
        if prefetched is not None:  # a list page prefetched them: no query per set
            return max(prefetched, key=lambda v: v.number, default=None)
        return self.versions.order_by("-number").first()


class ExemplarSetVersion(models.Model):
    """A frozen snapshot of a set: ordered exemplar contents plus a tool description. Never edited.

    ``exemplars`` is a list of dicts with the keys of ``agent.strategies.prompt.Exemplar.to_dict()``
    plus ``exemplar_id``, ``database``, ``notes`` and ``tags``.
    """

    exemplar_set = models.ForeignKey(ExemplarSet, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    tool_description = models.TextField(
        blank=True, help_text="Instruction text published with the set (e.g. an imported tool_desc.txt). "
                              "Empty: the agent's own generated tool description.")
    tool_description_no_findpath = models.TextField(
        blank=True, help_text="Instruction text for the ablation without FindShortestPath (the paper's "
                              "tool_desc_no_findpath.txt, Table 10). Empty: the generated text is used then.")
    exemplars = models.JSONField(default=list)
    content_hash = models.CharField(max_length=64)
    note = models.TextField(blank=True)
    source = models.CharField(max_length=300, blank=True, help_text="e.g. 'import: bird-with_evidence'.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="exemplar_set_versions")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["exemplar_set", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["exemplar_set", "number"], name="unique_exemplar_set_version_number"),
            models.CheckConstraint(condition=models.Q(number__gte=1), name="exemplar_set_version_number_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.exemplar_set.name} v{self.number}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None and not kwargs.get("force_insert"):
            raise ValidationError("Exemplar set versions are immutable: publish a new version instead.")
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("exemplars:version_detail", args=[self.exemplar_set_id, self.number])

    def delete(self, *args, **kwargs):
        raise ValidationError("Exemplar set versions are never deleted.")

    @property
    def exemplar_count(self) -> int:
        return len(self.exemplars)


# Datasets, runs and per-question results live in their own module; importing them here registers them.
from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem  # noqa: E402

__all__ = ["Dataset", "DatasetQuestion", "Exemplar", "ExemplarSet", "ExemplarSetVersion", "ExemplarStep", "Run",
           "RunItem"]
from annotations.experiments.models import (  # noqa: E402, F401 (registers the experiments models)
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
from annotations.labels.models import Label, LabelReveal, Queue, Taxonomy  # noqa: E402, F401 (registers the labels models)
