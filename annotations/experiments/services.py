"""Writes of suites, candidate versions and experiments (views, the API and the commands call these).

Rules kept here, not in the pages:
- a suite version is built from sources (a seeded sample, the failures of a run with given labels, a list of
  question indexes, another suite), all on the suite's dataset; each question records every source that gave
  it; versions are immutable and numbered;
- a candidate starts as the set's latest published version; exemplars are added (drafts allowed), removed, or
  switched to their current content; only an open candidate changes; publishing it needs every exemplar it
  sends approved and the set unchanged since the candidate started, and makes it the next version;
- an experiment freezes what each arm sends, then launches its 2 x trials runs through the runs' own service
  with one strategy, one option set and the same endpoint, in one transaction (refused: nothing is stored).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from agent.models import NAME_UNAVAILABLE
from agent.services import sessions as session_services
from agent.strategies import STRATEGIES
from agent.strategies.options import SEED_MAX
from annotations import policies
from annotations.exemplars import services as exemplar_services
from annotations.experiments import selectors
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
from annotations.labels.models import Category, Label
from annotations.models import Exemplar, ExemplarSet, ExemplarSetVersion
from annotations.runs import services as run_services
from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem
from annotations.runs.sampling import new_seed, sample_questions

MAX_SUITE_QUESTIONS = 5000
SOURCE_KINDS = ("sample", "failures", "picked", "suite")


def _acting(user) -> bool:
    return user is not None and getattr(user, "is_authenticated", False)


# --- suites ----------------------------------------------------------------------------------------------------


def suite_create(*, name: str, dataset: Dataset, user, description: str = "",
                 sources: Sequence[Mapping[str, Any]] = (), note: str = "") -> Suite:
    """A new suite on ``dataset``, with its first version when ``sources`` are given."""
    if _acting(user):
        policies.check_can_create_suite(user, dataset)
    name = " ".join((name or "").split())
    if not name:
        raise ValidationError({"name": "Name the suite."})
    if Suite.objects.filter(name=name).exists():
        raise ValidationError({"name": [NAME_UNAVAILABLE]})  # the same words whether or not the reader sees it
    with transaction.atomic():
        suite = Suite.objects.create(name=name, dataset=dataset, description=description or "",
                                     created_by=user if _acting(user) else None)
        if sources:
            suite_version_create(suite=suite, sources=sources, user=user, note=note)
    return suite


def suite_version_create(*, suite: Suite, sources: Sequence[Mapping[str, Any]], user, note: str = "",
                         allow_same: bool = False) -> SuiteVersion:
    """The suite's next version: the union of the sources' questions in order, each with its origins."""
    if _acting(user):
        policies.check_can_create_suite(user, suite.dataset)
    recipe, chosen = resolve_sources(dataset=suite.dataset, sources=sources, user=user)
    with transaction.atomic():
        Suite.objects.select_for_update().get(pk=suite.pk)
        latest = suite.latest_version()
        ids = [q.pk for q, _ in chosen]
        if latest is not None and not allow_same and list(
                latest.entries.order_by("position").values_list("question_id", flat=True)) == ids:
            raise ValidationError(f"Nothing changed since version {latest.number}: the same questions.")
        version = SuiteVersion.objects.create(suite=suite, number=(latest.number + 1) if latest else 1,
                                              recipe=recipe, question_count=len(chosen), note=(note or "").strip(),
                                              created_by=user if _acting(user) else None)
        SuiteQuestion.objects.bulk_create([SuiteQuestion(version=version, question=q, position=i, origins=origins)
                                           for i, (q, origins) in enumerate(chosen)])
    return version


def resolve_sources(*, dataset: Dataset, sources: Sequence[Mapping[str, Any]],
                    user) -> tuple[list[dict[str, Any]], list[tuple[DatasetQuestion, list[dict[str, Any]]]]]:
    """The recipe as stored (seeds drawn, categories as keys, suites as versions) and the questions, in the order
    the sources give them, each with every origin. A bad source is a ValidationError naming it."""
    if not sources:
        raise ValidationError({"sources": "Give at least one source of questions."})
    recipe: list[dict[str, Any]] = []
    order: list[DatasetQuestion] = []
    origins: dict[int, list[dict[str, Any]]] = {}
    for i, source in enumerate(sources, 1):
        if not isinstance(source, Mapping) or source.get("kind") not in SOURCE_KINDS:
            raise ValidationError({"sources": f"Source {i}: kind must be one of {', '.join(SOURCE_KINDS)}."})
        resolved, found = _RESOLVERS[source["kind"]](dataset=dataset, source=source, user=user, position=i)
        recipe.append(resolved)
        for question, origin in found:
            if question.pk not in origins:
                order.append(question)
                origins[question.pk] = []
            origins[question.pk].append(origin)
    if not order:
        raise ValidationError({"sources": "No question matches these sources."})
    if len(order) > MAX_SUITE_QUESTIONS:
        raise ValidationError({"sources": f"{len(order)} questions: a suite holds at most {MAX_SUITE_QUESTIONS}."})
    return recipe, [(q, origins[q.pk]) for q in order]


def _int(value: Any, what: str, position: int, *, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().lstrip("-").isdigit():
        raise ValidationError({"sources": f"Source {position}: {what} must be a whole number."})
    number = int(value)
    if number < low:
        raise ValidationError({"sources": f"Source {position}: {what} must be at least {low}."})
    return number


def _sample(*, dataset, source, user, position):
    size = _int(source.get("size"), "size", position, low=1)
    seed = _int(source["seed"], "seed", position) if source.get("seed") not in (None, "") else new_seed()
    db_ids = [str(d) for d in source.get("db_ids") or []]
    questions = sample_questions(dataset.questions.all(), db_ids=db_ids, limit=size, mode="random", seed=seed)
    origin = {"kind": "sample", "size": size, "seed": seed, **({"db_ids": db_ids} if db_ids else {})}
    return origin, [(q, origin) for q in questions]


def _categories(keys_or_names: Sequence[str], position: int) -> list[Category]:
    found = []
    for wanted in keys_or_names:
        text = str(wanted).strip()
        category = (Category.objects.filter(key=text).order_by("-version__number").first()
                    or Category.objects.filter(name__iexact=text).order_by("-version__number").first())
        if category is None:
            raise ValidationError({"sources": f"Source {position}: no label category {text!r}."})
        found.append(category)
    return found


def _failures(*, dataset, source, user, position):
    from annotations.labels.selectors import item_categories

    run_id = _int(source.get("run"), "run", position, low=1)
    runs = policies.visible_runs(user) if _acting(user) else Run.objects.all()
    run = runs.filter(pk=run_id).first()
    if run is None:
        raise ValidationError({"sources": f"Source {position}: no run #{run_id}."})
    if run.dataset_id != dataset.pk:
        raise ValidationError({"sources": f"Source {position}: run #{run_id} is on dataset {run.dataset.name}, "
                                          f"not {dataset.name}."})
    categories = _categories(source.get("categories") or [], position)
    keys = {c.key for c in categories}
    items = list(run.items.filter(ex=False).select_related("question").order_by("question__index"))
    if keys:
        labelled = item_categories(run=run, user=user if _acting(user) else None)
        items = [i for i in items if labelled.get(i.pk, set()) & keys]
    names = [c.name for c in categories]
    recipe = {"kind": "failures", "run": run.pk, "categories": sorted(keys)}
    found = [(i.question, {"kind": "failures", "run": run.pk, "run_name": run.name, "item": i.pk,
                           **({"categories": sorted(keys), "category_names": names} if keys else {})})
             for i in items]
    return recipe, found


def _picked(*, dataset, source, user, position):
    indexes = [_int(v, "a question index", position) for v in source.get("questions") or []]
    if not indexes:
        raise ValidationError({"sources": f"Source {position}: list the question indexes to pick."})
    by_index = {q.index: q for q in dataset.questions.filter(index__in=indexes)}
    missing = [str(i) for i in indexes if i not in by_index]
    if missing:
        raise ValidationError({"sources": f"Source {position}: {dataset.name} has no question {', '.join(missing)}."})
    origin = {"kind": "picked"}
    return {"kind": "picked", "questions": indexes}, [(by_index[i], origin) for i in indexes]


def _suite(*, dataset, source, user, position):
    suites = policies.visible_suites(user) if _acting(user) else Suite.objects.all()
    name = str(source.get("suite") or "")
    spec = f"{name}:{source['version']}" if source.get("version") not in (None, "") else name
    version = selectors.suite_version_from_spec(suites, spec)
    if version is None:
        raise ValidationError({"sources": f"Source {position}: no suite version {spec!r}."})
    if version.suite.dataset_id != dataset.pk:
        raise ValidationError({"sources": f"Source {position}: suite {name} is on dataset "
                                          f"{version.suite.dataset.name}, not {dataset.name}."})
    found = [(e.question, {"kind": "suite", "suite": version.suite.name, "version": version.number,
                           "origins": e.origins}) for e in selectors.suite_entries(version)]
    return {"kind": "suite", "suite": version.suite.name, "version": version.number}, found


_RESOLVERS = {"sample": _sample, "failures": _failures, "picked": _picked, "suite": _suite}


def failures_suite(*, run: Run, categories: Sequence[str], user) -> SuiteVersion:
    """The suite of a run's failures with these labels (an experiment's default after "write an exemplar for
    this"): an existing version built from the same recipe, else a new suite (or its next version)."""
    sources = [{"kind": "failures", "run": run.pk, "categories": list(categories)}]
    recipe, chosen = resolve_sources(dataset=run.dataset, sources=sources, user=user)
    suites = policies.visible_suites(user) if _acting(user) else Suite.objects.all()
    existing = selectors.suite_version_with_recipe(suites, recipe)
    ids = [q.pk for q, _ in chosen]
    if existing is not None and list(existing.entries.order_by("position").values_list("question_id",
                                                                                         flat=True)) == ids:
        return existing
    names = ", ".join(c.name for c in _categories(categories, 1)) or "all"
    name = f"failures of run #{run.pk} ({names})"[:200]
    suite = Suite.objects.filter(name=name, dataset=run.dataset).first()
    if suite is None:
        suite = suite_create(name=name, dataset=run.dataset, user=user,
                             description=f"The failures of run #{run.pk} {run.name} labelled {names}.")
    return suite_version_create(suite=suite, sources=sources, user=user, allow_same=True)


# --- candidate versions ------------------------------------------------------------------------------------------


def _check_open(candidate: Candidate) -> None:
    if not candidate.is_open:
        raise ValidationError(f"{candidate} is {candidate.get_state_display().lower()}: start a new candidate.")


def candidate_create(*, exemplar_set: ExemplarSet, user, title: str = "",
                     exemplars: Sequence[Exemplar] = ()) -> Candidate:
    """A draft of the set's next version: its latest published version (each exemplar's published copy kept)
    plus ``exemplars`` (their current content, drafts included)."""
    if _acting(user):
        policies.check_can_edit_candidate(user)
    with transaction.atomic():
        ExemplarSet.objects.select_for_update().get(pk=exemplar_set.pk)
        base = exemplar_set.versions.order_by("-number").first()
        number = (exemplar_set.candidates.aggregate(m=Max("number"))["m"] or 0) + 1
        candidate = Candidate.objects.create(
            exemplar_set=exemplar_set, number=number, title=(title or "").strip()[:200], base_version=base,
            tool_description=base.tool_description if base else "",
            tool_description_no_findpath=base.tool_description_no_findpath if base else "",
            created_by=user if _acting(user) else None)
        items = list(base.exemplars) if base else []
        rows = Exemplar.objects.in_bulk([e.get("exemplar_id") for e in items if e.get("exemplar_id")])
        CandidateItem.objects.bulk_create([
            CandidateItem(candidate=candidate, position=i, exemplar=rows.get(e.get("exemplar_id")), published=e)
            for i, e in enumerate(items)])
        for exemplar in exemplars:
            candidate_add(candidate=candidate, exemplar=exemplar, user=user)
    return candidate


def _check_exemplar(exemplar: Exemplar) -> None:
    if not exemplar.steps.exists():
        raise ValidationError(f"Exemplar #{exemplar.pk} has no steps yet: write its trajectory first.")


def candidate_add(*, candidate: Candidate, exemplar: Exemplar, user) -> CandidateItem:
    """Append an exemplar's current content (a draft's too)."""
    if _acting(user):
        policies.check_can_edit_candidate(user, candidate)
    _check_open(candidate)
    _check_exemplar(exemplar)
    with transaction.atomic():
        Candidate.objects.select_for_update().get(pk=candidate.pk)
        if candidate.items.filter(exemplar=exemplar).exists():
            raise ValidationError(f"Exemplar #{exemplar.pk} is in {candidate} already (use its current content "
                                  "there instead of the published copy).")
        last = candidate.items.aggregate(m=Max("position"))["m"]
        item = CandidateItem.objects.create(candidate=candidate, exemplar=exemplar,
                                            position=0 if last is None else last + 1)
        candidate.save(update_fields=["updated_at"])
    return item


def candidate_remove(*, candidate: Candidate, item: CandidateItem, user) -> None:
    if _acting(user):
        policies.check_can_edit_candidate(user, candidate)
    _check_open(candidate)
    with transaction.atomic():
        position = item.position
        item.delete()
        for later in candidate.items.filter(position__gt=position).order_by("position"):
            later.position -= 1
            later.save(update_fields=["position"])
        candidate.save(update_fields=["updated_at"])


def candidate_use_current(*, candidate: Candidate, item: CandidateItem, user, current: bool = True) -> None:
    """Send the exemplar's current content (``current``) or the published copy of the base version again."""
    if _acting(user):
        policies.check_can_edit_candidate(user, candidate)
    _check_open(candidate)
    if current:
        if item.exemplar is None:
            raise ValidationError("This published exemplar has no editable row here: only its copy can be sent.")
        _check_exemplar(item.exemplar)
        item.published = None
    else:
        base = {e.get("exemplar_id"): e for e in (candidate.base_version.exemplars if candidate.base_version else [])}
        if item.exemplar_id not in base:
            raise ValidationError(f"Exemplar #{item.exemplar_id} is not in the published version.")
        item.published = base[item.exemplar_id]
    with transaction.atomic():
        item.save(update_fields=["published"])
        candidate.save(update_fields=["updated_at"])


def candidate_move(*, candidate: Candidate, item: CandidateItem, user, offset: int) -> None:
    if _acting(user):
        policies.check_can_edit_candidate(user, candidate)
    _check_open(candidate)
    with transaction.atomic():
        other = candidate.items.filter(position=item.position + offset).first()
        if other is None:
            return
        exemplar_services.swap_positions(item, other)
        candidate.save(update_fields=["updated_at"])


def candidate_update(*, candidate: Candidate, user, title: str | None = None, tool_description: str | None = None,
                     tool_description_no_findpath: str | None = None) -> Candidate:
    if _acting(user):
        policies.check_can_edit_candidate(user, candidate)
    _check_open(candidate)
    if title is not None:
        candidate.title = title.strip()[:200]
    if tool_description is not None:
        candidate.tool_description = tool_description.strip()
    if tool_description_no_findpath is not None:
        candidate.tool_description_no_findpath = tool_description_no_findpath.strip()
    candidate.save()
    return candidate


def candidate_discard(*, candidate: Candidate, user) -> Candidate:
    if _acting(user):
        policies.check_can_edit_candidate(user, candidate)
    _check_open(candidate)
    candidate.state = Candidate.State.DISCARDED
    candidate.save(update_fields=["state", "updated_at"])
    return candidate


def candidate_freeze(*, candidate: Candidate) -> CandidateSnapshot:
    """The candidate's content now, frozen (one row per distinct content, reused when unchanged)."""
    content = selectors.candidate_content(candidate)
    snapshot, _ = CandidateSnapshot.objects.get_or_create(
        candidate=candidate, content_hash=content.content_hash,
        defaults={"exemplars": content.exemplars, "tool_description": content.tool_description,
                  "tool_description_no_findpath": content.tool_description_no_findpath})
    return snapshot


def candidate_publish(*, candidate: Candidate, user, note: str = "", confirm_regression: bool = False):
    """The candidate as the set's next published version. Every exemplar it sends as current content must be
    approved (published copies were); the set must not have been published since the candidate started (its
    changes would be lost); when the latest finished experiment of exactly this content regressed, only with
    ``confirm_regression``."""
    exemplar_set = candidate.exemplar_set
    if _acting(user):
        policies.check_can_publish_set(user, exemplar_set)
    _check_open(candidate)
    with transaction.atomic():
        ExemplarSet.objects.select_for_update().get(pk=exemplar_set.pk)
        latest = exemplar_set.versions.order_by("-number").first()
        if latest is not None and (candidate.base_version_id != latest.pk):
            raise ValidationError(f"Version {latest.number} was published after {candidate} started from "
                                  f"{'v' + str(candidate.base_version.number) if candidate.base_version else 'none'}:"
                                  " start a new candidate from it, so its changes are not lost.")
        items = selectors.candidate_items(candidate)
        not_approved = [f"#{i.exemplar_id} ({i.exemplar.get_state_display().lower()})" for i in items
                        if i.published is None and i.exemplar.state != Exemplar.State.APPROVED]
        if not_approved:
            raise ValidationError("Only approved exemplars are published; get these reviewed first: "
                                  + ", ".join(not_approved) + ".")
        content = selectors.candidate_content(candidate, items)
        version = exemplar_services.set_publish_items(
            exemplar_set=exemplar_set, items=content.exemplars, user=user,
            tool_description=content.tool_description,
            tool_description_no_findpath=content.tool_description_no_findpath,
            note=(note or "").strip() or f"Published from {candidate}" + (f": {candidate.title}" if candidate.title
                                                                           else ""),
            source=f"candidate {candidate.number}", confirm_regression=confirm_regression)
        candidate.state, candidate.published_version = Candidate.State.PUBLISHED, version
        candidate.save(update_fields=["state", "published_version", "updated_at"])
    return version


# --- experiments -------------------------------------------------------------------------------------------------


def experiment_create(*, candidate: Candidate, suite_version: SuiteVersion, user,
                      baseline_version: ExemplarSetVersion | None = None, baseline_candidate: Candidate | None = None,
                      strategy: str = "interactive_t2s", options: Mapping[str, Any] | None = None, trials: int = 1,
                      max_concurrency: int | None = None, spend_cap: float | None = None,
                      name: str = "") -> Experiment:
    """Launch the candidate and the baseline (the set's latest published version unless another version or
    candidate of the set is given) on the suite version: ``trials`` runs each, interleaved, with the same
    strategy, options and endpoint. ``max_concurrency`` and ``spend_cap`` are the experiment's, shared out
    evenly between its runs. Everything is stored in one transaction or not at all."""
    if _acting(user):
        policies.check_can_run_experiment(user, suite_version)
    exemplar_set = candidate.exemplar_set
    _check_open(candidate)
    if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= Experiment.MAX_TRIALS:
        raise ValidationError({"trials": f"Between 1 and {Experiment.MAX_TRIALS} trials."})
    if baseline_version is not None and baseline_candidate is not None:
        raise ValidationError({"baseline": "The baseline is a published version or another candidate, not both."})
    if baseline_candidate is not None:
        if baseline_candidate.pk == candidate.pk:
            raise ValidationError({"baseline": "Compare the candidate with something else than itself."})
        if baseline_candidate.exemplar_set_id != exemplar_set.pk:
            raise ValidationError({"baseline": f"{baseline_candidate} is not a candidate of {exemplar_set.name}."})
    elif baseline_version is None:
        baseline_version = exemplar_set.versions.order_by("-number").first()
        if baseline_version is None:
            raise ValidationError({"baseline": f"{exemplar_set.name} has no published version to compare with: "
                                               "pick another candidate as the baseline."})
    elif baseline_version.exemplar_set_id != exemplar_set.pk:
        raise ValidationError({"baseline": f"{baseline_version} is not a version of {exemplar_set.name}."})
    runs_count = 2 * trials
    # One sampling seed for the experiment (drawn when not given, stored): both arms of a trial send the same
    # seeds, and each trial its own, so repeated trials still show the spread. The options are checked first:
    # a seed out of range must be refused, not wrapped into range by a trial's offset.
    if strategy not in STRATEGIES:
        raise ValidationError({"strategy": [f"Unknown strategy; choose one of {', '.join(sorted(STRATEGIES))}."]})
    session_services.check_option_types(strategy, options or {})
    options = dict(options or {})
    if options.get("sampling_seed") is None:
        options["sampling_seed"] = new_seed()
    per_run_cap = None if spend_cap is None else spend_cap / runs_count
    questions = [e.question for e in selectors.suite_entries(suite_version)]
    dataset = suite_version.suite.dataset
    with transaction.atomic():
        snapshot = candidate_freeze(candidate=candidate)
        baseline_snapshot = candidate_freeze(candidate=baseline_candidate) if baseline_candidate else None
        if baseline_snapshot is not None and baseline_snapshot.content_hash == snapshot.content_hash:
            raise ValidationError({"baseline": "Both candidates send the same content: nothing to compare."})
        if baseline_version is not None and baseline_version.content_hash == snapshot.content_hash:
            raise ValidationError({"candidate": f"{candidate} sends exactly {baseline_version}: change it first."})
        experiment = Experiment.objects.create(
            name=(name or "").strip()[:200], exemplar_set=exemplar_set, candidate=candidate,
            candidate_snapshot=snapshot, baseline_version=baseline_version, baseline_candidate=baseline_candidate,
            baseline_snapshot=baseline_snapshot, suite_version=suite_version, strategy=strategy,
            options=options, trials=trials, created_by=user if _acting(user) else None)
        concurrency = None
        if max_concurrency is not None:
            concurrency = max(1, max_concurrency // runs_count)
        baseline_name = (f"v{baseline_version.number}" if baseline_version is not None
                         else f"candidate {baseline_candidate.number}")
        created = []
        for trial in range(1, trials + 1):
            for arm in (ExperimentRun.Arm.CANDIDATE, ExperimentRun.Arm.BASELINE):
                arm_name = f"candidate {candidate.number}" if arm == ExperimentRun.Arm.CANDIDATE else baseline_name
                if concurrency is None:
                    concurrency = _even_share(runs_count)
                run = run_services.run_create_agent(
                    dataset=dataset, name=f"experiment #{experiment.pk} {exemplar_set.name} {arm_name}, trial {trial}",
                    strategy=strategy, options=trial_options(options, trial), user=user if _acting(user) else None,
                    questions=questions, max_concurrency=concurrency, spend_cap=per_run_cap,
                    exemplar_set_version=baseline_version if arm == ExperimentRun.Arm.BASELINE else None,
                    exemplar_candidate=snapshot if arm == ExperimentRun.Arm.CANDIDATE else baseline_snapshot)
                created.append(ExperimentRun(experiment=experiment, arm=arm, trial=trial, run=run))
        ExperimentRun.objects.bulk_create(created)
        _check_same_settings(created)
    return experiment


def experiment_create_on_failures(*, candidate: Candidate, run: Run, categories: Sequence[str], user,
                                  **options: Any) -> Experiment:
    """An experiment on the failures of ``run`` with these labels (``failures_suite``), both or nothing stored."""
    with transaction.atomic():
        suite_version = failures_suite(run=run, categories=categories, user=user)
        return experiment_create(candidate=candidate, suite_version=suite_version, user=user, **options)


def _even_share(runs_count: int) -> int:
    """Each run's share of the endpoint's concurrency (at least one session each)."""
    endpoint = session_services.default_llm_endpoint()
    ceiling = max(1, (endpoint.max_concurrency if endpoint is not None else 1) or 1)
    return max(1, ceiling // runs_count)


_ARM_KEYS = ("exemplar_set_version", "exemplar_candidate", "exemplars_choice")


def trial_options(options: Mapping[str, Any], trial: int) -> dict[str, Any]:
    """The options of trial ``trial`` (from 1): the experiment's, with its own sampling seed."""
    seed = options["sampling_seed"] + Experiment.TRIAL_SEED_STRIDE * (trial - 1)
    return {**options, "sampling_seed": seed % (SEED_MAX + 1)}


def _check_same_settings(runs: Sequence[ExperimentRun]) -> None:
    """Every run of an experiment differs only in its exemplars (same strategy, options, endpoint, questions),
    and, between trials, in its sampling seed; the two arms of a trial send the same seeds."""
    def settings_of(run: Run, *, seed: bool) -> dict[str, Any]:
        config = {k: v for k, v in run.config.items() if k not in _ARM_KEYS}
        if not seed:
            config["options"] = {k: v for k, v in (config.get("options") or {}).items() if k != "sampling_seed"}
        return {"strategy": run.strategy, **config}

    first = settings_of(runs[0].run, seed=False)
    same_trial = {}
    for entry in runs:
        with_seed = settings_of(entry.run, seed=True)
        if settings_of(entry.run, seed=False) != first or same_trial.setdefault(entry.trial, with_seed) != with_seed:
            raise ValidationError("The experiment's runs would not share one model and option set; "
                                  "nothing launched.")


def experiment_cancel(*, experiment: Experiment, user) -> Experiment:
    if _acting(user):
        policies.check_can_control_experiment(user, experiment)
    Experiment.objects.filter(pk=experiment.pk).update(cancelled=True)
    for run in Run.objects.filter(experiment_run__experiment=experiment, status=Run.Status.RUNNING):
        run_services.run_cancel(run=run)
    experiment.refresh_from_db()
    return experiment


# --- from a labelled failure to an exemplar ----------------------------------------------------------------------


def exemplar_from_failure(*, item: RunItem, user) -> Exemplar:
    """"Write an exemplar for this": a draft from a failure's session (question, trajectory), its final SQL the
    corrected gold query when a label carries one, else the gold query; the failure's labels are kept as the
    exemplar's origin, so its experiment suite defaults to the run's failures with the same labels."""
    if _acting(user):
        policies.check_can_author_exemplar(user)
    question = item.question
    if question.database_id is None:
        raise ValidationError(f"The database of question {question.index} ({question.db_id}) is not registered "
                              "here: its tools cannot run.")
    labels = Label.objects.filter(item=item).select_related("category")
    if _acting(user):
        labels = policies.hide_blind_labels(user, labels, run_ids=[item.run_id])
    labels = list(labels)
    finals = [lab for lab in labels if lab.is_final]
    counted = finals or labels
    keys = sorted({lab.category.key for lab in counted})
    names = sorted({lab.category.name for lab in counted})
    corrected = [lab for lab in sorted(labels, key=lambda lab: (lab.is_final, lab.updated_at))
                 if lab.corrected_ok and lab.corrected_sql.strip()]
    final_sql = corrected[-1].corrected_sql.strip() if corrected else question.gold_sql.strip()
    where = f"run #{item.run_id} question {question.index}"
    notes = (f"Written from a failure of {where}" + (f", labelled {', '.join(names)}" if names else "")
             + (". Final SQL: the corrected gold query of a label." if corrected else ". Final SQL: the gold query.")
             + (f" The agent's answer was: {item.predicted_sql}" if item.predicted_sql else ""))
    source = f"failure of {where}"
    with transaction.atomic():
        if item.session_id is not None and item.session.database_id == question.database_id:
            exemplar = exemplar_services.exemplar_promote_session(
                session=item.session, user=user, final_sql=final_sql, source=source, notes=notes)
        else:
            exemplar = exemplar_services.exemplar_create(
                user=user, database=question.database, question=question.question, evidence=question.evidence,
                notes=notes, source=source)
            exemplar.final_sql = final_sql
            exemplar.save(update_fields=["final_sql", "updated_at"])
        ExemplarOrigin.objects.create(exemplar=exemplar, item=item, run_id=item.run_id, categories=keys)
    return exemplar

