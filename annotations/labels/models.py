"""Error labels on run items: taxonomies (versioned, immutable), labels, queues, reservations, suggestions.

A taxonomy's content lives only in its numbered versions; a version and its
categories are never edited in place (``taxonomy_version_create`` makes the
next one). A label records the version its category came from.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse


class Taxonomy(models.Model):
    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "taxonomies"

    def __str__(self) -> str:
        return self.name

    def latest_version(self) -> TaxonomyVersion | None:
        return self.versions.order_by("-number").first()


class TaxonomyVersion(models.Model):
    """A frozen list of categories. Never edited: a change is a new version."""

    taxonomy = models.ForeignKey(Taxonomy, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    note = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["taxonomy", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["taxonomy", "number"], name="unique_taxonomy_version_number"),
            models.CheckConstraint(condition=models.Q(number__gte=1), name="taxonomy_version_number_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.taxonomy.name} v{self.number}"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None and not kwargs.get("force_insert"):
            raise ValidationError("Taxonomy versions are immutable: create a new version instead.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValidationError("Taxonomy versions are never deleted.")


class Category(models.Model):
    """One category of a taxonomy version (immutable with its version)."""

    version = models.ForeignKey(TaxonomyVersion, on_delete=models.PROTECT, related_name="categories")
    position = models.PositiveSmallIntegerField()
    key = models.SlugField(max_length=50, help_text="Stable across versions, e.g. 'golden_wrong'.")
    name = models.CharField(max_length=100)
    group = models.CharField(max_length=50, help_text="e.g. 'Mismatch' or 'Error'.")
    definition = models.CharField(max_length=300)
    shortcut = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Key 1-9 on the review page.")
    accepts_corrected_gold = models.BooleanField(
        default=False, help_text="A label of this category may carry a corrected gold query.")

    class Meta:
        ordering = ["version", "position"]
        verbose_name_plural = "categories"
        constraints = [
            models.UniqueConstraint(fields=["version", "key"], name="unique_category_key"),
            models.UniqueConstraint(fields=["version", "shortcut"], name="unique_category_shortcut"),
            models.CheckConstraint(condition=models.Q(shortcut__gte=1, shortcut__lte=9) | models.Q(shortcut=None),
                                   name="category_shortcut_1_9"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.group})"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None and not kwargs.get("force_insert"):
            raise ValidationError("Categories belong to an immutable taxonomy version.")
        super().save(*args, **kwargs)


class LabelQuerySet(models.QuerySet):
    def for_run(self, run) -> LabelQuerySet:
        return self.filter(item__run=run)


class Label(models.Model):
    item = models.ForeignKey("annotations.RunItem", on_delete=models.CASCADE, related_name="labels")
    category = models.ForeignKey(Category, on_delete=models.PROTECT, related_name="labels")
    taxonomy_version = models.ForeignKey(TaxonomyVersion, on_delete=models.PROTECT, related_name="labels")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="labels")
    note = models.TextField(blank=True)
    corrected_sql = models.TextField(blank=True, help_text="Corrected gold query (Golden Wrong / Golden Empty).")
    corrected_ok = models.BooleanField(null=True, help_text="Whether the corrected query ran (None: no query).")
    corrected_row_count = models.IntegerField(null=True, blank=True)
    corrected_preview = models.JSONField(null=True, blank=True, help_text='{"columns": [...], "rows": [...]}')
    corrected_error = models.TextField(blank=True)
    is_final = models.BooleanField(default=False, help_text="Set by an adjudicator: the label that counts.")
    blind = models.BooleanField(
        default=True, help_text="Given (and last changed) while its author could see no other annotator's label "
                                "on the question. Agreement counts only ratings whose labels are all blind.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = LabelQuerySet.as_manager()

    class Meta:
        ordering = ["item", "category__position"]
        permissions = [("adjudicate_label", "Can adjudicate labels (mark the final ones)")]
        constraints = [
            # An adjudicator's final labels are rows of their own, apart from any labels they gave as annotator.
            models.UniqueConstraint(fields=["item", "category", "annotator", "is_final"],
                                    name="unique_label_per_annotator"),
        ]
        indexes = [models.Index(fields=["annotator", "item"]), models.Index(fields=["category"])]

    def __str__(self) -> str:
        return f"{self.item_id}: {self.category.name} by {self.annotator}"


class Queue(models.Model):
    """Failures of a run to label, optionally filtered, with assignees and a limit of annotators per item."""

    name = models.CharField(max_length=200)
    run = models.ForeignKey("annotations.Run", on_delete=models.CASCADE, related_name="label_queues")
    taxonomy_version = models.ForeignKey(TaxonomyVersion, on_delete=models.PROTECT, related_name="queues")
    db_id = models.CharField(max_length=200, blank=True)
    difficulty = models.CharField(max_length=20, blank=True)
    join_count = models.PositiveSmallIntegerField(null=True, blank=True)
    max_annotators = models.PositiveSmallIntegerField(
        default=1, help_text="How many people may label one question (1: single-annotator queue).")
    assignees = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="label_queues",
                                       help_text="Empty: anyone with the label permission.")
    blind = models.BooleanField(
        default=True, help_text="When more than one annotator labels a question: each sees the others' labels only "
                                "after labelling it, and everyone else (adjudicators apart) only after adjudication.")
    guidelines = models.TextField(
        blank=True, help_text="Instructions for the annotators, shown on the queue and on every question's page.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.CheckConstraint(condition=models.Q(max_annotators__gte=1),
                                              name="queue_max_annotators_positive")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("labels:queue_detail", args=[self.pk])

    @property
    def is_blind(self) -> bool:
        """Blindness matters only when a question takes more than one annotator."""
        return self.blind and self.max_annotators > 1

    def item_filter(self) -> models.Q:
        """The run items this queue holds: the run's failures matching its filters."""
        q = models.Q(run_id=self.run_id, ex=False)
        if self.db_id:
            q &= models.Q(question__db_id=self.db_id)
        if self.difficulty:
            q &= models.Q(question__difficulty=self.difficulty)
        if self.join_count is not None:
            q &= models.Q(question__join_count=self.join_count)
        return q


class LabelReveal(models.Model):
    """An annotator who labelled a question of a blind queue asked to see the other annotators' labels on it.

    From then on a change of their labels on that question is no longer blind."""

    item = models.ForeignKey("annotations.RunItem", on_delete=models.CASCADE, related_name="label_reveals")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    revealed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "user"], name="unique_label_reveal")]

    def __str__(self) -> str:
        return f"{self.item_id} revealed to {self.user}"


class Reservation(models.Model):
    """A question opened by an annotator is held for them until ``expires_at``."""

    item = models.ForeignKey("annotations.RunItem", on_delete=models.CASCADE, related_name="label_reservations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "user"], name="unique_reservation")]
        indexes = [models.Index(fields=["item", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.item_id} held by {self.user} until {self.expires_at:%H:%M}"


class SuggestionEvent(models.Model):
    """A suggestion shown to an annotator, and whether a label of that category followed."""

    item = models.ForeignKey("annotations.RunItem", on_delete=models.CASCADE, related_name="label_suggestions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    category_key = models.SlugField(max_length=50)
    reason = models.CharField(max_length=300, blank=True)
    accepted = models.BooleanField(default=False)
    shown_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "user", "category_key"], name="unique_suggestion")]

    def __str__(self) -> str:
        return f"{self.item_id} {self.category_key} → {self.user}"
