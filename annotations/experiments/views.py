"""Pages of suites, candidate versions and experiments: a check, a service or selector call, a response."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from agent import policies as agent_policies
from agent import selectors as agent_selectors
from annotations import policies
from annotations.exemplars.forms import PreviewForm
from annotations.exemplars.selectors import exemplars_from_items, prompt_preview
from annotations.experiments import selectors, services
from annotations.experiments.forms import (
    CandidateAddForm,
    CandidateEditForm,
    CandidatePublishForm,
    ExperimentForm,
    SourcesForm,
    SuiteCreateForm,
)
from annotations.experiments.models import Candidate, CandidateItem, ExperimentRun
from annotations.runs.models import DatasetQuestion


def _errors(request: HttpRequest, exc: ValidationError) -> None:
    for message in exc.messages:
        messages.error(request, message)


def _form_errors(request: HttpRequest, form) -> None:
    for field, errs in form.errors.items():
        messages.error(request, (f"{field}: " if field != "__all__" else "") + " ".join(errs))


# --- experiments ------------------------------------------------------------------------------------------------


@require_GET
def experiment_list(request: HttpRequest) -> HttpResponse:
    experiments = policies.visible_experiments(request.user).select_related(
        "exemplar_set", "candidate", "baseline_version", "baseline_candidate", "suite_version__suite")
    page = Paginator(experiments, 25).get_page(request.GET.get("page"))
    return render(request, "annotations/experiments/experiment_list.html", {
        "page": page, "rows": [selectors.experiment_summary(e, request.user) for e in page.object_list],
        "candidates": policies.visible_candidates(request.user).filter(state=Candidate.State.OPEN)
        .select_related("exemplar_set")[:50],
        "can_run": policies.can_run_experiments(request.user)})


def _report_context(request: HttpRequest, experiment) -> dict:
    report = selectors.experiment_report(experiment=experiment, user=request.user)
    return {"experiment": experiment, "report": report, "progress": selectors.experiment_progress(
        experiment, report["runs"]) if report["state"] in ("running", "cancelling") else None,
        "can_control": policies.can_run_experiments(request.user)}


@require_GET
def experiment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = policies.access_experiment(request.user, pk)
    context = _report_context(request, experiment)
    if request.htmx and request.GET.get("poll"):
        response = render(request, "annotations/experiments/partials/experiment_status.html", context)
        if context["report"]["state"] not in ("running", "cancelling"):
            response["HX-Refresh"] = "true"  # every run is scored: show the whole page
        return response
    return render(request, "annotations/experiments/experiment_detail.html", context)


@require_GET
def experiment_question(request: HttpRequest, pk: int, question_id: int) -> HttpResponse:
    """One question of the experiment: both arms' trajectories side by side, for a trial (the first whose
    outcomes differ by default)."""
    experiment = policies.access_experiment(request.user, pk)
    question = get_object_or_404(DatasetQuestion, pk=question_id,
                                 pk__in=experiment.suite_version.entries.values("question_id"))
    report = selectors.experiment_report(experiment=experiment, user=request.user)
    row = next(q for q in report["questions"] if q["question"].pk == question.pk)
    try:
        trial = int(request.GET.get("trial") or row["trial"])
    except ValueError:
        raise Http404("No such trial.") from None
    if not 1 <= trial <= experiment.trials:
        raise Http404("No such trial.")
    sides = []
    for arm, label in ((ExperimentRun.Arm.CANDIDATE, str(experiment.candidate)),
                       (ExperimentRun.Arm.BASELINE, experiment.baseline_label)):
        cell = row[arm]["trials"][trial - 1]
        # the session's own steps; its prompt (exemplars of other databases) is not on this page
        turns = list(agent_selectors.session_turns(session=cell["session"], viewer=request.user)) \
            if cell and cell["session"] else []
        item = report["runs"][(arm, trial)].items.select_related("session").get(pk=cell["item"]) if cell else None
        sides.append({"arm": arm, "label": label, "cell": cell, "turns": turns, "item": item})
    return render(request, "annotations/experiments/experiment_question.html", {
        "experiment": experiment, "question": question, "row": row, "trial": trial, "sides": sides,
        "trials": range(1, experiment.trials + 1)})


@require_POST
def experiment_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = policies.access_experiment(request.user, pk)
    policies.check_can_control_experiment(request.user, experiment)
    services.experiment_cancel(experiment=experiment, user=request.user)
    messages.info(request, "Experiment cancelled; running sessions stop after their current step.")
    return redirect(experiment)


def experiment_new(request: HttpRequest, pk: int) -> HttpResponse:
    """The launch form of an experiment of this candidate (GET), and the launch (POST)."""
    candidate = policies.access_candidate(request.user, pk)
    policies.check_can_run_experiments(request.user)
    default = selectors.default_suite_source(candidate)
    form = ExperimentForm(request.POST or None, user=request.user, candidate=candidate,
                          initial={"default_suite": default is not None, "trials": 3})
    if request.method == "POST":
        if not form.is_valid():
            _form_errors(request, form)
        else:
            data = form.cleaned_data
            launch = {"candidate": candidate, "user": request.user, "strategy": data["strategy"],
                      "options": data["options"], "trials": data["trials"], "max_concurrency": data["max_concurrency"],
                      "spend_cap": data["spend_cap"], "name": data["name"], **data["baseline"]}
            try:
                if data["suite_version"] is not None:
                    policies.check_can_run_experiment(request.user, data["suite_version"])
                    experiment = services.experiment_create(suite_version=data["suite_version"], **launch)
                elif default is None:
                    raise ValidationError("This candidate has no exemplar written from a labelled failure: "
                                          "choose a suite.")
                else:
                    run = policies.access_run(request.user, default["run"])
                    policies.check_can_create_suite(request.user, run.dataset)
                    experiment = services.experiment_create_on_failures(run=run, categories=default["categories"],
                                                                        **launch)
            except ValidationError as exc:
                _errors(request, exc)
            else:
                messages.success(request, f"Experiment #{experiment.pk} started: {2 * experiment.trials} runs.")
                return redirect(experiment)
    return render(request, "annotations/experiments/experiment_new.html", {
        "candidate": candidate, "form": form, "default": default}, status=400 if form.errors else 200)


# --- suites ------------------------------------------------------------------------------------------------------


def suite_list(request: HttpRequest) -> HttpResponse:
    form = SuiteCreateForm(request.POST or None, user=request.user)
    if request.method == "POST":
        policies.check_can_create_suites(request.user)
        if form.is_valid():
            data = form.cleaned_data
            try:
                suite = services.suite_create(name=data["name"], dataset=data["dataset"], user=request.user,
                                              description=data["description"], sources=form.sources())
            except ValidationError as exc:
                _errors(request, exc)
            else:
                return redirect(suite)
        else:
            _form_errors(request, form)
    suites = policies.visible_suites(request.user).select_related("dataset").prefetch_related("versions")
    return render(request, "annotations/experiments/suite_list.html", {
        "suites": suites, "form": form, "can_create": policies.can_create_suites(request.user)},
        status=400 if request.method == "POST" else 200)


def suite_detail(request: HttpRequest, pk: int) -> HttpResponse:
    suite = policies.access_suite(request.user, pk)
    form = SourcesForm(request.POST or None, user=request.user, dataset=suite.dataset)
    if request.method == "POST":
        policies.check_can_create_suite(request.user, suite.dataset)
        if form.is_valid():
            try:
                version = services.suite_version_create(suite=suite, sources=form.sources(), user=request.user,
                                                        note=request.POST.get("note", ""))
            except ValidationError as exc:
                _errors(request, exc)
            else:
                return redirect(version)
        else:
            _form_errors(request, form)
    version = suite.latest_version()
    return _suite_page(request, suite, version, form)


@require_GET
def suite_version(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    version = policies.access_suite_version(request.user, pk, number)
    return _suite_page(request, version.suite, version, SourcesForm(user=request.user, dataset=version.suite.dataset))


def _suite_page(request: HttpRequest, suite, version, form) -> HttpResponse:
    entries = list(selectors.suite_entries(version)) if version else []
    page = Paginator(entries, 100).get_page(request.GET.get("page"))
    return render(request, "annotations/experiments/suite_detail.html", {
        "suite": suite, "version": version, "versions": suite.versions.order_by("-number"), "form": form,
        "page": page, "rows": [(e, [selectors.origin_text(o) for o in e.origins]) for e in page.object_list],
        "experiments": policies.visible_experiments(request.user).filter(suite_version__suite=suite)
        .select_related("candidate__exemplar_set", "suite_version")[:50],
        "can_create": policies.can_create_suites(request.user)}, status=400 if request.method == "POST" else 200)


# --- candidates --------------------------------------------------------------------------------------------------


@require_POST
def candidate_new(request: HttpRequest, set_id: int) -> HttpResponse:
    exemplar_set = policies.access_exemplar_set(request.user, set_id)
    policies.check_can_edit_candidate(request.user)
    exemplars = []
    if request.POST.get("exemplar"):
        try:
            exemplars = [policies.access_exemplar(request.user, int(request.POST["exemplar"]))]
        except ValueError:
            raise Http404("No such exemplar.") from None
    try:
        candidate = services.candidate_create(exemplar_set=exemplar_set, user=request.user, exemplars=exemplars,
                                              title=request.POST.get("title", ""))
    except ValidationError as exc:
        _errors(request, exc)
        return redirect(exemplars[0] if exemplars else exemplar_set)
    return redirect(candidate)


@require_GET
def candidate_detail(request: HttpRequest, pk: int) -> HttpResponse:
    candidate = policies.access_candidate(request.user, pk)
    rows = selectors.candidate_rows(candidate)
    content = selectors.candidate_content(candidate, [r["item"] for r in rows])
    experiments = policies.visible_experiments(request.user).filter(candidate=candidate)
    latest = selectors.latest_experiment(exemplar_set=candidate.exemplar_set, experiments=experiments,
                                         content_hash=content.content_hash)
    newest = selectors.latest_experiment(exemplar_set=candidate.exemplar_set, experiments=experiments)
    in_candidate = [r["item"].exemplar_id for r in rows]
    addable = (policies.visible_exemplars(request.user).exclude(pk__in=[i for i in in_candidate if i])
               .filter(steps__isnull=False).distinct().order_by("-updated_at")[:200])
    return render(request, "annotations/experiments/candidate_detail.html", {
        "candidate": candidate, "exemplar_set": candidate.exemplar_set, "rows": rows, "content": content,
        "changes": selectors.candidate_changes(candidate, content),
        "tokens": selectors.candidate_token_count(content), "latest": latest,
        "stale_latest": newest if newest and (latest is None or newest["experiment"].pk !=
                                              latest["experiment"].pk) else None,
        "experiments": [selectors.experiment_summary(e, request.user) for e in experiments[:20]],
        "addable": addable, "add_form": CandidateAddForm(),
        "edit_form": CandidateEditForm(initial={"title": candidate.title,
                                                "tool_description": candidate.tool_description}),
        "publish_form": CandidatePublishForm(), "newer_version": selectors.latest_version(candidate.exemplar_set),
        "can_edit": candidate.is_open and policies.can_edit_candidates(request.user),
        "can_publish": candidate.is_open and policies.can_review_exemplars(request.user),
        "can_run": candidate.is_open and policies.can_run_experiments(request.user),
        "all_approved": all(r["approved"] for r in rows)})


@require_POST
def candidate_edit(request: HttpRequest, pk: int) -> HttpResponse:
    candidate = policies.access_candidate(request.user, pk)
    policies.check_can_edit_candidate(request.user, candidate)
    form = CandidateEditForm(request.POST)
    if form.is_valid():
        try:
            services.candidate_update(candidate=candidate, user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            _errors(request, exc)
    return redirect(candidate)


@require_POST
def candidate_add(request: HttpRequest, pk: int) -> HttpResponse:
    candidate = policies.access_candidate(request.user, pk)
    policies.check_can_edit_candidate(request.user, candidate)
    form = CandidateAddForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
        return redirect(candidate)
    exemplar = policies.access_exemplar(request.user, form.cleaned_data["exemplar"])
    try:
        services.candidate_add(candidate=candidate, exemplar=exemplar, user=request.user)
    except ValidationError as exc:
        _errors(request, exc)
    else:
        messages.success(request, f"Exemplar #{exemplar.pk} added.")
    return redirect(candidate)


@require_POST
def candidate_item(request: HttpRequest, pk: int, item_id: int, op: str) -> HttpResponse:
    candidate = policies.access_candidate(request.user, pk)
    policies.check_can_edit_candidate(request.user, candidate)
    item = get_object_or_404(CandidateItem, pk=item_id, candidate=candidate)
    try:
        if op == "remove":
            services.candidate_remove(candidate=candidate, item=item, user=request.user)
        elif op in ("current", "published"):
            services.candidate_use_current(candidate=candidate, item=item, user=request.user, current=op == "current")
        elif op in ("up", "down"):
            services.candidate_move(candidate=candidate, item=item, user=request.user, offset=-1 if op == "up" else 1)
        else:
            raise Http404("Unknown operation.")
    except ValidationError as exc:
        _errors(request, exc)
    return redirect(candidate)


@require_POST
def candidate_discard(request: HttpRequest, pk: int) -> HttpResponse:
    candidate = policies.access_candidate(request.user, pk)
    policies.check_can_edit_candidate(request.user, candidate)
    try:
        services.candidate_discard(candidate=candidate, user=request.user)
    except ValidationError as exc:
        _errors(request, exc)
    return redirect(candidate)


@require_POST
def candidate_publish(request: HttpRequest, pk: int) -> HttpResponse:
    candidate = policies.access_candidate(request.user, pk)
    policies.check_can_publish_set(request.user, candidate.exemplar_set)
    form = CandidatePublishForm(request.POST)
    form.is_valid()
    try:
        version = services.candidate_publish(candidate=candidate, user=request.user,
                                             note=form.cleaned_data.get("note", ""),
                                             confirm_regression=form.cleaned_data.get("confirm_regression", False))
    except ValidationError as exc:
        _errors(request, exc)
        return redirect(candidate)
    messages.success(request, f"Published {candidate} as version {version.number}.")
    return redirect(version)


@require_GET
def candidate_preview(request: HttpRequest, pk: int) -> HttpResponse:
    """The exact first messages of a session with the candidate (the preview code of published versions)."""
    candidate = policies.access_candidate(request.user, pk)
    content = selectors.candidate_content(candidate)
    form = PreviewForm(request.GET or None, user=request.user)
    context = {"candidate": candidate, "exemplar_set": candidate.exemplar_set, "form": form, "content": content}
    if form.is_valid():
        data = form.cleaned_data
        context.update(prompt_preview(
            database=data["database"], question=data["question"], evidence=data["evidence"],
            enabled_tools=data["tools"], use_evidence=data["use_evidence"],
            exemplars=exemplars_from_items(content.exemplars), tool_description=content.tool_description,
            tool_description_no_findpath=content.tool_description_no_findpath))
    return render(request, "annotations/experiments/candidate_preview.html", context)


# --- from review to exemplars --------------------------------------------------------------------------------------


@require_POST
def exemplar_from_failure(request: HttpRequest, item_id: int) -> HttpResponse:
    """"Write an exemplar for this": the authoring console, prefilled from the failure's session."""
    policies.check_can_author_exemplar(request.user)
    item = policies.access_run_item(request.user, item_id)
    if item.session_id is not None:
        agent_policies.access_session(request.user, item.session_id)
    try:
        exemplar = services.exemplar_from_failure(item=item, user=request.user)
    except ValidationError as exc:
        _errors(request, exc)
        return redirect("labels:review", item.pk)
    messages.success(request, f"Draft exemplar #{exemplar.pk} written from question {item.question.index} of "
                              f"run #{item.run_id}: fix its trajectory, then try it in a candidate.")
    return redirect(exemplar)
