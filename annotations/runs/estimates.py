"""What a run would cost, told before it is launched (reads only; no LLM is called).

The first LLM call of each question is built exactly as the Interactive-T2S agent builds it (the chosen or
default exemplar set, the question's database schema, the question) and counted with GPT-4o's tokenizer
(``agent.llm.tokens``, offline). How many calls a question takes is not known in advance: past finished runs of
the same strategy say it when there are any; otherwise the figure is a range, one call to ``max_rounds`` calls
per question. Prices come from the LLM endpoint's record.
"""

from __future__ import annotations

from statistics import mean
from typing import Any

from django.db.models import Avg, Count, Sum

from agent.strategies import build_messages, create_strategy, estimate_message_tokens
from agent.strategies.interactive_t2s import PAPER_REPLICA_OPTIONS
from agent.strategies.prompt import dialect_label
from annotations.exemplars.paper_sets import default_version
from annotations.exemplars.selectors import few_shot_for_version
from annotations.runs.models import Run, RunItem
from annotations.runs.sampling import sample_questions

PROMPT_SAMPLE = 20  # questions whose first prompt is built and counted (spread over the selection)
ESTIMATED_STRATEGY = "interactive_t2s"


def run_estimate(*, dataset, strategy: str, endpoint, exemplar_set_version=None, zero_shot: bool = False,
                 paper_replica: bool = False, db_ids=(), limit: int | None = None, sample: str = "first",
                 seed: int | None = None, without=(), executable_only: bool = False) -> dict[str, Any]:
    """Questions, first-call prompt tokens and the token and cost range of a run launched with these choices."""
    questions = sample_questions(dataset.questions.select_related("database"), db_ids=db_ids, limit=limit,
                                 mode=sample, seed=seed, executable_only=executable_only)
    out: dict[str, Any] = {"questions": len(questions), "strategy": strategy, "first_call": None,
                           "history": None, "prices": _prices(endpoint), "model": getattr(endpoint, "model", ""),
                           # the default endpoint built from environment variables has no record to hold prices
                           "endpoint_from_env": endpoint is not None and endpoint.pk is None}
    if not questions or strategy != ESTIMATED_STRATEGY:
        return out
    config = create_strategy(strategy, PAPER_REPLICA_OPTIONS if paper_replica else {}).config
    out["max_rounds"], out["max_tokens"] = config.max_rounds, config.max_tokens
    if exemplar_set_version is None and (paper_replica or not zero_shot):
        exemplar_set_version = default_version(dataset=dataset, use_evidence=config.use_evidence)
    few_shot = few_shot_for_version(exemplar_set_version) if exemplar_set_version is not None else None
    out["exemplars"] = (f"{exemplar_set_version.exemplar_set.name} v{exemplar_set_version.number}"
                        if exemplar_set_version is not None else "none (zero-shot)")
    step = max(1, len(questions) // PROMPT_SAMPLE)
    counted = []
    for question in questions[::step][:PROMPT_SAMPLE]:
        if question.database is None or question.database.schema_info() is None:
            continue
        messages = build_messages(
            schema=question.database.schema_info(), question=question.question, evidence=question.evidence or None,
            exemplars=few_shot.exemplars if few_shot else (),
            enabled_tools=[t for t in config.enabled_tools if t not in without] or config.enabled_tools,
            use_evidence=config.use_evidence, dialect=dialect_label(question.database.engine),
            custom_tool_description=few_shot.tool_description if few_shot else None,
            custom_tool_description_no_findpath=few_shot.tool_description_no_findpath if few_shot else None,
            prompt_format=config.prompt_format, database=question.database.name,
            exemplar_databases=few_shot.databases if few_shot else ())
        counted.append(estimate_message_tokens(messages))
    if not counted:
        return out
    first = round(mean(counted))
    n = len(questions)
    out.update(first_call=first, counted=len(counted),
               low_prompt=n * first, high_prompt=n * first * config.max_rounds,
               high_completion=n * config.max_tokens * config.max_rounds)
    out["low_cost"] = _cost(out["prices"], out["low_prompt"], 0)
    out["high_cost"] = _cost(out["prices"], out["high_prompt"], out["high_completion"])
    history = _history(strategy)
    if history is not None:
        tokens = history["prompt"] + history["completion"]
        out["history"] = {**history, "tokens": round(n * tokens),
                          "cost": _cost(out["prices"], n * history["prompt"], n * history["completion"])}
    return out


def _prices(endpoint) -> tuple[float, float] | None:
    if endpoint is None or endpoint.input_price_per_mtok is None or endpoint.output_price_per_mtok is None:
        return None
    return float(endpoint.input_price_per_mtok), float(endpoint.output_price_per_mtok)


def _cost(prices: tuple[float, float] | None, prompt: float, completion: float) -> float | None:
    if prices is None:
        return None
    return (prompt * prices[0] + completion * prices[1]) / 1_000_000


def _history(strategy: str) -> dict[str, Any] | None:
    """Mean calls and tokens per question over finished runs of ``strategy`` here (any dataset)."""
    items = RunItem.objects.filter(run__source=Run.Source.AGENT, run__strategy=strategy,
                                   run__status=Run.Status.DONE, session__isnull=False)
    agg = items.aggregate(cases=Count("id"), runs=Count("run", distinct=True), calls=Avg("session__rounds"),
                          prompt=Avg("session__prompt_tokens"), completion=Avg("session__completion_tokens"),
                          cost=Sum("session__cost"))
    if not agg["cases"] or agg["prompt"] is None:
        return None
    return {"cases": agg["cases"], "runs": agg["runs"], "calls": agg["calls"], "prompt": agg["prompt"],
            "completion": agg["completion"] or 0}
