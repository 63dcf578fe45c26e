"""Example pools for retrieving strategies, resolved from a spec (``run --pool``, the run form, the API).

Specs:
- ``NAME`` or ``dataset:NAME``: the gold question-SQL pairs of an imported dataset;
- ``exemplars:SET[:N]``: the final queries of a published exemplar set version;
- ``run:ID``: the reviewed predictions of a run: those scored correct (EX) or labelled only with
  Mismatch categories (a reviewer found the prediction may be right).

A dataset question's key is ``dataset:<dataset id>:<index>`` whatever the pool, so when a run's pool is
the dataset being run (or a run over it) the strategy leaves the question's own pair out by key.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError

from agent.strategies.pool import PoolExample
from annotations.runs.models import Dataset, DatasetQuestion, Run

POOL_HELP = ("Example pool for DART-SQL and SCL-SQL: a dataset name (its gold pairs; the question itself is "
             "left out), exemplars:SET[:N] (final queries of an exemplar set), or run:ID (a run's reviewed "
             "predictions).")


def question_key(question: DatasetQuestion) -> str:
    return f"dataset:{question.dataset_id}:{question.index}"


def pool_from_spec(spec: str, *, datasets=None, runs=None) -> tuple[str, list[PoolExample]]:
    """(a description of the source, its examples). Raises ValidationError for an unknown or empty pool.

    ``datasets`` / ``runs``: the querysets to look in (what the launching user may see, from the policies); a
    dataset or run outside them is unknown, with the same message. None: all (server-side commands)."""
    spec = (spec or "").strip()
    kind, _, rest = spec.partition(":")
    if kind == "exemplars" and rest:
        from annotations.exemplars.selectors import version_from_spec

        version = version_from_spec(rest)
        if version is None:
            raise ValidationError({"pool": [f"No published version {rest!r} of an exemplar set."]})
        examples = [PoolExample(f"exemplar:{e.get('exemplar_id')}", str(e["question"]), str(e["final_sql"]),
                                e.get("database")) for e in version.exemplars if e.get("final_sql")]
        source = f"exemplar set {version.exemplar_set.name} v{version.number}"
    elif kind == "run" and rest:
        examples, source = _reviewed(rest, Run.objects.all() if runs is None else runs)
    else:
        name = rest if kind == "dataset" and rest else spec
        dataset = (Dataset.objects.all() if datasets is None else datasets).filter(name=name).first()
        if dataset is None:
            raise ValidationError({"pool": [f"No dataset named {name!r} (or use exemplars:SET or run:ID)."]})
        examples = [PoolExample(question_key(q), q.question, q.gold_sql, q.db_id)
                    for q in dataset.questions.order_by("index").only("dataset_id", "index", "question", "gold_sql",
                                                                      "db_id")]
        source = f"dataset {dataset.name}"
    if not examples:
        raise ValidationError({"pool": [f"The pool {spec!r} has no question-SQL pairs."]})
    return source, examples


def _reviewed(run_id: str, runs) -> tuple[list[PoolExample], str]:
    run = runs.filter(pk=int(run_id)).first() if run_id.isdigit() else None
    if run is None:
        raise ValidationError({"pool": [f"No run #{run_id}."]})
    examples = []
    items = run.items.select_related("question").prefetch_related("labels__category").exclude(predicted_sql="")
    for item in items:
        groups = {label.category.group.lower() for label in item.labels.all()}
        if item.ex is True or (groups and groups <= {"mismatch"}):
            q = item.question
            examples.append(PoolExample(question_key(q), q.question, item.predicted_sql, q.db_id))
    return examples, f"reviewed predictions of run #{run.pk}"
