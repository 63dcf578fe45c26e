"""Benchmark datasets, runs over them, and per-question results.

A Run is a set of predictions for a dataset's questions, either produced by
one of our strategies (each question an agent session) or imported from
another system's prediction file; both are evaluated and compared alike.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from annotations.evaluation.records import STATUS_LABELS

EVAL_STATUS_CHOICES = [(status.value, label) for status, label in STATUS_LABELS.items()]


# The prediction note of a question an imported file has no line (or entry) for.
NO_PREDICTION = "no prediction"


class MissingPredictions(models.TextChoices):
    WRONG = "wrong", "scored as wrong"
    SUBSET = "subset", "left out: only the given subset is scored"


class Dataset(models.Model):
    class Kind(models.TextChoices):
        SPIDER = "spider", "Spider"
        BIRD = "bird", "BIRD"
        JSONL = "jsonl", "JSONL/CSV"

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    source_path = models.TextField(help_text="Where it was imported from (re-import reads it again).")
    description = models.TextField(blank=True)
    patches = models.JSONField(default=list, blank=True,
                               help_text="Optional corrections applied by the import, e.g. [\"flight_2\"] "
                                         "(see annotations.runs.patches).")
    question_count = models.PositiveIntegerField(default=0)
    executable_count = models.PositiveIntegerField(default=0, help_text="Questions whose database file exists.")
    workspace = models.ForeignKey(
        "agent.Workspace", null=True, blank=True, on_delete=models.PROTECT, related_name="datasets",
        help_text="Imported into this workspace: its members see it (and its runs and queues) once they see its "
                  "databases.")
    created_by = models.ForeignKey("auth.User", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                   help_text="Who uploaded it (through the web or the API).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("runs:dataset_detail", args=[self.name])

    @property
    def eval_mode(self) -> str:
        return "bird" if self.kind == self.Kind.BIRD else "spider"


class DatasetQuestion(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="questions")
    index = models.PositiveIntegerField(help_text="0-based position in the source file; prediction files use it.")
    db_id = models.CharField(max_length=200)
    database = models.ForeignKey("agent.Database", null=True, blank=True, on_delete=models.SET_NULL,
                                 help_text="Empty when the database file is missing (not executable).")
    question = models.TextField()
    evidence = models.TextField(blank=True)
    gold_sql = models.TextField()
    difficulty = models.CharField(max_length=20, blank=True, help_text="BIRD difficulty or Spider hardness.")
    table_count = models.PositiveSmallIntegerField(null=True, blank=True)
    join_count = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["dataset", "index"]
        constraints = [models.UniqueConstraint(fields=["dataset", "index"], name="unique_dataset_question_index")]
        indexes = [models.Index(fields=["dataset", "db_id"])]

    def __str__(self) -> str:
        return f"{self.dataset.name}#{self.index}"


class Run(models.Model):
    class Source(models.TextChoices):
        AGENT = "agent", "Our strategy"
        IMPORTED = "imported", "Imported predictions"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        EVALUATING = "evaluating", "Evaluating"
        DONE = "done", "Done"
        CANCELLED = "cancelled", "Cancelled"
        FAILED = "failed", "Failed"

    name = models.CharField(max_length=200)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="runs")
    source = models.CharField(max_length=20, choices=Source.choices)
    strategy = models.CharField(max_length=50, blank=True)
    config = models.JSONField(default=dict, blank=True)
    source_file = models.TextField(blank=True, help_text="Imported predictions: the file's name.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    import_issues = models.JSONField(default=list, blank=True, help_text="Malformed lines of an imported file.")
    missing_predictions = models.CharField(
        max_length=10, blank=True, choices=MissingPredictions.choices,
        help_text="An imported file with fewer predictions than questions: how the missing ones are scored, as "
                  "chosen before scoring. Empty while nothing is missing, or while the choice is awaited.")
    totals = models.JSONField(default=dict, blank=True, help_text="EX, Soft-F1 and counts of the last evaluation.")
    breakdowns = models.JSONField(default=dict, blank=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        # the runs list and a dataset's run table, newest first
        indexes = [models.Index(fields=["-created_at", "-id"], name="run_created_idx"),
                   models.Index(fields=["dataset", "-created_at"], name="run_dataset_created_idx")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("runs:run_detail", args=[self.pk])


class RunItem(models.Model):
    """One question of a run: its prediction and, once evaluated, the decision."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="items")
    question = models.ForeignKey(DatasetQuestion, on_delete=models.CASCADE, related_name="run_items")
    session = models.ForeignKey("agent.AgentSession", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="run_items")
    predicted_sql = models.TextField(blank=True)
    prediction_note = models.TextField(blank=True, help_text="Why there is no prediction (malformed line, ...).")
    eval_status = models.CharField(max_length=20, blank=True, choices=EVAL_STATUS_CHOICES,
                                   help_text="The evaluator's decision; blank until evaluated.")
    ex = models.BooleanField(null=True)
    soft_f1 = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    gold_rows = models.IntegerField(null=True, blank=True)
    pred_rows = models.IntegerField(null=True, blank=True)
    pred_ms = models.FloatField(null=True, blank=True)
    f_nc = models.FloatField(null=True, blank=True, help_text="HDSP's normalised closeness of predicted to gold SQL.")
    f_sc = models.SmallIntegerField(null=True, blank=True,
                                    help_text="HDSP's result-type check (1 ok, 0 not); only when the strategy asked "
                                              "the LLM for the expected answer type.")

    class Meta:
        ordering = ["run", "question__index"]
        constraints = [models.UniqueConstraint(fields=["run", "question"], name="unique_run_question")]
        indexes = [
            models.Index(fields=["run", "ex"]),
            # The dispatcher's two reads, items still waiting and items in flight, touch only the run's
            # uncollected items whatever the run's size (annotations.runs.services.run_dispatch).
            models.Index(fields=["run", "session", "id"], name="runitem_uncollected",
                         condition=models.Q(predicted_sql="", prediction_note="")),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} · {self.question}"
