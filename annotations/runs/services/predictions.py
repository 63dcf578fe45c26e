"""Another system's predictions imported as a run, and the choice for questions a short file leaves out."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import transaction

from agent.hygiene import clean_instance
from annotations.evaluation import (
    PredictionFileTooLarge,
    parse_bird_predictions,
    parse_spider_predictions,
)
from annotations.runs.models import NO_PREDICTION, Dataset, MissingPredictions, Run, RunItem
from annotations.runs.services.evaluation import run_awaits_missing_choice, run_evaluate_queue

logger = logging.getLogger(__name__)

def run_import_predictions(*, dataset: Dataset, text: str | Iterable[str], fmt: str, name: str, source_file: str = "",
                           user=None, evaluate_later: bool = False, missing: str | None = None) -> Run:
    """An external system's predictions as a Run. Malformed lines are kept as issues, the rest imported.

    A file with fewer predictions than the dataset has questions is never scored silently: the counts are
    stored (``config["predictions"]``) and ``missing`` says how the questions without a prediction count,
    ``"wrong"`` (in the denominator, as failed predictions) or ``"subset"`` (left out: only the given
    questions are scored). Without a choice such a run stays pending until ``run_choose_missing``.

    ``evaluate_later`` queues its evaluation after commit (the web upload); otherwise the caller evaluates.
    ``text``: the file's text, or an open text file (Spider's format is then read a line at a time).
    """
    if missing not in (None, *MissingPredictions.values):
        raise ValidationError(f"Unknown choice for missing predictions {missing!r}; expected wrong or subset")
    questions = {q.index: q for q in dataset.questions.all()}
    keep = questions.__contains__  # predictions past the questions are counted, never held
    try:
        if fmt == "spider":
            parsed = parse_spider_predictions(text, keep=keep)
        elif fmt == "bird":  # streamed a chunk at a time, with bounded entries
            parsed = parse_bird_predictions(text, keep=keep)
        else:
            raise ValidationError(f"Unknown prediction format {fmt!r}; expected spider or bird")
    except UnicodeDecodeError:
        raise ValidationError("The file is not UTF-8 text.") from None
    except PredictionFileTooLarge as exc:
        raise ValidationError(f"The file is refused, nothing was imported: {exc}.") from None
    except ValueError as exc:
        raise ValidationError(f"Not a {fmt.upper() if fmt == 'bird' else fmt.title()} prediction file: {exc}") from None
    by_index = parsed.by_index()
    issues = [{"line": i.line, "message": i.message} for i in parsed.issues]
    if parsed.ignored:
        issues.append({"line": 0, "message": f"{parsed.ignored} predictions past the dataset's "
                                             f"{len(questions)} questions were ignored"})
    given = [i for i in questions if i in by_index]
    if not given:  # nothing to score: a wrong file, not a short one (no run is stored)
        found = "; ".join(f"line {i['line']}: {i['message']}" for i in issues[:3])
        raise ValidationError(f"No prediction in the file matches a question of {dataset.name}"
                              + (f" ({found})." if found else "."))
    counts = {"questions": len(questions), "given": len(given), "missing": len(questions) - len(given),
              "malformed": sum(1 for i in given if by_index[i].sql is None), "extra": parsed.ignored}
    with transaction.atomic():
        run = Run.objects.create(name=name, dataset=dataset, source=Run.Source.IMPORTED, source_file=source_file,
                                 config={"format": fmt, "predictions": counts}, import_issues=issues,
                                 created_by=user)
        RunItem.objects.bulk_create([
            clean_instance(RunItem(run=run, question=q,
                    predicted_sql=(by_index[i].sql or "") if i in by_index else "",
                    prediction_note="" if i in by_index and by_index[i].sql is not None
                    else ("malformed line" if i in by_index else NO_PREDICTION)))
            for i, q in questions.items()
        ])
        if counts["missing"] and missing:
            run = run_choose_missing(run=run, choice=missing, evaluate_later=evaluate_later)
        elif evaluate_later and not counts["missing"]:
            run_evaluate_queue(run=run)
    return run




def run_choose_missing(*, run: Run, choice: str, evaluate_later: bool = True) -> Run:
    """Record how a short prediction file's missing questions count, then (``evaluate_later``) queue scoring.

    ``subset`` removes the questions without a prediction from the run (it covers the given subset, as a
    sampled run of our strategies does); malformed lines stay in and count as failed predictions either way.
    """
    if choice not in MissingPredictions.values:
        raise ValidationError(f"Unknown choice {choice!r}; expected wrong or subset")
    if not run_awaits_missing_choice(run):
        raise ValidationError("This run has no missing predictions awaiting a choice.")
    with transaction.atomic():
        if choice == MissingPredictions.SUBSET:
            run.items.filter(predicted_sql="", prediction_note=NO_PREDICTION).delete()
        run.missing_predictions = choice
        run.save(update_fields=["missing_predictions"])
        if evaluate_later:
            run_evaluate_queue(run=run)
    return run


