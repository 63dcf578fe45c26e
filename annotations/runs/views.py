from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agent.conf import agent_settings
from agent.forms import add_service_errors
from agent.services import sessions as session_services
from agent.sql.base import human_bytes
from agent.textclean import csv_writer
from agent.views.uploads import request_too_large
from annotations import policies
from annotations.evaluation.sqldiff import sql_token_diff
from annotations.labels import selectors as label_selectors
from annotations.runs import estimates, selectors, services, uploads
from annotations.runs.forms import CompareForm, DatasetUploadForm, PredictionImportForm, RunLaunchForm
from annotations.runs.models import Run


def dataset_list(request: HttpRequest) -> HttpResponse:
    """The datasets, and (Operators) a dataset upload, imported on a worker with a progress page."""
    refusal = None
    form = DatasetUploadForm(user=request.user)
    if request.method == "POST":
        policies.check_can_import_dataset(request.user)
        refusal = request_too_large(request, agent_settings.UPLOAD_MAX_DATASET_BYTES, "upload")
        if not refusal:
            form = DatasetUploadForm(request.POST, request.FILES, user=request.user)
            if form.is_valid():
                data = form.cleaned_data
                try:
                    job = uploads.dataset_upload_start(
                        kind=data["kind"], name=data["name"], user=request.user,
                        archive=_uploaded(data["archive"]), questions=_uploaded(data["questions"]),
                        database_files=[_uploaded(f) for f in data["databases"]], workspace=data["workspace"])
                except ValidationError as exc:
                    add_service_errors(form, exc)
                else:
                    return redirect(job)
    return render(request, "annotations/runs/dataset_list.html",
                  {"datasets": policies.visible_datasets(request.user).annotate(run_count=Count("runs")), "form": form,
                   "refusal": refusal,
                   "limit": human_bytes(agent_settings.UPLOAD_MAX_DATASET_BYTES),
                   "can_import": policies.can_import_datasets(request.user)},
                  status=413 if refusal else 200)


def _uploaded(upload) -> uploads.UploadedFile | None:
    return uploads.UploadedFile(upload.name, upload.size, upload.chunks()) if upload else None


def dataset_detail(request: HttpRequest, name: str) -> HttpResponse:
    dataset = policies.access_dataset(request.user, name)
    if request.method == "POST":
        policies.check_can_upload_predictions(request.user, dataset)
    form = PredictionImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            run = services.run_import_predictions(
                dataset=dataset, text=form.cleaned_data["file"], fmt=form.cleaned_data["format"],
                name=form.cleaned_data["name"], source_file=request.FILES["file"].name, user=request.user,
                evaluate_later=True)
        except ValidationError as exc:
            form.add_error("file", " ".join(exc.messages))
        else:
            counts = selectors.prediction_counts(run=run)
            if services.run_awaits_missing_choice(run):
                messages.warning(request, f"{counts['text']}. Nothing is scored until you choose how below.")
            else:
                messages.success(request, f"Imported: {counts['text']}. Evaluating…")
            return redirect(run)
    launch = RunLaunchForm(prefix="launch", user=request.user)
    by_db = dataset.questions.values("db_id", "database__name").order_by("db_id")
    databases: dict[str, dict] = {}
    for row in by_db:
        entry = databases.setdefault(row["db_id"], {"db_id": row["db_id"], "registered": row["database__name"],
                                                    "questions": 0})
        entry["questions"] += 1
    return render(request, "annotations/runs/dataset_detail.html", {
        "dataset": dataset, "form": form, "launch": launch, "databases": databases.values(),
        "run_table": selectors.dataset_run_table(dataset=dataset),
        "cell_values": selectors.dataset_cell_values(dataset=dataset),
        "can_upload": policies.can_upload_predictions(request.user),
        "can_launch": policies.can_launch_runs(request.user)})


@require_POST
def run_launch(request: HttpRequest, name: str) -> HttpResponse:
    dataset = policies.access_dataset(request.user, name)
    policies.check_can_launch_run(request.user, dataset)
    form = RunLaunchForm(request.POST, prefix="launch", user=request.user)
    if form.is_valid():
        data = form.cleaned_data
        try:
            run = services.run_create_agent(
                dataset=dataset, name=data["name"], strategy=data["strategy"], user=request.user,
                exemplar_set_version=data["exemplar_set_version"], zero_shot=data["zero_shot"],
                paper_replica=data["paper_replica"], db_ids=data["db_ids"], limit=data["limit"],
                sample=data["sample"], seed=data["seed"], executable_only=data["executable_only"],
                max_concurrency=data["max_concurrency"], spend_cap=data["spend_cap"], pool=data["pool"] or None,
                without=data["without"])
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            return redirect(run)
    else:
        messages.error(request, "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
    return redirect(dataset)


def run_estimate(request: HttpRequest, name: str) -> HttpResponse:
    """The launch form's estimate (htmx, on every change): questions, prompt tokens and cost; nothing is stored."""
    dataset = policies.access_dataset(request.user, name)
    policies.check_can_launch_run(request.user, dataset)
    form = RunLaunchForm(request.GET, prefix="launch", user=request.user)
    form.is_valid()  # an incomplete form (no name yet) still has the choices the estimate needs
    data = form.cleaned_data
    estimate = None
    if "limit" not in form.errors and "sample" in data:
        estimate = estimates.run_estimate(
            dataset=dataset, strategy=data.get("strategy") or "interactive_t2s",
            endpoint=session_services.default_llm_endpoint(),
            exemplar_set_version=data.get("exemplar_set_version"), zero_shot=data.get("zero_shot", False),
            paper_replica=data.get("paper_replica", False), db_ids=data.get("db_ids") or [],
            limit=data.get("limit"), sample=data["sample"], seed=data.get("seed"), without=data.get("without") or (),
            executable_only=data.get("executable_only", False))
    pool_needed = None
    if data.get("strategy"):  # a valid choice: the form checked it
        pool_needed = services.run_pool_needed(strategy=data["strategy"], pool=data.get("pool"),
                                               exemplar_set_version=data.get("exemplar_set_version"))
    return render(request, "annotations/runs/partials/run_estimate.html",
                  {"estimate": estimate, "errors": form.errors.get("limit"), "pool_needed": pool_needed})


@require_POST
def run_control(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    run = policies.access_run(request.user, pk)
    policies.check_can_control_run(request.user, run)
    if action == "cancel":
        services.run_cancel(run=run)
        messages.info(request, "Run cancelled; running sessions stop after their current step.")
    elif action == "resume" and run.source == Run.Source.AGENT:
        services.run_resume(run=run)
        messages.info(request, "Resumed: only missing and failed questions run again.")
    return redirect(run)


def run_list(request: HttpRequest) -> HttpResponse:
    return render(request, "annotations/runs/run_list.html",
                  {"runs": policies.visible_runs(request.user).select_related("dataset", "created_by"),
                   "compare": CompareForm(user=request.user)})


def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = policies.access_run(request.user, pk)
    filters = {k: request.GET.get(k, "") for k in ("outcome", "db_id", "difficulty", "tables")}
    page = Paginator(selectors.run_items(run=run, **filters), 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {"run": run, "summary": selectors.run_summary(run=run), "page": page, "filters": filters,
               "corrected": label_selectors.run_ex_with_corrections(run=run, user=request.user)
               if run.totals and not request.GET.get("poll")
               and label_selectors.corrections(run=run, user=request.user) else None,
               "awaiting_choice": services.run_awaits_missing_choice(run),
               "can_choose_missing": policies.can_upload_predictions(request.user),
               "can_control": policies.can_control_run(request.user, run),
               "query": query.urlencode(), "exemplars": selectors.run_exemplars(run=run, user=request.user),
               "progress": services.run_progress(run=run) if run.source == Run.Source.AGENT else None}
    if request.htmx and request.GET.get("poll"):
        response = render(request, "annotations/runs/partials/run_status.html", context)
        if run.status not in (Run.Status.PENDING, Run.Status.RUNNING, Run.Status.EVALUATING):
            response["HX-Refresh"] = "true"  # figures are ready: show the whole page
        return response
    return render(request, "annotations/runs/run_detail.html", context)


def run_item(request: HttpRequest, pk: int, item_id: int) -> HttpResponse:
    item = policies.access_run_item(request.user, item_id, run_id=pk)
    results = selectors.run_item_with_results(item=item)
    diff = "\n".join(sql_token_diff(item.question.gold_sql, item.predicted_sql or ""))
    neighbours = selectors.run_items(run=item.run).values_list("id", flat=True)
    ids = list(neighbours)
    position = ids.index(item.pk)
    return render(request, "annotations/runs/run_item.html", {
        "item": item, "run": item.run, "results": results, "diff": diff,
        "can_write_exemplar": item.ex is False and policies.can_author_exemplars(request.user),
        "previous": ids[position - 1] if position else None,
        "next": ids[position + 1] if position + 1 < len(ids) else None})


@require_POST
def run_reevaluate(request: HttpRequest, pk: int) -> HttpResponse:
    run = policies.access_run(request.user, pk)
    policies.check_can_control_run(request.user, run)
    try:
        services.run_evaluate_queue(run=run)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.info(request, "Evaluation queued.")
    return redirect(run)


@require_POST
def run_missing(request: HttpRequest, pk: int) -> HttpResponse:
    """The choice for a short prediction file: its missing questions scored as wrong, or only the subset."""
    run = policies.access_run(request.user, pk)
    policies.check_can_upload_predictions(request.user, run.dataset)
    try:
        services.run_choose_missing(run=run, choice=request.POST.get("choice", ""))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.info(request, f"Missing predictions {run.get_missing_predictions_display()}. Evaluating…")
    return redirect(run)


def run_compare(request: HttpRequest) -> HttpResponse:
    form = CompareForm(request.GET or None, user=request.user)
    comparison, page = None, None
    filters = {k: request.GET.get(k, "") for k in ("kind", "bucket", "db_id")}
    if form.is_valid():
        comparison = selectors.run_compare(a=form.cleaned_data["a"], b=form.cleaned_data["b"], **filters)
        if request.GET.get("format") == "csv":
            return _compare_csv(comparison)
        page = Paginator(comparison["pairs"], COMPARE_PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    base = request.GET.copy()
    for key in (*filters, "page", "format"):
        base.pop(key, None)
    return render(request, "annotations/runs/run_compare.html", {
        "form": form, "comparison": comparison, "page": page, "filters": filters, "query": query.urlencode(),
        "base": base.urlencode(), "kinds": selectors.COMPARE_KINDS})


COMPARE_PAGE_SIZE = 100


def _compare_csv(comparison: dict) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (f'attachment; filename="compare-run{comparison["a"].pk}-'
                                       f'run{comparison["b"].pk}.csv"')
    writer = csv_writer(response)  # neutralises spreadsheet formulas (SQL may start with '-' comments)
    writer.writerow(selectors.COMPARE_CSV_HEADER)
    writer.writerows(selectors.compare_csv_rows(comparison))
    return response
