"""Exemplar experiments: suites of questions, candidate versions of an exemplar set, experiments comparing two.

- A ``Suite`` is a named list of a dataset's questions; its content lives only in numbered, immutable
  ``SuiteVersion`` rows, each question recording where it came from (a seeded sample, the failures of a run
  with a label, a hand-picked list, another suite).
- A ``Candidate`` is a draft version of an exemplar set: the published version it started from plus added,
  removed or edited exemplars (drafts allowed). It is never a ``ExemplarSetVersion`` row, so nothing that
  offers versions (Ask, ordinary runs, the API, pools) can offer it; publishing makes it the set's next version.
  What a run of it sends is frozen first in a ``CandidateSnapshot`` (immutable, like a version).
- An ``Experiment`` runs the candidate and a baseline (a published version or another candidate) on one suite
  version with the same strategy, options and endpoint, ``trials`` runs each (``ExperimentRun``).
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse


class _Immutable(models.Model):
    """A row written once: ``save`` refuses an update and ``delete`` refuses, as for exemplar set versions."""

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None and not kwargs.get("force_insert"):
            raise ValidationError(f"{self._meta.verbose_name} rows are immutable: create a new one instead.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValidationError(f"{self._meta.verbose_name} rows are never deleted.")


class Suite(models.Model):
    """A named list of questions of one dataset to test exemplar changes against (its versions hold them)."""

    name = models.CharField(max_length=200, unique=True)
    dataset = models.ForeignKey("annotations.Dataset", on_delete=models.PROTECT, related_name="suites")
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("experiments:suite_detail", args=[self.pk])

    def latest_version(self) -> SuiteVersion | None:
        return self.versions.order_by("-number").first()


class SuiteVersion(_Immutable):
    """The questions of a suite at one moment, in order; never edited (a change is the next version).

    ``recipe`` is the list of sources it was built from, as resolved (a sample's seed is stored even when
    none was given), so the same recipe builds the same questions again."""

    suite = models.ForeignKey(Suite, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    recipe = models.JSONField(default=list)
    question_count = models.PositiveIntegerField(default=0)
    note = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["suite", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "number"], name="unique_suite_version_number"),
            models.CheckConstraint(condition=models.Q(number__gte=1), name="suite_version_number_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.suite.name} v{self.number}"

    def get_absolute_url(self) -> str:
        return reverse("experiments:suite_version", args=[self.suite_id, self.number])


class SuiteQuestion(_Immutable):
    """One question of a suite version and where it came from (every source that contributed it)."""

    version = models.ForeignKey(SuiteVersion, on_delete=models.PROTECT, related_name="entries")
    question = models.ForeignKey("annotations.DatasetQuestion", on_delete=models.PROTECT, related_name="+")
    position = models.PositiveIntegerField()
    origins = models.JSONField(default=list, help_text='e.g. [{"kind": "failures", "run": 12, "categories": '
                                                      '["Selected Column"]}]')

    class Meta:
        ordering = ["version", "position"]
        constraints = [
            models.UniqueConstraint(fields=["version", "question"], name="unique_suite_question"),
            models.UniqueConstraint(fields=["version", "position"], name="unique_suite_question_position"),
        ]

    def __str__(self) -> str:
        return f"{self.version} #{self.position}"


class Candidate(models.Model):
    """A draft version of an exemplar set, numbered per set: run in experiments, previewed, then published."""

    class State(models.TextChoices):
        OPEN = "open", "Open"
        PUBLISHED = "published", "Published"
        DISCARDED = "discarded", "Discarded"

    exemplar_set = models.ForeignKey("annotations.ExemplarSet", on_delete=models.PROTECT, related_name="candidates")
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=200, blank=True, help_text="What it tries, e.g. 'Selected Column fixes'.")
    base_version = models.ForeignKey("annotations.ExemplarSetVersion", null=True, blank=True,
                                     on_delete=models.PROTECT, related_name="+",
                                     help_text="The published version it started from (none: the set had none).")
    tool_description = models.TextField(blank=True)
    tool_description_no_findpath = models.TextField(blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.OPEN)
    published_version = models.ForeignKey("annotations.ExemplarSetVersion", null=True, blank=True,
                                          on_delete=models.PROTECT, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["exemplar_set", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["exemplar_set", "number"], name="unique_candidate_number"),
            models.CheckConstraint(condition=models.Q(state__in=["open", "published", "discarded"]),
                                   name="candidate_state_known"),
        ]

    def __str__(self) -> str:
        return f"{self.exemplar_set.name} candidate {self.number}"

    def get_absolute_url(self) -> str:
        return reverse("experiments:candidate_detail", args=[self.pk])

    @property
    def is_open(self) -> bool:
        return self.state == self.State.OPEN


class CandidateItem(models.Model):
    """One exemplar of a candidate, at a position. ``published`` holds the copy frozen in the base version,
    kept as is; None means the exemplar's current content (a draft, or edited since it was published)."""

    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    exemplar = models.ForeignKey("annotations.Exemplar", null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="candidate_items")
    published = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["candidate", "position"]
        constraints = [
            models.UniqueConstraint(fields=["candidate", "position"], name="unique_candidate_item_position"),
            models.CheckConstraint(condition=models.Q(exemplar__isnull=False) | models.Q(published__isnull=False),
                                   name="candidate_item_has_content"),
        ]

    def __str__(self) -> str:
        return f"{self.candidate} #{self.position}"

    @property
    def is_current(self) -> bool:
        return self.published is None


class CandidateSnapshot(_Immutable):
    """What a candidate sends, frozen when a run of it starts: the runs of an experiment keep their content even
    if the candidate changes afterwards. One row per distinct content of a candidate."""

    candidate = models.ForeignKey(Candidate, on_delete=models.PROTECT, related_name="snapshots")
    exemplars = models.JSONField(default=list)
    tool_description = models.TextField(blank=True)
    tool_description_no_findpath = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["candidate", "content_hash"], name="unique_candidate_snapshot")]

    def __str__(self) -> str:
        return f"{self.candidate} ({self.content_hash[:8]})"


class Experiment(models.Model):
    """A candidate against a baseline on one suite version: ``trials`` runs each, all with the same strategy,
    options and LLM endpoint. Its state and figures are read from its runs."""

    MAX_TRIALS = 10
    # Trial t sends options["sampling_seed"] + TRIAL_SEED_STRIDE * (t - 1): more than a session's LLM calls, so
    # no call of one trial reuses another trial's seed.
    TRIAL_SEED_STRIDE = 1000

    name = models.CharField(max_length=200, blank=True)
    exemplar_set = models.ForeignKey("annotations.ExemplarSet", on_delete=models.PROTECT, related_name="experiments")
    candidate = models.ForeignKey(Candidate, on_delete=models.PROTECT, related_name="experiments")
    candidate_snapshot = models.ForeignKey(CandidateSnapshot, on_delete=models.PROTECT, related_name="+")
    baseline_version = models.ForeignKey("annotations.ExemplarSetVersion", null=True, blank=True,
                                         on_delete=models.PROTECT, related_name="+")
    baseline_candidate = models.ForeignKey(Candidate, null=True, blank=True, on_delete=models.PROTECT,
                                           related_name="+")
    baseline_snapshot = models.ForeignKey(CandidateSnapshot, null=True, blank=True, on_delete=models.PROTECT,
                                          related_name="+")
    suite_version = models.ForeignKey(SuiteVersion, on_delete=models.PROTECT, related_name="experiments")
    strategy = models.CharField(max_length=50)
    options = models.JSONField(default=dict, blank=True)
    trials = models.PositiveSmallIntegerField(default=1)
    cancelled = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(trials__gte=1, trials__lte=10), name="experiment_trials_1_10"),
            models.CheckConstraint(
                condition=(models.Q(baseline_version__isnull=False, baseline_snapshot__isnull=True)
                           | models.Q(baseline_version__isnull=True, baseline_snapshot__isnull=False,
                                      baseline_candidate__isnull=False)),
                name="experiment_one_baseline"),
        ]
        indexes = [models.Index(fields=["exemplar_set", "-created_at"], name="experiment_set_created_idx")]

    def __str__(self) -> str:
        return f"experiment #{self.pk}" + (f" {self.name}" if self.name else "")

    def get_absolute_url(self) -> str:
        return reverse("experiments:experiment_detail", args=[self.pk])

    @property
    def baseline_label(self) -> str:
        if self.baseline_version_id:
            return f"{self.exemplar_set.name} v{self.baseline_version.number}"
        return str(self.baseline_candidate)


class ExperimentRun(models.Model):
    """One run of an experiment: an arm (candidate or baseline) and a trial number (1..trials)."""

    class Arm(models.TextChoices):
        CANDIDATE = "candidate", "Candidate"
        BASELINE = "baseline", "Baseline"

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="runs")
    arm = models.CharField(max_length=10, choices=Arm.choices)
    trial = models.PositiveSmallIntegerField()
    run = models.OneToOneField("annotations.Run", on_delete=models.PROTECT, related_name="experiment_run")

    class Meta:
        ordering = ["experiment", "trial", "arm"]
        constraints = [
            models.UniqueConstraint(fields=["experiment", "arm", "trial"], name="unique_experiment_run"),
            models.CheckConstraint(condition=models.Q(arm__in=["candidate", "baseline"]), name="experiment_run_arm"),
        ]

    def __str__(self) -> str:
        return f"{self.experiment} {self.arm} trial {self.trial}"


class ExemplarOrigin(models.Model):
    """The labelled failure an exemplar was written from ("write an exemplar for this"): its experiment suite
    defaults to the failures of that run with the same labels."""

    exemplar = models.OneToOneField("annotations.Exemplar", on_delete=models.CASCADE, related_name="origin")
    item = models.ForeignKey("annotations.RunItem", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    run = models.ForeignKey("annotations.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    categories = models.JSONField(default=list, help_text="Keys of the failure's label categories when written.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"exemplar {self.exemplar_id} from item {self.item_id}"
