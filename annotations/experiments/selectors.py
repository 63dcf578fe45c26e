"""Reads of suites, candidate versions and experiments (no writes here).

The experiment report reads its runs' stored items and sessions once and hands the figures to the pure
``annotations.evaluation.trials`` core (spread, flips, verdict).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Q, QuerySet

from agent.strategies.prompt import FewShot, estimate_tokens, system_prompt
from annotations.evaluation import trials as trial_stats
from annotations.exemplars.selectors import content_hash, exemplar_snapshot, exemplars_from_items
from annotations.experiments.models import (
    Candidate,
    CandidateItem,
    CandidateSnapshot,
    ExemplarOrigin,
    Experiment,
    ExperimentRun,
    Suite,
    SuiteQuestion,
    SuiteVersion,
)
from annotations.labels.models import Label
from annotations.models import Exemplar, ExemplarSet, ExemplarSetVersion
from annotations.runs.models import Run, RunItem

ARMS = (ExperimentRun.Arm.CANDIDATE, ExperimentRun.Arm.BASELINE)


# --- candidate versions ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CandidateContent:
    """What a candidate would send now (its exemplars as a version stores them) and its content hash."""

    exemplars: list[dict[str, Any]]
    tool_description: str
    tool_description_no_findpath: str
    content_hash: str


def candidate_items(candidate: Candidate) -> list[CandidateItem]:
    return list(candidate.items.select_related("exemplar__database", "exemplar__author").order_by("position"))


def item_content(item: CandidateItem) -> dict[str, Any]:
    """The published copy kept as is, or the exemplar's current content (a draft's too)."""
    return dict(item.published) if item.published is not None else exemplar_snapshot(item.exemplar)


def candidate_content(candidate: Candidate, items: Sequence[CandidateItem] | None = None) -> CandidateContent:
    exemplars = [item_content(item) for item in (candidate_items(candidate) if items is None else items)]
    tool, no_findpath = candidate.tool_description.strip(), candidate.tool_description_no_findpath.strip()
    return CandidateContent(exemplars, tool, no_findpath,
                            content_hash(tool_description=tool, exemplars=exemplars,
                                         tool_description_no_findpath=no_findpath))


def candidate_rows(candidate: Candidate) -> list[dict[str, Any]]:
    """Each item with what the page says about it: kept from the published version, the exemplar's current
    content (a draft, or edited since it was published), and the exemplar's review state."""
    rows = []
    base = {e.get("exemplar_id"): e for e in (candidate.base_version.exemplars if candidate.base_version else [])}
    for item in candidate_items(candidate):
        content = item_content(item)
        exemplar = item.exemplar
        if item.published is not None:
            status = "published copy"
            changed_since = exemplar is not None and _prompt_part(exemplar_snapshot(exemplar)) != _prompt_part(
                item.published)
        else:
            status = "current content" if exemplar.pk in base else "added"
            changed_since = False
        rows.append({"item": item, "exemplar": exemplar, "content": content, "status": status,
                     "edited_since_published": changed_since,
                     "state": exemplar.get_state_display() if exemplar is not None else "published",
                     "approved": item.published is not None or exemplar.state == Exemplar.State.APPROVED})
    return rows


def _prompt_part(item: dict[str, Any]) -> dict[str, Any]:
    from annotations.exemplars.selectors import PROMPT_KEYS

    return {k: item.get(k) for k in PROMPT_KEYS}


def candidate_changes(candidate: Candidate, content: CandidateContent | None = None) -> dict[str, list]:
    """Against the base version: exemplars added, removed, and kept but with new content."""
    content = content or candidate_content(candidate)
    base = {e.get("exemplar_id"): e for e in (candidate.base_version.exemplars if candidate.base_version else [])}
    now = {e.get("exemplar_id"): e for e in content.exemplars}
    return {"added": [i for i in now if i not in base], "removed": [i for i in base if i not in now],
            "edited": [i for i in now if i in base and _prompt_part(now[i]) != _prompt_part(base[i])]}


def candidate_token_count(content: CandidateContent, *, use_evidence: bool = True) -> int:
    """Tokens of the system message the candidate contributes (GPT-4o's tokenizer, as a version's page counts);
    the preview page gives the exact messages of a session with their count."""
    return estimate_tokens(system_prompt(exemplars_from_items(content.exemplars), use_evidence=use_evidence,
                                         custom_tool_description=content.tool_description or None))


def open_candidates(exemplar_set: ExemplarSet) -> QuerySet[Candidate]:
    return exemplar_set.candidates.filter(state=Candidate.State.OPEN).order_by("-number")


def snapshot_run_config(snapshot: CandidateSnapshot) -> dict[str, Any]:
    """What a run records of the candidate it sends (``run.config["exemplar_candidate"]``)."""
    candidate = snapshot.candidate
    return {"snapshot": snapshot.pk, "candidate_id": candidate.pk, "candidate": candidate.number,
            "set": candidate.exemplar_set.name, "set_id": candidate.exemplar_set_id,
            "exemplars": len(snapshot.exemplars), "content_hash": snapshot.content_hash}


def snapshot_few_shot(snapshot_id: int) -> FewShot | None:
    """A frozen candidate as session data, built once per process (snapshots are immutable). Keyed by the id and
    the snapshot's creation time and content: an id can be handed out again after a rolled-back transaction."""
    stamp = CandidateSnapshot.objects.filter(pk=snapshot_id).values_list("created_at", "content_hash").first()
    return _snapshot_few_shot_at(snapshot_id, stamp) if stamp is not None else None


@lru_cache(maxsize=16)
def _snapshot_few_shot_at(snapshot_id: int, stamp: tuple) -> FewShot | None:
    snapshot = CandidateSnapshot.objects.select_related("candidate__exemplar_set").filter(pk=snapshot_id).first()
    if snapshot is None:
        return None
    return FewShot(exemplars_from_items(snapshot.exemplars), snapshot.tool_description or None,
                   {**snapshot_run_config(snapshot), "id": None, "number": None},
                   snapshot.tool_description_no_findpath or None,
                   tuple(item.get("database") for item in snapshot.exemplars))


# --- suites --------------------------------------------------------------------------------------------------


def suite_entries(version: SuiteVersion) -> QuerySet[SuiteQuestion]:
    return version.entries.select_related("question").order_by("position")


def suite_version_from_spec(suites: QuerySet[Suite], spec: str) -> SuiteVersion | None:
    """``NAME`` (its newest version) or ``NAME:N`` / ``NAME:vN``, among ``suites``."""
    name, _, number = spec.partition(":")
    suite = suites.filter(name=name).first()
    if suite is None:
        return None
    if not number:
        return suite.latest_version()
    digits = number.lstrip("v")
    return suite.versions.filter(number=int(digits)).first() if digits.isdigit() else None


def origin_text(origin: dict[str, Any]) -> str:
    """One origin of a suite question in words."""
    kind = origin.get("kind")
    if kind == "sample":
        return f"sample of {origin.get('size')} (seed {origin.get('seed')})"
    if kind == "failures":
        labels = ", ".join(origin.get("category_names") or origin.get("categories") or [])
        return f"failure of run #{origin.get('run')}" + (f" labelled {labels}" if labels else "")
    if kind == "picked":
        return "picked by hand"
    if kind == "suite":
        inner = "; ".join(origin_text(o) for o in origin.get("origins") or [])
        return f"suite {origin.get('suite')} v{origin.get('version')}" + (f" ({inner})" if inner else "")
    return str(origin)


def exemplar_origins(exemplars: Iterable[int]) -> dict[int, ExemplarOrigin]:
    return {o.exemplar_id: o for o in ExemplarOrigin.objects.filter(exemplar_id__in=list(exemplars))
            .select_related("run")}


def default_suite_source(candidate: Candidate) -> dict[str, Any] | None:
    """The suite an experiment of this candidate defaults to: the failures, with the same labels, of the run
    the newest exemplar written from a labelled failure came from ("write an exemplar for this")."""
    ids = [i.exemplar_id for i in candidate.items.filter(exemplar__isnull=False).order_by("-exemplar_id")]
    origins = exemplar_origins(ids)
    for exemplar_id in ids:
        origin = origins.get(exemplar_id)
        if origin is not None and origin.run_id is not None:
            return {"kind": "failures", "run": origin.run_id, "categories": list(origin.categories),
                    "exemplar": exemplar_id, "run_name": origin.run.name}
    return None


def suite_version_with_recipe(suites: QuerySet[Suite], recipe: list[dict[str, Any]]) -> SuiteVersion | None:
    """The newest visible suite version built from exactly this recipe (so a default is not built twice)."""
    for version in SuiteVersion.objects.filter(suite__in=suites).order_by("-created_at")[:200]:
        if version.recipe == recipe:
            return version
    return None


# --- experiments ------------------------------------------------------------------------------------------------


def experiment_runs(experiment: Experiment) -> dict[tuple[str, int], Run]:
    return {(er.arm, er.trial): er.run for er in
            ExperimentRun.objects.filter(experiment=experiment).select_related("run")}


FINISHED = (Run.Status.DONE, Run.Status.CANCELLED, Run.Status.FAILED)


def experiment_state(experiment: Experiment, runs: dict[tuple[str, int], Run] | None = None) -> str:
    """``running`` while a run runs or is scored, then ``done``, ``cancelled`` or ``failed``."""
    statuses = {r.status for r in (runs or experiment_runs(experiment)).values()}
    if statuses - set(FINISHED):
        return "cancelling" if experiment.cancelled else "running"
    if Run.Status.FAILED in statuses:
        return "failed"
    if Run.Status.CANCELLED in statuses or experiment.cancelled:
        return "cancelled"
    return "done"


def experiment_progress(experiment: Experiment, runs: dict[tuple[str, int], Run] | None = None) -> dict[str, Any]:
    """Questions answered over all the experiment's runs (as each run's progress counts them)."""
    ids = [r.pk for r in (runs or experiment_runs(experiment)).values()]
    agg = RunItem.objects.filter(run_id__in=ids).aggregate(
        total=Count("id"), finished=Count("id", filter=~Q(predicted_sql="") | ~Q(prediction_note="")),
        active=Count("id", filter=Q(session__status__in=("queued", "running"))))
    agg["percent"] = round(100 * agg["finished"] / agg["total"]) if agg["total"] else 100
    return agg


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _normalise_question(text: str) -> str:
    return " ".join((text or "").split()).casefold()


def _in_prompt(experiment: Experiment) -> dict[str, set[str]]:
    """Question texts each arm shows as exemplars (a suite question among them has its answer in the prompt)."""
    candidate = {_normalise_question(e.get("question")) for e in experiment.candidate_snapshot.exemplars}
    baseline_items = (experiment.baseline_version.exemplars if experiment.baseline_version_id
                      else experiment.baseline_snapshot.exemplars)
    return {ExperimentRun.Arm.CANDIDATE: candidate,
            ExperimentRun.Arm.BASELINE: {_normalise_question(e.get("question")) for e in baseline_items}}


def _arm_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"tokens": _mean([r["tokens"] for r in rows]), "cost": _mean([r["cost"] for r in rows]),
            "rounds": _mean([r["rounds"] for r in rows])}


def experiment_report(*, experiment: Experiment, user=None) -> dict[str, Any]:
    """Everything the experiment page, its API and the ``experiment`` command show.

    - per arm: EX of each trial with counts, the spread (min/max/mean), tokens, cost and rounds per question;
    - per question: how many trials of each arm got it right, its kind (gained, lost, ...), tokens, cost and
      rounds per arm (means over trials), the labels given to it in the experiment's runs and in the runs its
      suite took it from (those ``user`` may see), and whether it is itself an exemplar of an arm;
    - the verdict (``annotations.evaluation.trials``), leaving out the questions that are exemplars.
    """
    runs = experiment_runs(experiment)
    state = experiment_state(experiment, runs)
    n = experiment.trials
    entries = list(suite_entries(experiment.suite_version))
    run_ids = [r.pk for r in runs.values()]
    arm_of = {r.pk: (arm, trial) for (arm, trial), r in runs.items()}
    cells: dict[int, dict[str, dict[int, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for row in RunItem.objects.filter(run_id__in=run_ids).values(
            "id", "run_id", "question_id", "ex", "eval_status", "session_id", "session__prompt_tokens",
            "session__completion_tokens", "session__cost", "session__rounds"):
        arm, trial = arm_of[row["run_id"]]
        has_session = row["session_id"] is not None
        cells[row["question_id"]][arm][trial] = {
            "item": row["id"], "run": row["run_id"], "ex": row["ex"], "session": row["session_id"],
            "tokens": (row["session__prompt_tokens"] + row["session__completion_tokens"]) if has_session else None,
            "cost": row["session__cost"], "rounds": row["session__rounds"] if has_session else None}
    prompts = _in_prompt(experiment)
    questions, outcomes_for_verdict = [], []
    for entry in entries:
        q = entry.question
        per_arm = cells.get(q.pk, {})
        arms = {}
        for arm in ARMS:
            trials = [per_arm.get(arm, {}).get(t) for t in range(1, n + 1)]
            known = [c for c in trials if c is not None]
            right = None if len(known) < n or any(c["ex"] is None for c in known) else sum(
                1 for c in known if c["ex"])
            arms[arm] = {"right": right, "trials": trials, **_arm_figures(known)}
        outcome = trial_stats.QuestionOutcome(arms["candidate"]["right"], arms["baseline"]["right"], n)
        text = _normalise_question(q.question)
        in_prompt = [arm for arm in ARMS if text in prompts[arm]]
        if not in_prompt:
            outcomes_for_verdict.append(outcome)
        first_differing = next((t for t in range(1, n + 1)
                                if (arms["candidate"]["trials"][t - 1] or {}).get("ex")
                                != (arms["baseline"]["trials"][t - 1] or {}).get("ex")), 1)
        questions.append({"question": q, "origins": entry.origins, "candidate": arms["candidate"],
                          "baseline": arms["baseline"], "kind": outcome.kind, "consistent": outcome.consistent,
                          "in_prompt": in_prompt, "trial": first_differing, "labels": []})
    _attach_labels(questions, experiment=experiment, run_ids=run_ids, user=user)
    arm_summaries = {}
    for arm in ARMS:
        trial_rows = []
        for t in range(1, n + 1):
            run = runs.get((arm, t))
            totals = (run.totals or {}) if run is not None and run.status == Run.Status.DONE else {}
            trial_rows.append({"trial": t, "run": run, "ex": totals.get("ex"), "correct": totals.get("correct"),
                               "scored": totals.get("scored"), "questions": totals.get("questions")})
        cells_of_arm = [c for q in questions for c in q[arm]["trials"] if c is not None]
        arm_summaries[arm] = {"trials": trial_rows, **_arm_figures(cells_of_arm),
                              "total_cost": sum(c["cost"] for c in cells_of_arm if c["cost"] is not None)
                              if any(c["cost"] is not None for c in cells_of_arm) else None}
    comparison = trial_stats.compare(
        candidate_ex=[t["ex"] if state in ("done",) else None for t in arm_summaries["candidate"]["trials"]],
        baseline_ex=[t["ex"] if state in ("done",) else None for t in arm_summaries["baseline"]["trials"]],
        outcomes=outcomes_for_verdict)
    verdict = comparison.verdict
    if state in ("cancelled", "failed"):
        verdict = trial_stats.Verdict("incomplete", f"No verdict: the experiment was {state} before every run was "
                                                    "scored.", None, None, verdict.gained, verdict.lost)
    arm_summaries["candidate"]["spread"] = comparison.candidate
    arm_summaries["baseline"]["spread"] = comparison.baseline
    counts = defaultdict(int)
    for q in questions:
        counts[q["kind"]] += 1
    left_out = sum(1 for q in questions if q["in_prompt"])
    return {"experiment": experiment, "state": state, "runs": runs, "arms": arm_summaries,
            "questions": questions, "counts": dict(counts), "verdict": verdict,
            "gained": [q for q in questions if q["kind"] == "gained"],
            "lost": [q for q in questions if q["kind"] == "lost"], "left_out_of_verdict": left_out}


def _attach_labels(questions: list[dict[str, Any]], *, experiment: Experiment, run_ids: list[int], user) -> None:
    """The label categories given to each flipped question, in the experiment's runs and in the runs its suite
    took it from (blind queues hide what ``user`` may not see yet)."""
    flipped = {q["question"].pk: q for q in questions if q["kind"] in ("gained", "lost")}
    if not flipped:
        return
    source_runs = {o.get("run") for q in flipped.values() for o in _flat_origins(q["origins"])
                   if o.get("kind") == "failures"}
    labels = Label.objects.filter(item__question_id__in=list(flipped),
                                  item__run_id__in=[*run_ids, *[r for r in source_runs if r]])
    if user is not None:
        from annotations import policies

        labels = policies.hide_blind_labels(user, labels)
    names: dict[int, set[str]] = defaultdict(set)
    for question_id, name in labels.values_list("item__question_id", "category__name"):
        names[question_id].add(name)
    for question_id, q in flipped.items():
        q["labels"] = sorted(names.get(question_id, ()))


def _flat_origins(origins: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    for origin in origins:
        yield origin
        yield from _flat_origins(origin.get("origins") or [])


def report_as_dict(report: dict[str, Any]) -> dict[str, Any]:
    """The report as JSON-ready data (the API's and the command's)."""
    def arm(summary: dict[str, Any]) -> dict[str, Any]:
        return {"trials": [{"trial": t["trial"], "run": t["run"].pk if t["run"] else None, "ex": t["ex"],
                            "correct": t["correct"], "scored": t["scored"]} for t in summary["trials"]],
                "spread": summary["spread"].to_dict(), "tokens_per_question": summary["tokens"],
                "cost_per_question": summary["cost"], "rounds_per_question": summary["rounds"],
                "total_cost": summary["total_cost"]}

    def question(q: dict[str, Any]) -> dict[str, Any]:
        return {"question_id": q["question"].pk, "index": q["question"].index, "db_id": q["question"].db_id,
                "question": q["question"].question, "kind": q["kind"], "consistent": q["consistent"],
                "candidate_right": q["candidate"]["right"], "baseline_right": q["baseline"]["right"],
                "candidate": {k: q["candidate"][k] for k in ("tokens", "cost", "rounds")},
                "baseline": {k: q["baseline"][k] for k in ("tokens", "cost", "rounds")},
                "labels": q["labels"], "in_prompt": q["in_prompt"], "origins": q["origins"]}

    return {"state": report["state"], "trials": report["experiment"].trials,
            "candidate": arm(report["arms"]["candidate"]), "baseline": arm(report["arms"]["baseline"]),
            "counts": report["counts"], "verdict": report["verdict"].to_dict(),
            "left_out_of_verdict": report["left_out_of_verdict"],
            "questions": [question(q) for q in report["questions"]]}


def render_report(report: dict[str, Any]) -> str:
    """The figures as plain text for the command line: both EX with the spread, the flips, the verdict."""
    e = report["experiment"]
    lines = [f"Experiment #{e.pk}: {e.candidate} against {e.baseline_label} on suite "
             f"{e.suite_version} ({report['state']})"]
    if (seed := (e.options or {}).get("sampling_seed")) is not None:  # experiments before seeds have none
        lines.append(f"{e.strategy}, sampling seed {seed} for both versions "
                     f"(+{e.TRIAL_SEED_STRIDE} per trial after the first)")
    for arm, label in (("candidate", str(e.candidate)), ("baseline", e.baseline_label)):
        summary = report["arms"][arm]
        trials = ", ".join("n/a" if t["ex"] is None else f"{t['ex']:.2f}% ({t['correct']}/{t['scored']})"
                           for t in summary["trials"])
        s = summary["spread"]
        spread = "" if s.mean is None else (f"   mean {s.mean:.2f}%" + (f", min {s.min:.2f}%, max {s.max:.2f}%"
                                                                        if s.trials > 1 else ""))
        figures = ""
        if summary["tokens"] is not None:
            figures = f"   {summary['tokens']:.0f} tokens, {summary['rounds']:.1f} rounds per question"
            if summary["cost"] is not None:
                figures += f", ${summary['cost']:.4f} per question"
        lines.append(f"{arm:<9} {label}: EX {trials}{spread}{figures}")
    for kind, title in (("gained", "gained (right more often with the candidate)"),
                        ("lost", "lost (right less often with the candidate)")):
        rows = report[kind]
        lines.append(f"{len(rows)} {title}" + (":" if rows else ""))
        for q in rows:
            question = q["question"]
            extra = f" [labels: {', '.join(q['labels'])}]" if q["labels"] else ""
            extra += " [itself an exemplar: left out of the verdict]" if q["in_prompt"] else ""
            lines.append(f"  #{question.index} {question.db_id}: candidate {q['candidate']['right']}/{e.trials}, "
                         f"baseline {q['baseline']['right']}/{e.trials}  {question.question[:80]}{extra}")
    lines.append(report["verdict"].text)
    return "\n".join(lines)


def set_experiments(exemplar_set: ExemplarSet, experiments: QuerySet[Experiment]) -> list[Experiment]:
    return list(experiments.filter(exemplar_set=exemplar_set).select_related(
        "candidate", "baseline_version", "baseline_candidate", "suite_version__suite")[:50])


def experiments_with_exemplar(exemplar: Exemplar, experiments: QuerySet[Experiment]) -> list[Experiment]:
    """The experiments whose candidate sent this exemplar (its author sees how it did)."""
    found = []
    for experiment in experiments.select_related("candidate_snapshot", "candidate__exemplar_set",
                                                 "suite_version__suite")[:500]:
        if any(e.get("exemplar_id") == exemplar.pk for e in experiment.candidate_snapshot.exemplars):
            found.append(experiment)
    return found


def experiment_summary(experiment: Experiment, user=None) -> dict[str, Any]:
    """A line of an experiment list: state, verdict, spreads and flip counts. A finished experiment's are kept in
    the cache (they no longer change; labels, which do, are not in them), so a list does not read every item of
    every run again."""
    runs = experiment_runs(experiment)
    state = experiment_state(experiment, runs)
    key = None
    if state not in ("running", "cancelling"):
        stamps = ",".join(f"{r.pk}.{r.status}.{r.evaluated_at.timestamp() if r.evaluated_at else 0}"
                          for r in sorted(runs.values(), key=lambda r: r.pk))
        key = f"t2s:experiment-summary:{experiment.pk}:{hashlib.sha1(stamps.encode()).hexdigest()}"
        cached = cache.get(key)
        if cached is not None:
            return {"experiment": experiment, **cached}
    report = experiment_report(experiment=experiment, user=user)
    figures = {"state": report["state"], "verdict": report["verdict"],
               "candidate": report["arms"]["candidate"]["spread"], "baseline": report["arms"]["baseline"]["spread"],
               "gained": len(report["gained"]), "lost": len(report["lost"])}
    if key is not None:
        cache.set(key, figures, timeout=7 * 24 * 3600)
    return {"experiment": experiment, **figures}


def regression_for_content(*, exemplar_set: ExemplarSet, content_hash: str) -> dict[str, Any] | None:
    """The latest finished experiment that tested exactly this content as its candidate, when it regressed
    (mean EX below its baseline's): publishing that content asks for confirmation. None otherwise."""
    tested = (Experiment.objects.filter(exemplar_set=exemplar_set, candidate_snapshot__content_hash=content_hash)
              .order_by("-created_at", "-id"))
    for experiment in tested[:20]:
        summary = experiment_summary(experiment)
        if summary["state"] != "done":
            continue
        return summary if summary["verdict"].regressed else None
    return None


def latest_experiment(*, exemplar_set: ExemplarSet, experiments: QuerySet[Experiment],
                      content_hash: str | None = None) -> dict[str, Any] | None:
    """The newest experiment of the set the user sees (of this content, when given), summarised."""
    qs = experiments.filter(exemplar_set=exemplar_set)
    if content_hash is not None:
        qs = qs.filter(candidate_snapshot__content_hash=content_hash)
    experiment = qs.order_by("-created_at", "-id").first()
    return experiment_summary(experiment) if experiment is not None else None


def latest_version(exemplar_set: ExemplarSet) -> ExemplarSetVersion | None:
    return exemplar_set.versions.order_by("-number").first()
