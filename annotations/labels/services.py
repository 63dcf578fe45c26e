"""Writes for labels: taxonomy versions, labels, reservations, suggestions shown, adjudication, queues.

Every check that matters (permission, own label, annotators per question) is
made here, so the page, the API and a script obey the same rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Min
from django.utils import timezone

from agent.services import open_connector
from agent.sql import Limits, SQLError
from agent.textclean import clean_text
from annotations import policies
from annotations.labels.models import (
    Category,
    Label,
    LabelReveal,
    Queue,
    Reservation,
    SuggestionEvent,
    Taxonomy,
    TaxonomyVersion,
)
from annotations.labels.version import labels_changed
from annotations.runs.models import Run, RunItem

RESERVATION_MINUTES = 5
PREVIEW_ROWS = 20


class LabelConflict(Exception):
    """The question is already being labelled by as many people as its queue allows."""


def check_can_label(*, user) -> None:
    policies.check_can_label(user)


def check_own_label(*, label: Label, user) -> None:
    if label.annotator_id != user.pk:
        raise PermissionDenied("This label belongs to another annotator.")


# --- taxonomy -------------------------------------------------------------------


def taxonomy_version_create(*, taxonomy: Taxonomy, categories: Sequence[dict[str, Any]], note: str = "",
                            user=None) -> TaxonomyVersion:
    """The next version of a taxonomy with these categories (dicts: key, name, group, definition, shortcut,
    accepts_corrected_gold). Existing versions and their labels are untouched."""
    if not categories:
        raise ValidationError("A taxonomy version needs at least one category.")
    keys = [c["key"] for c in categories]
    shortcuts = [c.get("shortcut") for c in categories if c.get("shortcut")]
    if len(set(keys)) != len(keys) or len(set(shortcuts)) != len(shortcuts):
        raise ValidationError("Category keys and shortcuts must be unique within a version.")
    if any(not 1 <= s <= 9 for s in shortcuts):
        raise ValidationError("Shortcuts are the keys 1 to 9.")
    with transaction.atomic():
        Taxonomy.objects.select_for_update().filter(pk=taxonomy.pk).first()
        last = taxonomy.versions.order_by("-number").values_list("number", flat=True).first() or 0
        version = TaxonomyVersion.objects.create(taxonomy=taxonomy, number=last + 1, note=note, created_by=user)
        for position, c in enumerate(categories):
            category = Category(version=version, position=position, key=c["key"], name=c["name"],
                                group=c.get("group", ""), definition=c.get("definition", ""),
                                shortcut=c.get("shortcut") or None,
                                accepts_corrected_gold=bool(c.get("accepts_corrected_gold")))
            category.full_clean(exclude=["version"])
            category.save()
    return version


# --- limits and reservations ----------------------------------------------------------


def item_annotator_limit(*, item: RunItem) -> int | None:
    """The smallest ``max_annotators`` of the label queues of the item's run (None: no queue, no limit)."""
    return Queue.objects.filter(run_id=item.run_id).aggregate(m=Min("max_annotators"))["m"]


def item_other_annotators(*, item: RunItem, user) -> set[int]:
    """Users other than ``user`` who labelled the item or hold an unexpired reservation on it."""
    labelled = set(Label.objects.filter(item=item, is_final=False).exclude(annotator=user)
                   .values_list("annotator_id", flat=True))
    reserved = set(Reservation.objects.filter(item=item, expires_at__gt=timezone.now()).exclude(user=user)
                   .values_list("user_id", flat=True))
    return labelled | reserved


def limit_conflict(*, item: RunItem, user) -> str | None:
    """Why ``user`` may not label the item now (its per-question annotator limit is reached), or None. Reads only."""
    limit = item_annotator_limit(item=item)
    if limit is None or Label.objects.filter(item=item, annotator=user, is_final=False).exists():
        return None
    others = item_other_annotators(item=item, user=user)
    if len(others) >= limit:
        return (f"This question is already being labelled by {len(others)} other annotator"
                f"{'s' if len(others) != 1 else ''} (this queue allows {limit} per question). Take the next one.")
    return None


def _check_limit(*, item: RunItem, user) -> None:
    message = limit_conflict(item=item, user=user)
    if message:
        raise LabelConflict(message)


def reservation_take(*, item: RunItem, user, minutes: int = RESERVATION_MINUTES) -> Reservation:
    """Hold the question for ``user``; raises LabelConflict when the per-question limit is reached."""
    check_can_label(user=user)
    with transaction.atomic():
        RunItem.objects.select_for_update().filter(pk=item.pk).first()  # serialise concurrent takers
        _check_limit(item=item, user=user)
        reservation, _ = Reservation.objects.update_or_create(
            item=item, user=user, defaults={"expires_at": timezone.now() + timedelta(minutes=minutes)})
    return reservation


def review_start(*, item: RunItem, user, suggestions: Sequence[Any]) -> None:
    """The review page's explicit request: hold the question for ``user`` and remember the suggestions shown.

    Raises LabelConflict when the per-question limit is reached (nothing is recorded then).
    """
    reservation_take(item=item, user=user)
    suggestions_record(item=item, user=user, suggestions=suggestions)


def reservation_release(*, item: RunItem, user) -> None:
    Reservation.objects.filter(item=item, user=user).delete()


# --- labels ---------------------------------------------------------------------


def _sees_others(*, item: RunItem, user) -> bool:
    """Whether ``user`` could see another annotator's label on the item now (then a change is not blind)."""
    others = Label.objects.filter(item=item, is_final=False).exclude(annotator=user).exists()
    return others and policies.can_see_others_labels(user, item)


def label_toggle(*, item: RunItem, category: Category, user, note: str = "") -> Label | None:
    """Give the label if ``user`` has not, else take it away. Returns the new label, or None when removed.

    A change made while the other annotators' labels were visible to ``user`` makes all of their labels on the
    question not blind, so agreement leaves their rating of it out."""
    check_can_label(user=user)
    with transaction.atomic():
        RunItem.objects.select_for_update().filter(pk=item.pk).first()
        seen = _sees_others(item=item, user=user)
        existing = Label.objects.filter(item=item, category=category, annotator=user, is_final=False).first()
        if existing is not None:
            existing.delete()
            labels_changed()
            if seen:
                Label.objects.filter(item=item, annotator=user, is_final=False).update(blind=False)
            return None
        _check_limit(item=item, user=user)
        try:
            with transaction.atomic():
                label = Label.objects.create(item=item, category=category, taxonomy_version_id=category.version_id,
                                             annotator=user, note=note, blind=not seen)
        except IntegrityError as exc:  # a double click raced us: the label is there
            raise LabelConflict("This label was just saved from another request.") from exc
        if seen:
            Label.objects.filter(item=item, annotator=user, is_final=False).update(blind=False)
        labels_changed()
        Reservation.objects.filter(item=item, user=user).update(
            expires_at=timezone.now() + timedelta(minutes=RESERVATION_MINUTES))
        SuggestionEvent.objects.filter(item=item, user=user, category_key=category.key).update(accepted=True)
    return label


def label_note_set(*, item: RunItem, user, note: str) -> int:
    """Set the note on all of ``user``'s labels of the item; returns how many labels carry it."""
    check_can_label(user=user)
    # update() sends no pre_save signal: clean the text here (NUL would fail on PostgreSQL)
    return Label.objects.filter(item=item, annotator=user, is_final=False).update(note=clean_text(note),
                                                                                  updated_at=timezone.now())


def label_update(*, label: Label, user, note: str | None = None, corrected_sql: str | None = None) -> Label:
    """Change one's own label: its note, or its corrected gold query (executed read-only, result stored)."""
    check_can_label(user=user)
    check_own_label(label=label, user=user)
    if note is not None:
        label.note = note
    if corrected_sql is not None:
        corrected_sql = corrected_sql.strip()
        if corrected_sql and not label.category.accepts_corrected_gold:
            raise ValidationError(f"A {label.category.name} label does not take a corrected gold query.")
        label.corrected_sql = corrected_sql
        _execute_corrected(label)
    label.save()
    return label


def _execute_corrected(label: Label) -> None:
    label.corrected_ok = label.corrected_row_count = label.corrected_preview = None
    label.corrected_error = ""
    if not label.corrected_sql:
        return
    database = label.item.question.database
    if database is None:
        label.corrected_ok, label.corrected_error = False, "The question's database is not available here."
        return

    try:
        with open_connector(database, limits=Limits(timeout_s=10, max_rows=PREVIEW_ROWS)) as conn:
            result = conn.execute(label.corrected_sql)
    except SQLError as exc:
        label.corrected_ok, label.corrected_error = False, str(exc)
        return
    label.corrected_ok = True
    label.corrected_row_count = result.total_rows
    label.corrected_preview = result.to_json(max_rows=PREVIEW_ROWS)


def label_adjudicate(*, item: RunItem, user, categories: Sequence[Category]) -> list[Label]:
    """An adjudicator's decision: these categories are the item's final labels, replacing any earlier decision.

    Final labels are rows of their own (``is_final``), so the annotators' labels, and agreement figures, stay."""
    policies.check_can_adjudicate(user)
    with transaction.atomic():
        Label.objects.filter(item=item, is_final=True).delete()
        final = [Label.objects.create(item=item, category=category, taxonomy_version_id=category.version_id,
                                      annotator=user, is_final=True, note="adjudicated", blind=False)
                 for category in categories]
        labels_changed()
    return final


def label_final_toggle(*, item: RunItem, category: Category, user) -> Label | None:
    """Adjudication mode, one key at a time: add the category to the item's final labels, or take it away."""
    policies.check_can_adjudicate(user)
    with transaction.atomic():
        RunItem.objects.select_for_update().filter(pk=item.pk).first()
        existing = Label.objects.filter(item=item, category=category, is_final=True).first()
        if existing is not None:
            existing.delete()
            labels_changed()
            return None
        label = Label.objects.create(item=item, category=category, taxonomy_version_id=category.version_id,
                                     annotator=user, is_final=True, note="adjudicated", blind=False)
        labels_changed()
    return label


def label_final_set(*, item: RunItem, category: Category, user, final: bool) -> Label | None:
    """The API's adjudication: make the category one of the item's final labels (``final``) or not, whatever it
    was before (a retried request changes nothing, unlike a toggle)."""
    policies.check_can_adjudicate(user)
    with transaction.atomic():
        RunItem.objects.select_for_update().filter(pk=item.pk).first()
        existing = Label.objects.filter(item=item, category=category, is_final=True).first()
        if (existing is not None) == final:
            return existing
        return label_final_toggle(item=item, category=category, user=user)


def labels_reveal(*, item: RunItem, user) -> LabelReveal:
    """``user``, having labelled the question, asks to see the other annotators' labels on it (blind queues)."""
    policies.check_can_reveal_labels(user, item)
    reveal, created = LabelReveal.objects.get_or_create(item=item, user=user)
    if created:
        labels_changed()
    return reveal


# --- suggestions shown ----------------------------------------------------------------


def suggestions_record(*, item: RunItem, user, suggestions: Sequence[Any]) -> None:
    """Remember which suggestions ``user`` saw on the item (once each), to measure how often they are taken."""
    given = set(Label.objects.filter(item=item, annotator=user, is_final=False)
                .values_list("category__key", flat=True))
    for s in suggestions:
        SuggestionEvent.objects.get_or_create(item=item, user=user, category_key=s.key,
                                              defaults={"reason": s.reason[:300], "accepted": s.key in given})


# --- queues ---------------------------------------------------------------------


def queue_create(*, run: Run, name: str, taxonomy_version: TaxonomyVersion, user, db_id: str = "",
                 difficulty: str = "", join_count: int | None = None, max_annotators: int = 1,
                 assignees: Sequence[Any] = (), blind: bool = True, guidelines: str = "") -> Queue:
    """A queue of the run's failures. ``blind`` (the default) matters once ``max_annotators`` is above 1;
    ``guidelines`` are shown to its annotators."""
    policies.check_can_create_queue(user)
    if max_annotators < 1:
        raise ValidationError("At least one annotator per question.")
    unable = sorted(u.get_username() for u in assignees if not policies.can_be_assigned(u, run))
    if unable:
        raise ValidationError({"assignees": [f"{', '.join(unable)} cannot label this run's questions (an "
                                             "assignee needs an active account with the Annotator role that "
                                             "sees the run's databases)."]})
    queue = Queue.objects.create(run=run, name=name, taxonomy_version=taxonomy_version, db_id=db_id,
                                 difficulty=difficulty, join_count=join_count, max_annotators=max_annotators,
                                 blind=blind, guidelines=clean_text((guidelines or "").strip()), created_by=user)
    labels_changed()
    if assignees:
        queue.assignees.set(assignees)
    return queue
