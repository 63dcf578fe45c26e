"""Launching a run of one of our strategies over (a sample of) a dataset."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.core.exceptions import ValidationError
from django.db import transaction

from agent.services import audit, spend
from agent.services import sessions as session_services
from agent.strategies import STRATEGIES, create_strategy
from agent.strategies.pool import RULES
from agent.tools import tool_names
from annotations import policies
from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem
from annotations.runs.pools import pool_from_spec
from annotations.runs.sampling import SEEDED_MODES, TABLE10_PER_BUCKET, new_seed, sample_questions
from annotations.runs.services.dispatch import run_dispatch_queue

logger = logging.getLogger(__name__)

def questions_for(dataset: Dataset, *, db_ids: Sequence[str] = (), limit: int | None = None, sample: str = "first",
                  seed: int | None = None, executable_only: bool = False) -> list[DatasetQuestion]:
    """The questions a run covers (``annotations.runs.sampling``): all, the first ``limit``, or a seeded random
    ``limit`` of them (``executable_only``: among those whose database is available here)."""
    try:
        return sample_questions(dataset.questions.all(), db_ids=db_ids, limit=limit, mode=sample, seed=seed,
                                executable_only=executable_only)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


# --- runs of our own strategies -------------------------------------------------------------



def run_create_agent(*, dataset: Dataset, name: str, strategy: str = "interactive_t2s",
                     options: dict | None = None, exemplar_set_version=None, zero_shot: bool = False,
                     paper_replica: bool = False, user=None,
                     db_ids: Sequence[str] = (), limit: int | None = None, max_concurrency: int | None = None,
                     spend_cap: float | None = None, pool: str | None = None, sample: str = "first",
                     seed: int | None = None, questions: Sequence[DatasetQuestion] | None = None,
                     exemplar_candidate=None, without: Sequence[str] = (), executable_only: bool = False) -> Run:
    """A run of one of our strategies over (a sample of) a dataset: one agent session per question.

    ``pool`` (see ``annotations.runs.pools``) is the example pool of retrieving strategies; it is resolved
    and stored once, recorded in the run's snapshot with the rule that keeps each question's answer out of
    its reach (cross-database when the pool is the dataset being run). A strategy that retrieves examples
    is refused without a pool (unless a chosen exemplar set gives it some), rather than run without them.
    ``without``: tools switched off (the paper's Table 10 ablation), for strategies that call tools.
    Without a chosen exemplar set the Interactive-T2S agent gets the paper's set for the dataset (Spider;
    BIRD with or without evidence as ``options["use_evidence"]`` says), unless ``zero_shot``.

    ``sample``: with a ``limit``, ``"first"`` N questions or a ``"random"`` N drawn with ``seed`` (one is drawn
    and stored when none is given), so the same sample can be run again; ``"join-buckets"``: ``limit`` (default
    50) random questions per tables-joined bucket 2, 3 and 4+, seeded alike (the paper's Table 10).
    ``executable_only``: the selection leaves out questions whose database is not available here (they could
    not run, nor be scored).

    ``questions`` (of ``dataset``) replaces the selection above by an explicit list (an experiment's suite).
    ``exemplar_candidate`` (an ``annotations.experiments`` candidate snapshot) is an unpublished candidate
    version's frozen content instead of a set version: only experiments pass it, never the launch forms.

    Sessions are started by ``run_dispatch`` a few at a time (the endpoint's concurrency limit), so a
    1000-question run does not flood the LLM; a spend cap stops starting new ones once reached.
    """
    if strategy not in STRATEGIES:
        raise ValidationError({"strategy": [f"Unknown strategy; choose one of {', '.join(sorted(STRATEGIES))}."]})
    if exemplar_set_version is not None and user is not None and not policies.can_see_version(
            user, exemplar_set_version):  # drawn on a database the launcher was not granted: unknown to them
        raise ValidationError({"exemplar_set_version": ["No such exemplar set version."]})
    if paper_replica:
        if strategy != session_services.DEFAULT_EXEMPLARS_STRATEGY or zero_shot:
            raise ValidationError("The paper-replica preset is the Interactive-T2S agent with the paper's exemplars.")
        options = {**dict(options or {}), **session_services.PAPER_REPLICA_OPTIONS}
    without = list(dict.fromkeys(without or ()))
    if without:
        options = _without_tools(strategy, options, without)
    endpoint = session_services.default_llm_endpoint()
    if endpoint is None:
        raise ValidationError({"llm": ["No LLM endpoint is configured (see README)."]})
    session_services.check_option_types(strategy, options or {})
    try:
        defaults = create_strategy(strategy, {}).config.to_dict()
        configured = create_strategy(strategy, spend.bounded_options(options or {}, endpoint=endpoint,
                                                                     defaults=defaults))
    except (TypeError, ValueError) as exc:
        raise ValidationError({"options": [str(exc)]}) from None
    needs_pool = run_pool_needed(strategy=configured, pool=pool, exemplar_set_version=exemplar_set_version,
                                 exemplar_candidate=exemplar_candidate)
    if needs_pool:
        raise ValidationError({"pool": [needs_pool]})
    if sample == "join-buckets" and not limit:
        limit = TABLE10_PER_BUCKET
    if sample in SEEDED_MODES and limit and seed is None:
        seed = new_seed()
    if exemplar_candidate is not None and (exemplar_set_version is not None or zero_shot or paper_replica):
        raise ValidationError("A candidate version replaces the exemplar set: pick one or the other.")
    if questions is not None:
        questions = list(questions)
        if any(q.dataset_id != dataset.pk for q in questions):
            raise ValidationError("Every question of a run belongs to its dataset.")
        sample, limit, seed, db_ids = "list", None, None, ()
    else:
        questions = questions_for(dataset, db_ids=db_ids, limit=limit, sample=sample, seed=seed,
                                  executable_only=executable_only)
    if not questions:
        raise ValidationError("No question matches this selection.")
    pool_snapshot = None
    if pool:
        # Through the web and the API, a pool is drawn only from datasets and runs the launcher may see.
        resolved = (pool_from_spec(pool) if user is None else
                    pool_from_spec(pool, datasets=policies.visible_datasets(user), runs=policies.visible_runs(user),
                                   versions=policies.visible_versions(user)))
        stored = session_services.example_pool_store(source=resolved.source, examples=resolved.examples)
        rule = resolved.rule_for(dataset)
        pool_snapshot = {**session_services.example_pool_snapshot(stored), "spec": pool, "rule": rule,
                         "rule_text": RULES[rule]}
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
                    "without": without,
                    "sample": {"db_ids": list(db_ids), "limit": limit,
                               "mode": "list" if sample == "list" else sample if limit and sample != "all" else "all",
                               "seed": seed if limit and sample in SEEDED_MODES else None,
                               **({"executable_only": True} if executable_only and sample != "list" else {})}})
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


def _without_tools(strategy: str, options: dict | None, without: Sequence[str]) -> dict:
    """The options with ``without``'s tools switched off; refused for a strategy whose config has no tool list."""
    unknown = [t for t in without if t not in tool_names()]
    if unknown:
        raise ValidationError({"without": [f"No tool named {', '.join(unknown)}; the tools are "
                                           f"{', '.join(tool_names())}."]})
    if "enabled_tools" not in create_strategy(strategy, {}).config.to_dict():
        raise ValidationError({"without": [f"{strategy} has no tools to switch off."]})
    options = dict(options or {})
    enabled = options.get("enabled_tools") or tool_names()
    if not isinstance(enabled, list | tuple):
        raise ValidationError({"options": ["enabled_tools must be a list of strings."]})
    options["enabled_tools"] = [t for t in enabled if t not in without]
    if not options["enabled_tools"]:
        raise ValidationError({"without": ["At least one tool must stay on."]})
    return options


def run_pool_needed(*, strategy, pool: str | None, exemplar_set_version=None, exemplar_candidate=None) -> str | None:
    """Why a run of ``strategy`` (a name, with its default options, or a configured strategy) cannot go without
    a pool as chosen (None: it can): it retrieves examples, no pool is named and no chosen exemplars give any."""
    if isinstance(strategy, str):
        strategy = create_strategy(strategy, {})
    needs = strategy.pool_needed()
    if not needs or pool or _gives_examples(exemplar_set_version, exemplar_candidate):
        return None
    return needs


def _gives_examples(version, candidate) -> bool:
    """Whether the chosen exemplars give a retrieving strategy examples of their own (their final queries)."""
    if candidate is not None:
        return True
    return version is not None and any(e.get("final_sql") for e in version.exemplars)
