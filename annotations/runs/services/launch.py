"""Launching a run of one of our strategies over (a sample of) a dataset."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.core.exceptions import ValidationError
from django.db import transaction

from agent.services import audit, spend
from agent.services import sessions as session_services
from agent.strategies import STRATEGIES, create_strategy
from annotations import policies
from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem
from annotations.runs.pools import pool_from_spec
from annotations.runs.sampling import new_seed, sample_questions
from annotations.runs.services.dispatch import run_dispatch_queue

logger = logging.getLogger(__name__)

def questions_for(dataset: Dataset, *, db_ids: Sequence[str] = (), limit: int | None = None, sample: str = "first",
                  seed: int | None = None) -> list[DatasetQuestion]:
    """The questions a run covers (``annotations.runs.sampling``): all, the first ``limit``, or a seeded random
    ``limit`` of them."""
    try:
        return sample_questions(dataset.questions.all(), db_ids=db_ids, limit=limit, mode=sample, seed=seed)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


# --- runs of our own strategies -------------------------------------------------------------



def run_create_agent(*, dataset: Dataset, name: str, strategy: str = "interactive_t2s",
                     options: dict | None = None, exemplar_set_version=None, zero_shot: bool = False,
                     paper_replica: bool = False, user=None,
                     db_ids: Sequence[str] = (), limit: int | None = None, max_concurrency: int | None = None,
                     spend_cap: float | None = None, pool: str | None = None, sample: str = "first",
                     seed: int | None = None, questions: Sequence[DatasetQuestion] | None = None,
                     exemplar_candidate=None) -> Run:
    """A run of one of our strategies over (a sample of) a dataset: one agent session per question.

    ``pool`` (see ``annotations.runs.pools``) is the example pool of retrieving strategies; it is resolved
    and stored once, recorded in the run's snapshot, and each session leaves its own question out.
    Without a chosen exemplar set the Interactive-T2S agent gets the paper's set for the dataset (Spider;
    BIRD with or without evidence as ``options["use_evidence"]`` says), unless ``zero_shot``.

    ``sample``: with a ``limit``, ``"first"`` N questions or a ``"random"`` N drawn with ``seed`` (one is drawn
    and stored when none is given), so the same sample can be run again.

    ``questions`` (of ``dataset``) replaces the selection above by an explicit list (an experiment's suite).
    ``exemplar_candidate`` (an ``annotations.experiments`` candidate snapshot) is an unpublished candidate
    version's frozen content instead of a set version: only experiments pass it, never the launch forms.

    Sessions are started by ``run_dispatch`` a few at a time (the endpoint's concurrency limit), so a
    1000-question run does not flood the LLM; a spend cap stops starting new ones once reached.
    """
    if strategy not in STRATEGIES:
        raise ValidationError({"strategy": [f"Unknown strategy; choose one of {', '.join(sorted(STRATEGIES))}."]})
    if paper_replica:
        if strategy != session_services.DEFAULT_EXEMPLARS_STRATEGY or zero_shot:
            raise ValidationError("The paper-replica preset is the Interactive-T2S agent with the paper's exemplars.")
        options = {**dict(options or {}), **session_services.PAPER_REPLICA_OPTIONS}
    endpoint = session_services.default_llm_endpoint()
    if endpoint is None:
        raise ValidationError({"llm": ["No LLM endpoint is configured (see README)."]})
    session_services.check_option_types(strategy, options or {})
    try:
        defaults = create_strategy(strategy, {}).config.to_dict()
        create_strategy(strategy, spend.bounded_options(options or {}, endpoint=endpoint, defaults=defaults))
    except (TypeError, ValueError) as exc:
        raise ValidationError({"options": [str(exc)]}) from None
    if sample == "random" and limit and seed is None:
        seed = new_seed()
    if exemplar_candidate is not None and (exemplar_set_version is not None or zero_shot or paper_replica):
        raise ValidationError("A candidate version replaces the exemplar set: pick one or the other.")
    if questions is not None:
        questions = list(questions)
        if any(q.dataset_id != dataset.pk for q in questions):
            raise ValidationError("Every question of a run belongs to its dataset.")
        sample, limit, seed, db_ids = "list", None, None, ()
    else:
        questions = questions_for(dataset, db_ids=db_ids, limit=limit, sample=sample, seed=seed)
    if not questions:
        raise ValidationError("No question matches this selection.")
    pool_snapshot = None
    if pool:
        # Through the web and the API, a pool is drawn only from datasets and runs the launcher may see.
        source, examples = (pool_from_spec(pool) if user is None else
                            pool_from_spec(pool, datasets=policies.visible_datasets(user),
                                           runs=policies.visible_runs(user)))
        stored = session_services.example_pool_store(source=source, examples=examples)
        pool_snapshot = {**session_services.example_pool_snapshot(stored), "spec": pool}
    concurrency = spend.run_concurrency(max_concurrency, endpoint=endpoint)
    choice = "chosen" if exemplar_set_version is not None else "zero-shot"
    candidate = None
    if exemplar_candidate is not None:
        from annotations.experiments.selectors import snapshot_run_config

        choice, candidate = "candidate", snapshot_run_config(exemplar_candidate)
    elif exemplar_set_version is None and not zero_shot and strategy == session_services.DEFAULT_EXEMPLARS_STRATEGY:
        from annotations.exemplars.paper_sets import default_version

        exemplar_set_version = default_version(dataset=dataset,
                                               use_evidence=bool((options or {}).get("use_evidence", True)))
        choice = "default" if exemplar_set_version is not None else "zero-shot (no paper set published)"
    with transaction.atomic():
        run = Run.objects.create(
            name=name, dataset=dataset, source=Run.Source.AGENT, strategy=strategy, status=Run.Status.RUNNING,
            created_by=user,
            config={"options": dict(options or {}), "llm": session_services.llm_snapshot(endpoint),
                    "exemplar_set_version": exemplar_set_version.pk if exemplar_set_version else None,
                    "exemplar_candidate": candidate,
                    "exemplars_choice": choice, "preset": "paper-replica" if paper_replica else None,
                    "max_concurrency": concurrency, "spend_cap": spend_cap, "example_pool": pool_snapshot,
                    "sample": {"db_ids": list(db_ids), "limit": limit,
                               "mode": "list" if sample == "list" else sample if limit and sample != "all" else "all",
                               "seed": seed if limit and sample == "random" else None}})
        RunItem.objects.bulk_create([
            RunItem(run=run, question=q, prediction_note="" if q.database_id else "database not available here")
            for q in questions])
        audit.record(action=audit.Action.RUN_LAUNCH, target_type="run", target=run.name, target_id=run.pk,
                     actor=user, details={"dataset": dataset.name, "strategy": strategy, "questions": len(questions),
                                          "endpoint": run.config["llm"].get("endpoint"),
                                          "model": run.config["llm"].get("model"),
                                          "max_concurrency": concurrency, "spend_cap": spend_cap})
        run_dispatch_queue(run=run)
    return run


