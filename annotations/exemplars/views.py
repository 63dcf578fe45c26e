"""Exemplar pages: a decorator, a service call, a response (rules live in ``services``)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agent import policies as agent_policies
from agent import services as agent_services
from agent.sql import SQLError
from agent.strategies.prompt import estimate_tokens, render_exemplar
from annotations import policies
from annotations.experiments import selectors as experiment_selectors
from annotations.models import Exemplar

from . import selectors, services
from .forms import (
    ExemplarCreateForm,
    ExemplarEditForm,
    PreviewForm,
    SetCreateForm,
    SetUploadForm,
    compose_action,
    step_tools,
)
from .importer import ImportProblem, export_version, import_upload
from .lint import lint_exemplar


def _errors(exc: ValidationError) -> list[str]:
    return [str(m) for m in exc.messages]


# --- exemplars ------------------------------------------------------------------------------------


@require_GET
def exemplar_list(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state") or ""
    exemplars = selectors.exemplar_list(user=request.user, state=state or None)
    page = Paginator(exemplars, 100).get_page(request.GET.get("page"))
    return render(request, "annotations/exemplar_list.html", {
        "exemplars": page.object_list, "page": page, "query": f"state={state}" if state else "",
        "state": state, "states": Exemplar.State.choices,
        "form": ExemplarCreateForm(user=request.user), "can_review": policies.can_review_exemplars(request.user),
        "can_author": policies.can_author_exemplars(request.user)})


@require_http_methods(["GET", "POST"])
def exemplar_new(request: HttpRequest) -> HttpResponse:
    policies.check_can_author_exemplar(request.user)
    if request.method == "GET":  # opened directly (a bookmark, a link): the form lives on the list page
        return redirect(reverse("exemplars:exemplar_list") + "#new-exemplar")
    form = ExemplarCreateForm(request.POST, user=request.user)
    if form.is_valid():
        try:
            exemplar = services.exemplar_create(user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            for m in _errors(exc):
                messages.error(request, m)
        else:
            return redirect(exemplar)
    else:
        for field, errs in form.errors.items():
            messages.error(request, f"{field}: {' '.join(errs)}")
    return redirect("exemplars:exemplar_list")


def _console_context(request: HttpRequest, exemplar: Exemplar, **extra) -> dict:
    steps = selectors.exemplar_steps(exemplar)
    schema = exemplar.database.schema_info() if exemplar.database_id else None
    tool = extra.pop("tool", None) or request.GET.get("tool") or "SearchColumn"
    if tool not in step_tools():
        tool = "SearchColumn"
    done = bool(steps) and steps[-1].is_done
    return {"exemplar": exemplar, "steps": steps, "schema": schema, "tool": tool, "step_tools": step_tools(),
            "done": done, "can_edit": policies.can_edit_exemplar(request.user, exemplar),
            "stale_count": sum(1 for s in steps if s.stale or (not s.is_done and s.observation is None)),
            **extra}


def _get_exemplar(request: HttpRequest, pk: int) -> Exemplar:
    return policies.access_exemplar(request.user, pk)


@require_GET
def exemplar_detail(request: HttpRequest, pk: int) -> HttpResponse:
    exemplar = _get_exemplar(request, pk)
    context = _console_context(request, exemplar)
    context.update(edit_form=ExemplarEditForm(initial={
        "question": exemplar.question, "evidence": exemplar.evidence, "notes": exemplar.notes, "tags": ", ".join(exemplar.tags or [])}),
        can_review=policies.can_review_exemplars(request.user), reviewer_role=policies.REVIEWER_ROLE,
        reviewers=list(policies.exemplar_reviewers(exemplar)[:20]) if exemplar.state == "in_review" else [],
        token_estimate=selectors.exemplar_token_estimate(exemplar),
        versions=[v for v in policies.visible_versions(request.user).select_related("exemplar_set")
                  .order_by("-created_at")[:200] if any(e.get("exemplar_id") == exemplar.pk for e in v.exemplars)],
        experiments=[experiment_selectors.experiment_summary(e, request.user) for e in
                     experiment_selectors.experiments_with_exemplar(exemplar,
                                                                    policies.visible_experiments(request.user))],
        can_edit_candidates=policies.can_edit_candidates(request.user),
        open_candidates=policies.visible_candidates(request.user).filter(state="open").select_related(
            "exemplar_set")[:50] if policies.can_edit_candidates(request.user) else [],
        sets=selectors.set_list(request.user) if policies.can_edit_candidates(request.user) else [])
    if context["done"] and exemplar.final_sql and exemplar.database_id:
        context.update(_final_sql_check(exemplar))
    return render(request, "annotations/exemplar_detail.html", context)


def _final_sql_check(exemplar: Exemplar) -> dict:
    try:
        connector = agent_services.open_connector(exemplar.database)
    except SQLError as exc:
        return {"final_error": str(exc)}
    try:
        return {"final_result": connector.execute(exemplar.final_sql)}
    except SQLError as exc:
        return {"final_error": str(exc)}
    finally:
        connector.close()


@require_POST
def exemplar_edit(request: HttpRequest, pk: int) -> HttpResponse:
    exemplar = _get_exemplar(request, pk)
    policies.check_can_edit_exemplar(request.user, exemplar)
    form = ExemplarEditForm(request.POST)
    if form.is_valid():
        was = exemplar.state
        try:
            services.exemplar_update(exemplar=exemplar, user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            for m in _errors(exc):
                messages.error(request, m)
        else:
            messages.success(request, "Saved as draft." if was != exemplar.state else "Saved.")
    else:
        messages.error(request, "Write the question.")
    return redirect(exemplar)


@require_GET
def exemplar_lint(request: HttpRequest, pk: int) -> HttpResponse:
    exemplar = _get_exemplar(request, pk)
    report = lint_exemplar(exemplar)
    return render(request, "annotations/exemplar_lint.html", {"exemplar": exemplar, "report": report})


@require_POST
def exemplar_submit(request: HttpRequest, pk: int) -> HttpResponse:
    exemplar = _get_exemplar(request, pk)
    policies.check_can_edit_exemplar(request.user, exemplar)
    try:
        services.exemplar_submit(exemplar=exemplar, user=request.user)
    except ValidationError as exc:
        for m in _errors(exc):
            messages.error(request, m)
    else:
        messages.success(request, "Submitted for review.")
    return redirect(exemplar)


@require_POST
def exemplar_review(request: HttpRequest, pk: int) -> HttpResponse:
    exemplar = _get_exemplar(request, pk)
    policies.check_can_review_exemplar(request.user, exemplar)
    approve = request.POST.get("decision") == "approve"
    try:
        services.exemplar_review(exemplar=exemplar, user=request.user, approve=approve,
                                 comment=request.POST.get("comment", ""))
    except ValidationError as exc:
        for m in _errors(exc):
            messages.error(request, m)
    else:
        messages.success(request, "Approved." if approve else "Rejected.")
    return redirect(exemplar)


# --- steps (htmx: each returns the console partial) --------------------------------------------------


def _console_partial(request: HttpRequest, exemplar: Exemplar, **extra) -> HttpResponse:
    exemplar.refresh_from_db()
    context = _console_context(request, exemplar, **extra)
    if context["done"] and exemplar.final_sql and exemplar.database_id:
        context.update(_final_sql_check(exemplar))
    if request.htmx:  # the header's step count and token estimate follow the console (out of band)
        context.update(oob_counts=True, token_estimate=selectors.exemplar_token_estimate(exemplar))
        return render(request, "annotations/partials/console.html", context)
    if extra.get("error"):
        messages.error(request, extra["error"])
    return redirect(exemplar)


@require_GET
def step_fields(request: HttpRequest, pk: int) -> HttpResponse:
    exemplar = _get_exemplar(request, pk)
    policies.check_can_edit_exemplar(request.user, exemplar)
    return render(request, "annotations/partials/step_fields.html", _console_context(request, exemplar))


@require_POST
def step_add(request: HttpRequest, pk: int) -> HttpResponse:
    exemplar = _get_exemplar(request, pk)
    policies.check_can_edit_exemplar(request.user, exemplar)
    tool = request.POST.get("tool") or ""
    try:
        action = compose_action(tool, request.POST)
        services.step_add(exemplar=exemplar, user=request.user, thought=request.POST.get("thought", ""),
                          action=action)
    except ValidationError as exc:
        return _console_partial(request, exemplar, error=" ".join(_errors(exc)), tool=tool, form=request.POST)
    return _console_partial(request, exemplar, tool=tool)


@require_POST
def final_sql(request: HttpRequest, pk: int) -> HttpResponse:
    exemplar = _get_exemplar(request, pk)
    policies.check_can_edit_exemplar(request.user, exemplar)
    services.exemplar_set_final_sql(exemplar=exemplar, user=request.user, sql=request.POST.get("final_sql", ""))
    return _console_partial(request, exemplar)


@require_POST
def steps_rerun(request: HttpRequest, pk: int) -> HttpResponse:
    exemplar = _get_exemplar(request, pk)
    policies.check_can_edit_exemplar(request.user, exemplar)
    try:
        services.exemplar_rerun_stale(exemplar=exemplar, user=request.user)
    except ValidationError as exc:
        return _console_partial(request, exemplar, error=" ".join(_errors(exc)))
    return _console_partial(request, exemplar)


@require_POST
def step_op(request: HttpRequest, pk: int, step_id: int, op: str) -> HttpResponse:
    exemplar = _get_exemplar(request, pk)
    policies.check_can_edit_exemplar(request.user, exemplar)
    step = get_object_or_404(exemplar.steps, pk=step_id)
    try:
        if op == "edit":
            services.step_update(step=step, user=request.user, thought=request.POST.get("thought", ""),
                                 action=request.POST.get("action", ""))
        elif op == "run":
            services.step_run(step=step, user=request.user)
        elif op in ("up", "down"):
            services.step_move(step=step, user=request.user, offset=-1 if op == "up" else 1)
        elif op == "delete":
            services.step_delete(step=step, user=request.user)
        else:
            raise Http404("Unknown step operation.")
    except ValidationError as exc:
        return _console_partial(request, exemplar, error=" ".join(_errors(exc)))
    return _console_partial(request, exemplar)


@require_POST
def promote_session(request: HttpRequest, session_id: int) -> HttpResponse:
    policies.check_can_author_exemplar(request.user)
    session = agent_policies.access_session(request.user, session_id)
    exemplar = services.exemplar_promote_session(session=session, user=request.user)
    messages.success(request, f"Draft exemplar created from session #{session.pk}.")
    return redirect(exemplar)


# --- sets and versions -----------------------------------------------------------------------------


@require_GET
def set_list(request: HttpRequest) -> HttpResponse:
    return render(request, "annotations/set_list.html", {"sets": selectors.set_list(request.user),
                                                         "form": SetCreateForm(user=request.user),
                                                         "upload": SetUploadForm(user=request.user),
                                                         "can_import": policies.can_import_exemplars(request.user),
                                                         "can_create": policies.can_create_sets(request.user)})


def set_upload(request: HttpRequest) -> HttpResponse:
    """A prompt folder (zip) or a JSON set export, imported as a new set with its first version (Curators)."""
    policies.check_can_import_exemplars(request.user)
    form = SetUploadForm(request.POST or None, request.FILES or None, user=request.user)
    problems: list[str] = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            result = import_upload(chunks=upload.chunks(), size=upload.size, filename=upload.name,
                                   name=form.cleaned_data["name"], workspace=form.cleaned_data["workspace"],
                                   user=request.user)
        except ImportProblem as exc:
            problems = exc.problems
        else:
            for version in result.versions:
                messages.success(request, f"Imported set {version.exemplar_set.name} v{version.number}: "
                                          f"{version.exemplar_count} exemplars.")
            for line in result.report:
                messages.info(request, line)
            for warning in result.warnings[:20]:
                messages.warning(request, warning)
            return redirect(result.versions[0].exemplar_set if len(result.versions) == 1 else "exemplars:set_list")
    return render(request, "annotations/set_upload.html", {"form": form, "problems": problems},
                  status=400 if problems else 200)


@require_http_methods(["GET", "POST"])
def set_new(request: HttpRequest) -> HttpResponse:
    policies.check_can_create_set(request.user)
    if request.method == "GET":  # opened directly: the form lives on the sets page
        return redirect(reverse("exemplars:set_list") + "#new-set")
    form = SetCreateForm(request.POST, user=request.user)
    if form.is_valid():
        try:
            exemplar_set = services.set_create(user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            for m in _errors(exc):
                messages.error(request, m)
        else:
            return redirect(exemplar_set)
    return redirect("exemplars:set_list")


@require_GET
def set_detail(request: HttpRequest, set_id: int) -> HttpResponse:
    exemplar_set = policies.access_exemplar_set(request.user, set_id)
    versions = list(policies.visible_versions(request.user).filter(exemplar_set=exemplar_set)
                    .select_related("created_by").order_by("-number"))
    withheld = exemplar_set.versions.count() - len(versions)
    latest = versions[0] if versions else None
    order = {e.get("exemplar_id"): i + 1 for i, e in enumerate(latest.exemplars)} if latest else {}
    candidates = list(policies.visible_exemplars(request.user).approved().select_related("database"))
    in_latest_not_approved = [i for i in order if i not in {c.pk for c in candidates}]
    candidates.sort(key=lambda e: (order.get(e.pk, 10**6), e.pk))
    unrunnable = selectors.version_unrunnable(latest, user=request.user) if latest else []
    experiments = [experiment_selectors.experiment_summary(e, request.user)
                   for e in experiment_selectors.set_experiments(exemplar_set,
                                                                 policies.visible_experiments(request.user))[:10]]
    return render(request, "annotations/set_detail.html", {
        "exemplar_set": exemplar_set, "versions": versions, "latest": latest, "order": order, "withheld": withheld,
        "candidates": [(e, order.get(e.pk, "")) for e in candidates], "left_out": in_latest_not_approved,
        "tool_description": latest.tool_description if latest else "",
        "drafts": policies.visible_candidates(request.user).filter(exemplar_set=exemplar_set).order_by("-number")[:20],
        "experiments": experiments, "regressed": next((r for r in experiments if r["verdict"].regressed), None),
        "unrunnable": unrunnable,
        "can_edit_candidates": policies.can_edit_candidates(request.user)})


@require_POST
def set_publish(request: HttpRequest, set_id: int) -> HttpResponse:
    exemplar_set = policies.access_exemplar_set(request.user, set_id)
    policies.check_can_publish_set(request.user, exemplar_set)
    chosen: list[tuple[int, int]] = []
    for key, value in request.POST.items():
        if key.startswith("position_") and value.strip():
            try:
                chosen.append((int(value), int(key.removeprefix("position_"))))
            except ValueError:
                messages.error(request, "Positions are whole numbers.")
                return redirect(exemplar_set)
    chosen.sort()
    rows = {e.pk: e for e in policies.visible_exemplars(request.user).filter(pk__in=[pk for _, pk in chosen])}
    try:
        version = services.set_publish(
            exemplar_set=exemplar_set, exemplars=[rows[pk] for _, pk in chosen if pk in rows], user=request.user,
            tool_description=request.POST.get("tool_description", ""), note=request.POST.get("note", ""),
            confirm_regression=request.POST.get("confirm_regression") == "on")
    except ValidationError as exc:
        for m in _errors(exc):
            messages.error(request, m)
        return redirect(exemplar_set)
    messages.success(request, f"Published version {version.number}.")
    return redirect(version)


@require_GET
def version_detail(request: HttpRequest, set_id: int, number: int) -> HttpResponse:
    policies.access_exemplar_set(request.user, set_id)
    version = policies.access_version(request.user, set_id, number)
    items = list(zip(version.exemplars, selectors.exemplars_for_version(version), strict=True))
    return render(request, "annotations/version_detail.html", {
        "version": version, "exemplar_set": version.exemplar_set,
        "items": [(item, ex, estimate_tokens(render_exemplar(ex, use_evidence=True))) for item, ex in items],
        "token_estimate": selectors.version_token_estimate(version),
        "others": policies.visible_versions(request.user).filter(exemplar_set=version.exemplar_set)
        .exclude(pk=version.pk).order_by("-number")})


@require_GET
def version_diff(request: HttpRequest, set_id: int) -> HttpResponse:
    exemplar_set = policies.access_exemplar_set(request.user, set_id)
    try:
        a, b = int(request.GET.get("a", "")), int(request.GET.get("b", ""))
    except ValueError:
        raise Http404("Give two version numbers: ?a=1&b=2") from None
    old = policies.access_version(request.user, exemplar_set.pk, a)
    new = policies.access_version(request.user, exemplar_set.pk, b)
    return render(request, "annotations/version_diff.html", {
        "exemplar_set": exemplar_set, "old": old, "new": new, "diff": selectors.version_diff(old, new)})


@require_GET
def version_preview(request: HttpRequest, set_id: int, number: int) -> HttpResponse:
    policies.access_exemplar_set(request.user, set_id)
    version = policies.access_version(request.user, set_id, number)
    form = PreviewForm(request.GET or None, user=request.user)
    context = {"version": version, "exemplar_set": version.exemplar_set, "form": form}
    if form.is_valid():
        data = form.cleaned_data
        context.update(selectors.prompt_preview(
            database=data["database"], question=data["question"], evidence=data["evidence"],
            enabled_tools=data["tools"], use_evidence=data["use_evidence"],
            exemplars=selectors.exemplars_for_version(version), tool_description=version.tool_description,
            tool_description_no_findpath=version.tool_description_no_findpath))
    return render(request, "annotations/version_preview.html", context)


@require_GET
def version_export(request: HttpRequest, set_id: int, number: int) -> HttpResponse:
    policies.access_exemplar_set(request.user, set_id)
    version = policies.access_version(request.user, set_id, number)
    response = HttpResponse(json.dumps(export_version(version), ensure_ascii=False, indent=2),
                            content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{version.exemplar_set.name}-v{version.number}.json"'
    return response
