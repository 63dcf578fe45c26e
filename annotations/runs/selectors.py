"""Reads for datasets and runs: summaries, breakdowns, filtered items, comparisons."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from django.core.cache import cache
from django.db.models import Avg, Count, F, Q, Sum

from agent.models import Turn
from agent.services import open_connector
from agent.sql import Limits, SQLError
from annotations.evaluation import DIFFICULTY_ORDER, SCORED_STATUSES, TABLE_BUCKETS, Status, constraint_values
from annotations.runs.models import NO_PREDICTION, DatasetQuestion, Run, RunItem

SCORED = sorted(s.value for s in SCORED_STATUSES)


def _rate(correct: int, scored: int) -> float | None:
    return round(100.0 * correct / scored, 2) if scored else None


def run_by_database(*, run: Run) -> list[dict[str, Any]]:
    rows = (run.items.values("question__db_id")
            .annotate(questions=Count("id"), scored=Count("id", filter=Q(eval_status__in=SCORED)),
                      correct=Count("id", filter=Q(ex=True)))
            .order_by("question__db_id"))
    return [{"key": r["question__db_id"], "questions": r["questions"], "scored": r["scored"],
             "correct": r["correct"], "ex": _rate(r["correct"], r["scored"])} for r in rows]


def _ordered(mapping: dict[str, dict], order: Sequence[str]) -> list[dict[str, Any]]:
    keys = sorted(mapping, key=lambda k: (order.index(k) if k in order else len(order), k))
    return [{"key": k, **mapping[k]} for k in keys]


def run_agent_figures(*, run: Run) -> dict[str, Any] | None:
    """Rounds, LLM calls, tokens, cost and time per case, and tokens and cost per LLM call (the paper's Table 8
    reports rounds and cost per case but tokens per call: a case costs several calls).

    A finished run's come from the cache the dataset page fills (``dataset_run_table``), under the same key."""
    key = _figures_key(run)
    cached = cache.get(key) if key else None
    if cached is not None:
        return cached["figures"]
    items = run.items.filter(session__isnull=False)
    agg = items.aggregate(**_AGENT_AGGREGATES)
    figures = None
    if agg["cases"]:
        # An LLM call is a turn with a completion (a failed call has none and spent nothing).
        per_call = Turn.objects.filter(session_id__in=items.values("session_id"),
                                       completion__isnull=False).aggregate(**_CALL_AGGREGATES)
        figures = _agent_figures(agg, per_call)
    if key:
        cache.set(key, {"figures": figures}, timeout=7 * 24 * 3600)
    return figures


_AGENT_AGGREGATES = {
    "cases": Count("id"), "rounds": Avg("session__rounds"), "prompt": Avg("session__prompt_tokens"),
    "completion": Avg("session__completion_tokens"), "cost": Sum("session__cost"),
    "seconds": Avg("session__elapsed_ms")}
_CALL_AGGREGATES = {"calls": Count("id"), "prompt": Avg("prompt_tokens"), "completion": Avg("completion_tokens"),
                    "cost": Sum("cost")}


def _agent_figures(agg: dict[str, Any], per_call: dict[str, Any]) -> dict[str, Any]:
    agg["cost_per_case"] = (agg["cost"] / agg["cases"]) if agg["cost"] is not None and agg["cases"] else None
    agg["seconds"] = agg["seconds"] / 1000 if agg["seconds"] is not None else None
    agg["tokens"] = (agg["prompt"] or 0) + (agg["completion"] or 0)
    calls = per_call.get("calls") or 0
    agg["calls"] = calls / agg["cases"] if agg["cases"] else None
    agg["per_call"] = {
        "calls": calls, "prompt": per_call.get("prompt"), "completion": per_call.get("completion"),
        "tokens": (per_call.get("prompt") or 0) + (per_call.get("completion") or 0) if calls else None,
        "cost": per_call["cost"] / calls if per_call.get("cost") is not None and calls else None,
    }
    return agg


def _value_flags(dataset_id: int, version: str) -> dict[int, tuple[bool, bool]]:
    """Per question: (gold compares a column with a string value, every such value named in the question).

    Parsing every gold query takes a moment, so the flags go through Django's cache, keyed by the dataset's
    last change (``version``): an edited dataset is never served stale flags.
    """
    key = f"t2s:value-flags:{dataset_id}:{version}"
    flags = cache.get(key)
    if flags is None:
        flags = {}
        for index, question, sql in DatasetQuestion.objects.filter(dataset_id=dataset_id).values_list(
                "index", "question", "gold_sql"):
            values = constraint_values(sql)
            folded = question.casefold()
            flags[index] = (bool(values), bool(values) and all(v.casefold() in folded for v in values))
        cache.set(key, flags, timeout=24 * 3600)
    return flags


@lru_cache(maxsize=32)
def _paper_table_1(dataset_id: int, version: str) -> dict[str, Any]:
    from annotations.evaluation import paper_cell_value_stats
    from annotations.runs.models import DatasetQuestion

    stats = paper_cell_value_stats(DatasetQuestion.objects.filter(dataset_id=dataset_id).values_list(
        "question", "gold_sql"))
    return {"cvr": stats.cvr, "cvcr": stats.cvcr, "queries": stats.queries, "with_values": stats.with_values,
            "values": stats.values, "found": stats.found}


def dataset_table_1(*, dataset) -> dict[str, Any]:
    """The paper's Table 1 for a dataset (all its questions), with the paper's own definition: an `=` against a
    single-quoted string literal; CVCR counts such values found case-sensitively in the question."""
    return _paper_table_1(dataset.pk, dataset.updated_at.isoformat())


def cell_value_figures(*, run: Run) -> dict[str, Any]:
    """Table 1 for the run's dataset (per dataset, not per run) in two readings, and EX with and without
    value constraints.

    ``paper``: the paper's definition (``dataset_table_1``), which reproduces its published figures. ``cvr`` and
    ``cvcr``: our broader reading (see BENCHMARKS.md): a question has value constraints when its gold SQL
    compares a column with any string value (=, <>, LIKE, IN, ...); covered when every such value occurs in the
    question, case-insensitively. The EX rows use the broader reading.
    """
    flags = _value_flags(run.dataset_id, run.dataset.updated_at.isoformat())
    table_1 = dataset_cell_values(dataset=run.dataset)
    groups: dict[str, list[int]] = {"with values": [], "without values": [], "values named in the question": [],
                                    "values not named": []}
    for index, ex, status in run.items.values_list("question__index", "ex", "eval_status"):
        has, covered = flags.get(index, (False, False))
        if status not in SCORED:
            continue
        groups["with values" if has else "without values"].append(bool(ex))
        if has:
            groups["values named in the question" if covered else "values not named"].append(bool(ex))
    rows = [{"key": k, "questions": len(v), "scored": len(v), "correct": sum(v), "ex": _rate(sum(v), len(v))}
            for k, v in groups.items()]
    return {**table_1, "rows": rows}


def dataset_cell_values(*, dataset) -> dict[str, Any]:
    """Table 1 (CVR/CVCR) of a dataset in both readings: ``paper`` (the paper's definition, ``dataset_table_1``)
    and ``cvr``/``cvcr`` (our broader reading, see ``cell_value_figures``). Shown on the dataset and run pages."""
    flags = _value_flags(dataset.pk, dataset.updated_at.isoformat())
    questions = len(flags)
    with_values = sum(1 for has, _ in flags.values() if has)
    covered = sum(1 for has, cov in flags.values() if has and cov)
    return {"cvr": _rate(with_values, questions), "cvcr": _rate(covered, with_values),
            "paper": dataset_table_1(dataset=dataset)}


def dataset_run_table(*, dataset) -> list[dict[str, Any]]:
    """Every run of a dataset side by side: EX, Soft-F1 and, for our strategies, cost figures per question.

    The figures of a run aggregate every LLM call of its sessions (51k turns for 10 runs of 1,034 questions:
    half a second per view), so a finished run's are kept in the cache, keyed by the run's state; the others are
    counted in two grouped queries for all of them (not two per run)."""
    runs = list(dataset.runs.order_by("-created_at"))
    keys = {run.pk: _figures_key(run) for run in runs}
    cached = cache.get_many([k for k in keys.values() if k])
    figures = {pk: cached[k]["figures"] for pk, k in keys.items() if k in cached}
    missing = [run.pk for run in runs if run.pk not in figures]
    if missing:
        calls = {row.pop("run_id"): row for row in (
            Turn.objects.filter(session__run_items__run_id__in=missing, completion__isnull=False).order_by()
            .values(run_id=F("session__run_items__run_id")).annotate(**_CALL_AGGREGATES))}
        fresh = {}
        for row in (RunItem.objects.filter(run_id__in=missing, session__isnull=False).order_by().values("run_id")
                    .annotate(**_AGENT_AGGREGATES)):
            run_id = row.pop("run_id")  # the figures are those run_agent_figures gives, under the same key
            fresh[run_id] = _agent_figures(row, calls.get(run_id, {}))
        cache.set_many({keys[pk]: {"figures": fresh.get(pk)} for pk in missing if keys[pk]}, timeout=7 * 24 * 3600)
        figures.update({pk: fresh.get(pk) for pk in missing})
    return [{"run": run, "totals": run.totals or {}, "agent": figures.get(run.pk)} for run in runs]


def _figures_key(run: Run) -> str | None:
    """Cache key of a finished run's agent figures (None while it runs: its figures still change). A resumed run
    changes status and is evaluated again, so its key changes."""
    if run.status not in (Run.Status.DONE, Run.Status.CANCELLED, Run.Status.FAILED):
        return None
    evaluated = run.evaluated_at.timestamp() if run.evaluated_at else ""
    return f"t2s:run-agent-figures:{run.pk}:{run.created_at.timestamp()}:{run.status}:{evaluated}"


def prediction_counts(*, run: Run) -> dict[str, Any] | None:
    """How an imported file's predictions cover the dataset, with the sentence shown before scoring, e.g.
    "500 predictions for 1034 questions: 534 missing". None for runs of our strategies (and older imports)."""
    counts = (run.config or {}).get("predictions")
    if run.source != Run.Source.IMPORTED or not counts:
        return None
    text = f"{counts['given']} predictions for {counts['questions']} questions"
    if counts["missing"]:
        text += f": {counts['missing']} missing"
    if counts["malformed"]:
        text += f" ({counts['malformed']} of the {counts['given']} malformed)"
    if counts["extra"]:
        text += f"; {counts['extra']} past the last question ignored"
    return {**counts, "text": text, "choice": run.missing_predictions,
            "choice_label": run.get_missing_predictions_display() if run.missing_predictions else ""}


def run_summary(*, run: Run) -> dict[str, Any]:
    breakdowns = run.breakdowns or {}
    return {
        "run": run.pk, "name": run.name, "dataset": run.dataset.name, "source": run.source,
        "status": run.status, "totals": run.totals,
        "by_difficulty": _ordered(breakdowns.get("difficulty", {}), DIFFICULTY_ORDER),
        "by_tables": _ordered(breakdowns.get("tables", {}), TABLE_BUCKETS),
        "by_database": run_by_database(run=run),
        "agent": run_agent_figures(run=run),
        "cell_values": cell_value_figures(run=run) if run.totals else None,
        "import_issues": run.import_issues,
        "predictions": prediction_counts(run=run),
        "unscored": (run.totals["questions"] - run.totals["scored"]) if run.totals else None,
        "outcomes": outcome_counts(run=run) if run.totals else [],
    }


def render_summary(summary: dict[str, Any]) -> str:
    """The figures as plain text for the command line."""
    t = summary["totals"]
    lines = [f"{summary['dataset']} · {summary['name']}"]
    counts = summary.get("predictions")
    if counts and counts["missing"]:
        lines.append(f"{counts['text']}; missing predictions {counts['choice_label'] or 'not chosen yet'}")
    if not t:
        return "\n".join(lines) + "\n(not evaluated)"
    ex = "n/a" if t["ex"] is None else f"{t['ex']:.2f}%"
    f1 = "" if t.get("soft_f1") is None else f"   Soft-F1 {t['soft_f1']:.2f}%"
    lines.append(f"EX {ex} ({t['correct']} correct of {t['scored']} scored questions){f1}   "
                 f"{t['questions']} questions in the run, {t['questions'] - t['scored']} of them not scored "
                 f"(gold error or no database)")
    cv = summary.get("cell_values")
    if cv:
        paper = cv["paper"]
        lines.append(f"Table 1 of the dataset, paper definition: CVR {_pct(paper['cvr'])} "
                     f"({paper['with_values']}/{paper['queries']})   CVCR {_pct(paper['cvcr'])} "
                     f"({paper['found']}/{paper['values']})")
        lines.append(f"Table 1, broader reading (any string comparison): CVR {_pct(cv['cvr'])}   "
                     f"CVCR {_pct(cv['cvcr'])}")
    for title, rows in (("by difficulty", summary["by_difficulty"]), ("by tables in the gold query",
                                                                       summary["by_tables"])):
        lines.append(f"\n{title}:")
        for r in rows:
            rate = "n/a" if r["ex"] is None else f"{r['ex']:6.2f}%"
            lines.append(f"  {r['key']:<12} {rate}  ({r['correct']}/{r['scored']})")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}%"


def run_items(*, run: Run, outcome: str = "", db_id: str = "", difficulty: str = "", tables: str = ""):
    qs = run.items.select_related("question", "session").order_by("question__index")
    if outcome == "correct":
        qs = qs.filter(ex=True)
    elif outcome == "wrong":
        qs = qs.filter(ex=False, eval_status=Status.OK)
    elif outcome == "error":
        qs = qs.filter(eval_status__in=[Status.PRED_ERROR, Status.PRED_TIMEOUT])
    elif outcome == "unscored":
        qs = qs.filter(eval_status__in=[Status.GOLD_ERROR, Status.NOT_EXECUTABLE])
    if db_id:
        qs = qs.filter(question__db_id=db_id)
    if difficulty:
        qs = qs.filter(question__difficulty=difficulty)
    if tables:
        qs = qs.filter(question__table_count__gte=4) if tables == "4+" else qs.filter(question__table_count=tables)
    return qs


def outcome(item: RunItem) -> tuple[str, str]:
    """A run item's result in words, with its badge class: "correct", "wrong result", "prediction failed", ...,
    "not scored: gold query failed"; the one vocabulary of the compare page and its CSV."""
    if item.ex:
        return "correct", "ok"
    status = item.eval_status
    if status == Status.OK:
        return "wrong result", "error"
    if status == Status.PRED_ERROR:
        return ("no prediction" if item.prediction_note == NO_PREDICTION else "prediction failed"), "error"
    if status == Status.PRED_TIMEOUT:
        return "prediction timed out", "error"
    if status == Status.GOLD_ERROR:
        return "not scored: gold query failed", ""
    if status == Status.NOT_EXECUTABLE:
        return "not scored: no database", ""
    return "not evaluated yet", ""


def outcome_counts(*, run: Run) -> list[tuple[str, int]]:
    """How many of the run's questions ended each way, in the words of ``outcome`` (most frequent first)."""
    counts: dict[str, int] = defaultdict(int)
    rows = run.items.values_list("ex", "eval_status", "prediction_note").annotate(n=Count("id")).order_by()
    for ex, status, note, n in rows:
        counts[outcome(RunItem(ex=ex, eval_status=status, prediction_note=note))[0]] += n
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


COMPARE_KINDS = {
    "fixed": "wrong → right", "broken": "right → wrong", "both_right": "both right", "both_wrong": "both wrong",
    "unscored": "not scored in A or B",
}


def _pair_kind(ia: RunItem, ib: RunItem) -> str:
    if ia.ex is None or ib.ex is None:
        return "unscored"
    if ia.ex == ib.ex:
        return "both_right" if ia.ex else "both_wrong"
    return "fixed" if ib.ex else "broken"


def _bucket_of(question: DatasetQuestion) -> tuple[str, str]:
    from annotations.evaluation.sqlstats import table_bucket

    return question.difficulty or "unknown", table_bucket(question.table_count) or "unknown"


def run_compare(*, a: Run, b: Run, kind: str = "", bucket: str = "", db_id: str = "") -> dict[str, Any]:
    """Totals, flips (wrong to right, right to wrong), per-bucket deltas and every question-level pair.

    The counts cover every question of either run and add up: the questions both runs have (right, wrong,
    flipped, or not scored in one of them, named with the reason) plus those only one run has (a sample,
    or a prediction file scored as a subset). ``kind`` (a key of ``COMPARE_KINDS`` or ``flips``), ``bucket``
    (``difficulty:easy``, ``tables:2``) and ``db_id`` filter the pairs; the counts stay those of all.
    """
    items_a = {i.question_id: i for i in a.items.select_related("question")}
    items_b = {i.question_id: i for i in b.items.select_related("question")}
    common = sorted(set(items_a) & set(items_b), key=lambda q: items_a[q].question.index)
    pairs, counts, unscored_reasons = [], dict.fromkeys(COMPARE_KINDS, 0), defaultdict(int)
    for qid in common:
        ia, ib = items_a[qid], items_b[qid]
        pair_kind = _pair_kind(ia, ib)
        counts[pair_kind] += 1
        word_a, class_a = outcome(ia)
        word_b, class_b = outcome(ib)
        if pair_kind == "unscored":
            unscored_reasons[(word_a if ia.ex is None else word_b).removeprefix("not scored: ")] += 1
        pairs.append({"question": ia.question, "a": ia, "b": ib, "kind": pair_kind, "kind_label": COMPARE_KINDS[
            pair_kind], "word_a": word_a, "class_a": class_a, "word_b": word_b, "class_b": class_b})
    databases = sorted({p["question"].db_id for p in pairs})
    if kind == "flips":
        pairs = [p for p in pairs if p["kind"] in ("fixed", "broken")]
    elif kind in COMPARE_KINDS:
        pairs = [p for p in pairs if p["kind"] == kind]
    if bucket:
        group, _, key = bucket.partition(":")
        position = 0 if group == "difficulty" else 1
        pairs = [p for p in pairs if _bucket_of(p["question"])[position] == key]
    if db_id:
        pairs = [p for p in pairs if p["question"].db_id == db_id]
    buckets = []
    for name, key in (("difficulty", "difficulty"), ("tables", "tables")):
        ba, bb = (a.breakdowns or {}).get(key, {}), (b.breakdowns or {}).get(key, {})
        order = DIFFICULTY_ORDER if key == "difficulty" else TABLE_BUCKETS
        for k in sorted(set(ba) | set(bb), key=lambda k: (order.index(k) if k in order else len(order), k)):
            ea, eb = (ba.get(k) or {}).get("ex"), (bb.get(k) or {}).get("ex")
            # each rate with its count: a bucket of one question flips by 100 points
            buckets.append({"group": name, "key": k, "value": f"{name}:{k}", "a": ea, "b": eb,
                            "a_correct": (ba.get(k) or {}).get("correct"), "a_scored": (ba.get(k) or {}).get("scored"),
                            "b_correct": (bb.get(k) or {}).get("correct"), "b_scored": (bb.get(k) or {}).get("scored"),
                            "delta": None if ea is None or eb is None else round(eb - ea, 2)})
    ta, tb = a.totals or {}, b.totals or {}
    only_a, only_b = len(set(items_a) - set(items_b)), len(set(items_b) - set(items_a))
    return {"a": a, "b": b, "pairs": pairs, "counts": counts, "common": len(common),
            "unscored_reasons": dict(sorted(unscored_reasons.items())), "only_a": only_a, "only_b": only_b,
            "all_questions": len(common) + only_a + only_b, "databases": databases,
            "buckets": buckets,
            "delta_ex": None if ta.get("ex") is None or tb.get("ex") is None else round(tb["ex"] - ta["ex"], 2)}


COMPARE_CSV_HEADER = ["index", "db_id", "difficulty", "tables_joined_paper_count", "question", "kind",
                      "a_outcome", "b_outcome", "a_sql", "b_sql", "gold_sql"]


def compare_csv_rows(comparison: dict[str, Any]):
    """The (filtered) pairs of ``run_compare`` as CSV rows after ``COMPARE_CSV_HEADER``."""
    for p in comparison["pairs"]:
        q = p["question"]
        yield [q.index, q.db_id, q.difficulty, q.table_count, q.question, p["kind_label"], p["word_a"], p["word_b"],
               p["a"].predicted_sql, p["b"].predicted_sql, q.gold_sql]


def run_item_with_results(*, item: RunItem, max_rows: int = 200):
    """Gold and predicted result tables for one question, re-executed read-only, with differing rows marked."""
    database = item.question.database
    out: dict[str, Any] = {"gold": None, "pred": None, "gold_error": "", "pred_error": ""}
    if database is None:
        out["gold_error"] = out["pred_error"] = "The database of this question is not available here."
        return out
    limits = Limits(timeout_s=10, max_rows=max_rows, count_cap=10_000)
    with open_connector(database, limits=limits) as conn:
        for key, sql in (("gold", item.question.gold_sql), ("pred", item.predicted_sql)):
            if not sql:
                out[f"{key}_error"] = "No query."
                continue
            try:
                out[key] = conn.execute(sql)
            except SQLError as exc:
                out[f"{key}_error"] = str(exc)
    if out["gold"] is not None and out["pred"] is not None:
        gold_rows = {tuple(map(_norm, r)) for r in out["gold"].rows}
        pred_rows = {tuple(map(_norm, r)) for r in out["pred"].rows}
        out["pred_only"] = {i for i, r in enumerate(out["pred"].rows) if tuple(map(_norm, r)) not in gold_rows}
        out["gold_only"] = {i for i, r in enumerate(out["gold"].rows) if tuple(map(_norm, r)) not in pred_rows}
    return out


def _norm(value: Any) -> Any:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def run_exemplars(*, run: Run, user) -> dict[str, Any] | None:
    """Which exemplars a run of our strategies used: the version (or none) and how it was chosen. A version or
    candidate ``user`` may not see (its set's workspace, its databases) is named as withheld, not by its set."""
    if run.source != Run.Source.AGENT:
        return None
    from annotations import policies

    pk = (run.config or {}).get("exemplar_set_version")
    candidate = (run.config or {}).get("exemplar_candidate")
    version = policies.visible_versions(user).select_related("exemplar_set").filter(pk=pk).first() if pk else None
    if candidate and not policies.visible_candidates(user).filter(pk=candidate.get("candidate_id")).exists():
        candidate = None
    choice = (run.config or {}).get("exemplars_choice") or ("chosen" if pk else "zero-shot")
    from annotations.experiments.models import ExperimentRun

    return {"version": version, "choice": choice, "candidate": candidate,
            "withheld": bool(pk and version is None or (run.config or {}).get("exemplar_candidate") and not candidate),
            "experiment": ExperimentRun.objects.filter(run=run).first()}
