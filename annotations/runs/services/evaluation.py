"""Scoring a run (the scoring itself is annotations.evaluation, which imports no Django)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agent.hygiene import clean_instance
from agent.metrics import f_nc
from agent.models import Turn
from agent.services.jobs import enqueue_on_commit
from agent.textclean import clean_text
from annotations.conf import annotations_settings
from annotations.evaluation import (
    EvalItem,
    evaluate,
)
from annotations.labels.version import labels_changed
from annotations.runs.models import Run, RunItem
from annotations.runs.services.datasets import db_resolver_for

logger = logging.getLogger(__name__)
EVALUATE_TASK = "annotations.tasks.evaluate_run"

def run_awaits_missing_choice(run: Run) -> bool:
    """An imported run with questions the file does not predict, whose scoring choice is not made yet."""
    counts = (run.config or {}).get("predictions") or {}
    return run.source == Run.Source.IMPORTED and bool(counts.get("missing")) and not run.missing_predictions


def run_evaluate_queue(*, run: Run) -> None:
    """Mark the run evaluating and queue its evaluation after commit."""
    if run_awaits_missing_choice(run):
        raise ValidationError("Choose first how the questions without a prediction are scored.")
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(status=Run.Status.EVALUATING)
        enqueue_on_commit(EVALUATE_TASK, run.pk)


def run_evaluate(*, run: Run, workers: int = 2) -> Run:
    """Score every item (execution accuracy, Soft-F1) and store per-question results and the breakdowns."""
    Run.objects.filter(pk=run.pk).update(status=Run.Status.EVALUATING)
    items = list(run.items.select_related("question"))
    eval_items = [EvalItem(index=it.question.index, db_id=it.question.db_id, gold_sql=it.question.gold_sql,
                           pred_sql=it.predicted_sql or None, difficulty=it.question.difficulty or None,
                           pred_note=it.prediction_note) for it in items]
    try:
        report = evaluate(eval_items, mode=run.dataset.eval_mode, db_resolver=db_resolver_for(run.dataset),
                          workers=workers, cache_dir=annotations_settings.GOLD_CACHE_DIR)
    except Exception as exc:  # the run keeps its predictions; the failure is shown on it
        logger.exception("evaluation of run %s failed", run.pk)
        Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED,
                                             error=clean_text(f"Evaluation failed: {exc}"))
        run.refresh_from_db()
        return run
    by_index = {r.index: r for r in report.per_question}
    feedback = _hdsp_feedback(items)
    for item in items:
        r = by_index[item.question.index]
        item.eval_status, item.ex, item.soft_f1 = r.status.value, r.ex, r.soft_f1
        item.error, item.gold_rows, item.pred_rows, item.pred_ms = r.error[:2000], r.gold_rows, r.pred_rows, r.pred_ms
        item.f_nc = round(f_nc(item.predicted_sql, item.question.gold_sql), 4) if item.predicted_sql else None
        item.f_sc = feedback.get(item.session_id)
        clean_instance(item)
    RunItem.objects.bulk_update(items, ["eval_status", "ex", "soft_f1", "error", "gold_rows", "pred_rows",
                                        "pred_ms", "f_nc", "f_sc"], batch_size=500)
    run.totals = _aggregate_dict(report.totals)
    run.breakdowns = {"difficulty": {k: _aggregate_dict(v) for k, v in report.by_difficulty.items()},
                      "tables": {k: _aggregate_dict(v) for k, v in report.by_tables.items()}}
    run.status, run.error, run.evaluated_at = Run.Status.DONE, "", timezone.now()
    run.save(update_fields=["totals", "breakdowns", "status", "error", "evaluated_at"])
    labels_changed()  # the failures changed: what blind queues hide, which labels count
    return run


def _hdsp_feedback(items: Sequence[RunItem]) -> dict[int, int]:
    """f_sc from the last feedback turn of each HDSP session (the LLM's expected answer type vs the result)."""
    session_ids = [i.session_id for i in items if i.session_id]
    out: dict[int, int] = {}
    for turn in Turn.objects.filter(session_id__in=session_ids, kind="feedback").order_by("session_id", "index"):
        if isinstance(turn.extra, dict) and turn.extra.get("f_sc") is not None:
            out[turn.session_id] = int(turn.extra["f_sc"])
    return out


def _aggregate_dict(agg) -> dict[str, Any]:
    return {"questions": agg.questions, "scored": agg.scored, "correct": agg.correct, "ex": agg.ex,
            "soft_f1": agg.soft_f1, "status_counts": dict(agg.status_counts)}


