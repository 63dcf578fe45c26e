"""Example pools for retrieving strategies, resolved from a spec (``run --pool``, the run form, the API).

Specs:
- ``NAME`` or ``dataset:NAME``: the gold question-SQL pairs of an imported dataset;
- ``exemplars:SET[:N]``: the final queries of a published exemplar set version;
- ``run:ID``: the reviewed predictions of a run: those scored correct (EX) or labelled only with
  Mismatch categories (a reviewer found the prediction may be right).

Which examples a question may not see (``agent.strategies.pool``): a pool drawn from the dataset being run
(its gold pairs, or a run over it) is ``cross-database``, as Spider's split (train and dev share no
database): a question never sees an example of its own database. A separate pool (another dataset, an
exemplar set, a run over another dataset) is ``duplicates``: only exact duplicates of the question or its
gold SQL are left out. Both also leave out the question's own pair by key (``dataset:<dataset id>:<index>``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError

from agent.strategies.pool import CROSS_DATABASE, DUPLICATES, PoolExample, PoolExclusion
from annotations.runs.models import Dataset, DatasetQuestion, Run

POOL_HELP = ("Example pool for DART-SQL and SCL-SQL: a dataset name (its gold pairs), exemplars:SET[:N] (final "
             "queries of an exemplar set), or run:ID (a run's reviewed predictions). From the dataset being run, a "
             "question never sees an example of its own database; from any pool, exact duplicates of the "
             "question or its gold SQL are left out.")


@dataclass(frozen=True)
class ResolvedPool:
    source: str  # e.g. "dataset spider-dev"
    examples: list[PoolExample]
    dataset_id: int | None  # the dataset its pairs come from (None: an exemplar set)

    def rule_for(self, dataset) -> str:
        """The rule for a run over ``dataset``: cross-database unless the pool is separate from it."""
        return CROSS_DATABASE if self.dataset_id == dataset.pk else DUPLICATES


def question_exclusion(question: DatasetQuestion, *, rule: str) -> PoolExclusion:
    """What ``question`` may not retrieve from its run's pool under ``rule``."""
    return PoolExclusion(rule=rule, key=question_key(question), db_id=question.db_id, question=question.question,
                         sql=question.gold_sql or None)


def question_key(question: DatasetQuestion) -> str:
    return f"dataset:{question.dataset_id}:{question.index}"


def pool_from_spec(spec: str, *, datasets=None, runs=None, versions=None) -> ResolvedPool:
    """The pool's source, its examples and the dataset they come from. Raises ValidationError for an unknown or
    empty pool.

    ``datasets`` / ``runs`` / ``versions``: the querysets to look in (what the launching user may see, from the
    policies); a dataset, run or set version outside them is unknown, with the same message. None: all
    (server-side commands)."""
    spec = (spec or "").strip()
    kind, _, rest = spec.partition(":")
    if kind == "exemplars" and rest:
        from annotations.exemplars.selectors import version_from_spec

        version = version_from_spec(rest, versions=versions)
        if version is None:
            raise ValidationError({"pool": [f"No published version {rest!r} of an exemplar set."]})
        examples = [PoolExample(f"exemplar:{e.get('exemplar_id')}", str(e["question"]), str(e["final_sql"]),
                                e.get("database")) for e in version.exemplars if e.get("final_sql")]
        source, dataset_id = f"exemplar set {version.exemplar_set.name} v{version.number}", None
    elif kind == "run" and rest:
        examples, source, dataset_id = _reviewed(rest, Run.objects.all() if runs is None else runs)
    else:
        name = rest if kind == "dataset" and rest else spec
        dataset = (Dataset.objects.all() if datasets is None else datasets).filter(name=name).first()
        if dataset is None:
            raise ValidationError({"pool": [f"No dataset named {name!r} (or use exemplars:SET or run:ID)."]})
        examples = [PoolExample(question_key(q), q.question, q.gold_sql, q.db_id)
                    for q in dataset.questions.order_by("index").only("dataset_id", "index", "question", "gold_sql",
                                                                      "db_id")]
        source, dataset_id = f"dataset {dataset.name}", dataset.pk
    if not examples:
        raise ValidationError({"pool": [f"The pool {spec!r} has no question-SQL pairs."]})
    return ResolvedPool(source, examples, dataset_id)


def _reviewed(run_id: str, runs) -> tuple[list[PoolExample], str, int]:
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
    return examples, f"reviewed predictions of run #{run.pk}", run.dataset_id
