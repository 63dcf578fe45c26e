"""Pages for labelling: review (one question), queues, agreement and adjudication, dashboards, export.

Views are thin: a check, a service or selector call, a response. htmx requests get partials; a refused
action is rendered as a message in the partial (status 200 for htmx so it is swapped in, 403/409 otherwise).
"""

from __future__ import annotations

import io
import json

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from agent import selectors as agent_selectors
from agent.templatetags.studio import format_figure as figure
from agent.textclean import csv_dict_writer, csv_writer
from annotations import policies
from annotations.evaluation.sqldiff import sql_token_diff
from annotations.labels import selectors, services
from annotations.labels.forms import CorrectedGoldForm, QueueForm
from annotations.labels.models import Category, Label, Queue, TaxonomyVersion
from annotations.runs.models import Run, RunItem
from annotations.runs.selectors import run_item_with_results


def _item(request: HttpRequest, item_id: int) -> RunItem:
    return policies.access_run_item(request.user, item_id)


def _queue(request: HttpRequest, item: RunItem | None = None) -> Queue | None:
    queue_id = request.GET.get("queue") or request.POST.get("queue")
    if not queue_id or not str(queue_id).isdigit():
        return None
    queue = policies.visible_queues(request.user).filter(pk=queue_id).select_related("run", "taxonomy_version").first()
    if queue is not None and item is not None and queue.run_id != item.run_id:
        return None
    return queue


def _version(queue: Queue | None) -> TaxonomyVersion | None:
    return queue.taxonomy_version if queue else selectors.default_taxonomy_version()


def _buttons_context(*, item: RunItem, user, version: TaxonomyVersion | None, suggested: dict[str, str],
                     error: str = "", adjudicating: bool = False) -> dict:
    """The label buttons: the user's own labels, or in adjudication mode the item's final labels."""
    if adjudicating:
        mine = {lab.category_id: lab for lab in Label.objects.filter(item=item, is_final=True)}
    else:
        mine = {lab.category_id: lab for lab in Label.objects.filter(item=item, annotator=user, is_final=False)}
    categories = list(version.categories.all()) if version else []
    groups: dict[str, list] = {}
    for c in categories:
        groups.setdefault(c.group, []).append({"category": c, "label": mine.get(c.pk), "suggested": suggested.get(c.key)})
    other_version = [lab for lab in mine.values() if version is None or lab.taxonomy_version_id != version.pk]
    return {"item": item, "groups": groups, "error": error, "adjudicating": adjudicating,
            "can_label": policies.can_adjudicate(user) if adjudicating else policies.can_label(user),
            "toggle_url": "labels:final_toggle" if adjudicating else "labels:toggle",
            "other_version_labels": other_version, "label_count": len(mine)}


def _others_context(*, item: RunItem, user, adjudicating: bool) -> dict:
    """The other annotators' labels as chips, or why they are hidden (blind queues)."""
    reason = "" if adjudicating else policies.labels_hidden_reason(user, item)
    if reason:
        return {"others_hidden": reason, "others": []}
    others = (selectors.item_other_labels(item=item, user=None) if adjudicating
              else selectors.item_other_labels(item=item, user=user))
    return {"others_hidden": "", "others": others,
            "finals": [lab.category.name for lab in selectors.item_final_labels(item=item)]}


def review(request: HttpRequest, item_id: int) -> HttpResponse:
    item = _item(request, item_id)
    queue = _queue(request, item)
    version = _version(queue)
    adjudicating = request.GET.get("mode") == "adjudicate"
    if adjudicating:
        policies.check_can_adjudicate(request.user)
    # A GET writes nothing: the page takes its reservation (and records the suggestions shown) with a POST
    # to review_start when it loads; here the conflict is only looked up.
    can_label = policies.can_label(request.user) and not adjudicating
    conflict = (services.limit_conflict(item=item, user=request.user) or "") if can_label else ""
    results = run_item_with_results(item=item)
    suggested = selectors.item_suggestions(item=item, results=results)
    diff_lines = sql_token_diff(item.question.gold_sql, item.predicted_sql or "")[2:]
    if adjudicating:
        following = selectors.next_adjudication_item(run=item.run, after=item)
        next_url = (reverse("labels:review", args=[following.pk]) + "?mode=adjudicate") if following else ""
    elif queue:
        next_url = reverse("labels:queue_next", args=[queue.pk]) + f"?after={item.pk}"
    else:
        following = (selectors.run_failures(run=item.run).filter(question__index__gt=item.question.index)
                     .values_list("pk", flat=True).first())
        next_url = reverse("labels:review", args=[following]) if following else ""
    names = {c.key: c.name for c in version.categories.all()} if version else {}
    mine = Label.objects.filter(item=item, annotator=request.user, is_final=False)
    note = next((lab.note for lab in mine if lab.note), "")
    corrected = next((lab for lab in mine.select_related("category") if lab.category.accepts_corrected_gold), None)
    context = {
        "item": item, "run": item.run, "queue": queue, "version": version, "results": results,
        "diff_lines": diff_lines, "conflict": conflict, "next_url": next_url,
        "suggestions": [{"key": s.key, "reason": s.reason, "name": names.get(s.key, s.key)} for s in suggested],
        "progress": selectors.queue_progress(queue=queue, user=request.user) if queue else None,
        "reservations": selectors.active_reservations(item=item).exclude(user=request.user),
        # the session's own steps; its prompt (exemplars of other databases) is not on this page
        "turns": agent_selectors.session_turns(session=item.session, viewer=request.user) if item.session_id else [],
        "note": note, "corrected": corrected,
        "corrected_form": CorrectedGoldForm(initial={"corrected_sql": corrected.corrected_sql if corrected else ""}),
        "takes_corrections": bool(version and version.categories.filter(accepts_corrected_gold=True).exists()),
        **_buttons_context(item=item, user=request.user, version=version,
                           suggested={s.key: s.reason for s in suggested}, error=conflict, adjudicating=adjudicating),
        **_others_context(item=item, user=request.user, adjudicating=adjudicating),
        "review_start": can_label and not conflict,
        "can_write_exemplar": item.ex is False and policies.can_author_exemplars(request.user),
    }
    # Verdicts given on the session page (right / wrong, a corrected query) follow the labels' blindness.
    context["verdicts"] = [f for f in (item.session.feedback.select_related("author") if item.session_id else [])
                           if f.author_id == request.user.pk or not context["others_hidden"]]
    return render(request, "annotations/labels/review.html", context)


@require_POST
def review_start(request: HttpRequest, item_id: int) -> HttpResponse:
    """Reserve the question for the reviewer and record the suggestions the page shows (sent by the page on load)."""
    item = _item(request, item_id)
    policies.check_can_label(request.user)
    suggested = selectors.item_suggestions(item=item, results=run_item_with_results(item=item))
    try:
        services.review_start(item=item, user=request.user, suggestions=suggested)
    except services.LabelConflict as exc:
        return HttpResponse(str(exc), status=409, content_type="text/plain")
    return HttpResponse(status=204)


@require_POST
def review_leave(request: HttpRequest, item_id: int) -> HttpResponse:
    """Give the question back when the reviewer moves on (sent by the page before it navigates away)."""
    services.reservation_release(item=_item(request, item_id), user=request.user)
    return HttpResponse(status=204)


def _refused(request: HttpRequest, template: str, context: dict, status: int) -> HttpResponse:
    return render(request, template, context, status=200 if request.htmx else status)


@require_POST
def label_toggle(request: HttpRequest, item_id: int, category_id: int) -> HttpResponse:
    item = _item(request, item_id)
    category = get_object_or_404(Category.objects.select_related("version"), pk=category_id)
    error, status = "", 200
    try:
        services.label_toggle(item=item, category=category, user=request.user, note=request.POST.get("note", ""))
    except PermissionDenied as exc:
        error, status = str(exc), 403
    except services.LabelConflict as exc:
        error, status = str(exc), 409
    suggested = {s.category_key: s.reason for s in item.label_suggestions.filter(user=request.user)}
    context = _buttons_context(item=item, user=request.user, version=category.version, suggested=suggested,
                               error=error)
    context["queue"] = _queue(request, item)
    if context["queue"] is not None:  # the header's progress moves as the reviewer labels
        context["progress"] = selectors.queue_progress(queue=context["queue"], user=request.user)
    # The other annotators' panel changes with the first label (blind queues: it offers to show theirs).
    context.update(_others_context(item=item, user=request.user, adjudicating=False), others_oob=True)
    template = "annotations/labels/partials/label_buttons.html"
    return _refused(request, template, context, status) if error else render(request, template, context)


@require_POST
def final_toggle(request: HttpRequest, item_id: int, category_id: int) -> HttpResponse:
    """Adjudication mode: one key toggles one category of the item's final labels."""
    item = _item(request, item_id)
    policies.check_can_adjudicate(request.user)
    category = get_object_or_404(Category.objects.select_related("version"), pk=category_id)
    services.label_final_toggle(item=item, category=category, user=request.user)
    context = _buttons_context(item=item, user=request.user, version=category.version, suggested={},
                               adjudicating=True)
    return render(request, "annotations/labels/partials/label_buttons.html", context)


@require_POST
def reveal(request: HttpRequest, item_id: int) -> HttpResponse:
    """Blind queues: an annotator who labelled the question asks to see the others' labels on it."""
    item = _item(request, item_id)
    policies.check_can_label(request.user)
    try:
        services.labels_reveal(item=item, user=request.user)
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    target = reverse("labels:review", args=[item.pk])
    queue = _queue(request, item)
    return redirect(target + (f"?queue={queue.pk}" if queue else "") + "#others")


@require_POST
def label_note(request: HttpRequest, item_id: int) -> HttpResponse:
    item = _item(request, item_id)
    policies.check_can_label(request.user)
    try:
        count = services.label_note_set(item=item, user=request.user, note=request.POST.get("note", ""))
    except PermissionDenied as exc:
        return HttpResponse(str(exc), status=200 if request.htmx else 403)
    if count:
        return HttpResponse(f"Note saved on {count} label{'s' if count != 1 else ''}.")
    return HttpResponse("Note kept here; it is saved with your first label.")


@require_POST
def label_corrected(request: HttpRequest, item_id: int) -> HttpResponse:
    item = _item(request, item_id)
    policies.check_can_label(request.user)
    form = CorrectedGoldForm(request.POST)
    label = (Label.objects.filter(item=item, annotator=request.user, category__accepts_corrected_gold=True,
                                  is_final=False)
             .select_related("category", "item__question__database").order_by("-updated_at").first())
    error = ""
    if label is None:
        error = "Give this question a label that takes a corrected gold query (e.g. Golden Wrong) first."
    elif form.is_valid():
        try:
            label = services.label_update(label=label, user=request.user,
                                          corrected_sql=form.cleaned_data["corrected_sql"])
        except (PermissionDenied, ValidationError) as exc:
            error = " ".join(getattr(exc, "messages", [str(exc)]))
    return render(request, "annotations/labels/partials/corrected_result.html",
                  {"corrected": label, "error": error})


# --- queues ---------------------------------------------------------------------


def queue_list(request: HttpRequest) -> HttpResponse:
    form = QueueForm(request.POST or None, user=request.user, initial={"taxonomy_version": selectors.default_taxonomy_version(),
                                                    "run": request.GET.get("run")})
    if request.method == "POST":
        policies.check_can_create_queue(request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            queue = services.queue_create(user=request.user, **data)
        except (PermissionDenied, ValidationError) as exc:
            messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
        else:
            return redirect(queue)
    listed = list(selectors.queues_for_user(user=request.user))
    created = list(selectors.queues_created_by(user=request.user))
    progress = selectors.queues_progress(queues=[*listed, *created], user=request.user)
    queues = [{"queue": q, "progress": progress[q.pk]} for q in listed]
    return render(request, "annotations/labels/queue_list.html",
                  {"queues": queues, "created": [{"queue": q, "progress": progress[q.pk]} for q in created],
                   "form": form, "can_create": policies.can_create_queues(request.user)})


def queue_detail(request: HttpRequest, pk: int) -> HttpResponse:
    queue = policies.access_queue(request.user, pk)
    todo = request.GET.get("show") == "todo"
    items = (selectors.queue_items_unlabelled_by(queue=queue, user=request.user) if todo
             else selectors.queue_items(queue=queue))
    shown = policies.hide_blind_labels(request.user, Label.objects.select_related("category", "annotator"),
                                       run_ids=[queue.run_id])
    items = items.prefetch_related(Prefetch("labels", queryset=shown, to_attr="shown_labels"))
    # pages of 100: a queue on a whole run is 1,000+ failures, each row with its labels to render
    page = Paginator(items, 100).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "annotations/labels/queue_detail.html", {
        "queue": queue, "items": page.object_list, "page": page, "query": query.urlencode(),
        "progress": selectors.queue_progress(queue=queue, user=request.user),
        "annotator_progress": selectors.queue_annotator_progress(queue=queue),
        "assignees": queue.assignees.all(), "todo": todo})


def queue_next(request: HttpRequest, pk: int) -> HttpResponse:
    queue = policies.access_queue(request.user, pk)
    if not selectors.queue_is_for(queue=queue, user=request.user):
        messages.error(request, "This queue is assigned to other annotators.")
        return redirect("labels:queue_list")
    after = request.GET.get("after")
    after_item = (RunItem.objects.select_related("question").filter(pk=after, run_id=queue.run_id).first()
                  if after and after.isdigit() else None)
    item = selectors.queue_next_item(queue=queue, user=request.user, after=after_item)
    if item is None and after_item is not None:
        item = selectors.queue_next_item(queue=queue, user=request.user)  # wrap around to skipped ones
    if item is None:
        messages.success(request, "Nothing left for you in this queue.")
        return redirect(queue)
    return redirect(reverse("labels:review", args=[item.pk]) + f"?queue={queue.pk}")


# --- agreement and adjudication -------------------------------------------------------


def _annotator_ids(request: HttpRequest, run: Run) -> tuple[list, list[int]]:
    annotators = list(selectors.run_annotators(run=run))
    chosen = [int(a) for a in request.GET.getlist("annotator") if a.isdigit()]
    ids = [a.pk for a in annotators if a.pk in chosen] or [a.pk for a in annotators]
    return annotators, ids


def agreement(request: HttpRequest, pk: int) -> HttpResponse:
    run = policies.access_run(request.user, pk)
    annotators, ids = _annotator_ids(request, run)
    return render(request, "annotations/labels/agreement.html", {
        "run": run, "annotators": annotators, "chosen": ids,
        "agreement": selectors.run_agreement(run=run, annotator_ids=ids) if len(ids) >= 2 else None,
        "can_adjudicate": policies.can_adjudicate(request.user)})


def adjudication(request: HttpRequest, pk: int) -> HttpResponse:
    """One question per row with both queries, its result and each annotator's labels; adjudicators only
    (they see every label, blind or not)."""
    run = policies.access_run(request.user, pk)
    policies.check_can_adjudicate(request.user)
    annotators, ids = _annotator_ids(request, run)
    everything = request.GET.get("show") == "all"
    return render(request, "annotations/labels/adjudication.html", {
        "run": run, "annotators": annotators, "chosen": ids, "everything": everything,
        "rows": selectors.run_adjudication_rows(run=run, annotator_ids=ids, disagreements_only=not everything)})


@require_POST
def adjudicate(request: HttpRequest, item_id: int) -> HttpResponse:
    item = _item(request, item_id)
    policies.check_can_adjudicate(request.user)
    categories = list(Category.objects.filter(pk__in=request.POST.getlist("category")))
    services.label_adjudicate(item=item, user=request.user, categories=categories)
    messages.success(request, f"Question {item.question.index}: final labels set.")
    return redirect(reverse("labels:adjudication", args=[item.run_id]))


# --- dashboards and export ---------------------------------------------------------


def _charts(run: Run, user) -> dict:
    dist = selectors.category_distribution(run=run, user=user)
    agent = selectors.agent_figures(run=run)
    charts = {
        "categories": {"title": "Error categories (labelled failures, as Table 11)",
                       "rows": [{"key": r["key"], "label": r["label"], "value": r["count"],
                                 "extra": f"{r['group']} · {figure(r['percent'], 'percent:1')}"}
                                for r in dist["rows"]], "unit": "questions"},
        "tables": {"title": "EX by number of tables in the gold query (joins + 1; Table 9 buckets)",
                   "rows": [{"key": r["key"], "label": r["label"], "value": r["ex"],
                             "extra": f"{r['correct']:,}/{r['scored']:,} · {figure(r['share'], 'percent')} of questions"}
                            for r in selectors.ex_by(run=run, field="table_count")], "unit": "EX %"},
        "difficulty": {"title": "EX by difficulty",
                       "rows": [{"key": r["key"], "label": r["label"], "value": r["ex"],
                                 "extra": f"{r['correct']:,}/{r['scored']:,} · {figure(r['share'], 'percent')} of questions"}
                                for r in selectors.ex_by(run=run, field="difficulty")], "unit": "EX %"},
    }
    if agent:
        charts["rounds"] = {"title": f"Rounds per case (mean {figure(agent['avg_rounds'], 'fixed:2')}, tokens per "
                                     f"case {figure(agent['avg_tokens'], 'fixed:1')})",
                            "rows": [{"key": r["key"], "label": r["label"], "value": r["count"], "extra": ""}
                                     for r in agent["rounds"]], "unit": "cases"}
        charts["before_failure"] = {"title": "Last tool call before a failed answer",
                                    "rows": [{"key": r["key"], "label": r["label"], "value": r["count"], "extra": ""}
                                             for r in agent["before_failure"]], "unit": "failed cases"}
    return {"charts": charts, "distribution": dist, "agent": agent}


def _chart_link(run: Run, name: str, key: str) -> str:
    base = reverse("labels:questions", args=[run.pk])
    param = {"categories": "category", "tables": "tables", "difficulty": "difficulty", "rounds": "rounds",
             "before_failure": "last_tool"}[name]
    return f"{base}?{param}={key}"


def dashboard(request: HttpRequest, pk: int) -> HttpResponse:
    run = policies.access_run(request.user, pk)
    data = _charts(run, request.user)
    for name, chart in data["charts"].items():
        for row in chart["rows"]:
            row["url"] = _chart_link(run, name, row["key"])
    return render(request, "annotations/labels/dashboard.html", {
        "run": run, **data, "acceptance": selectors.suggestion_acceptance(run=run, user=request.user),
        "corrected": selectors.run_ex_with_corrections(run=run, user=request.user),
        "chart_json": {name: {"labels": [r["label"] for r in c["rows"]], "values": [r["value"] for r in c["rows"]],
                              "urls": [r["url"] for r in c["rows"]], "unit": c["unit"]}
                       for name, c in data["charts"].items()}})


def chart_csv(request: HttpRequest, pk: int, chart: str) -> HttpResponse:
    run = policies.access_run(request.user, pk)
    data = _charts(run, request.user)
    charts = data["charts"]
    buffer = io.StringIO()
    writer = csv_writer(buffer)
    if chart == "tools" and data["agent"]:
        tools = data["agent"]["tools"]
        writer.writerow(["round", *tools])
        for row in data["agent"]["per_round"]:
            writer.writerow([row["round"], *(row[t] for t in tools)])
        return _csv_response(buffer, f"run-{run.pk}-{chart}.csv")
    if chart not in charts:
        raise Http404("No such chart.")
    writer.writerow(["key", "label", charts[chart]["unit"], "detail"])
    for r in charts[chart]["rows"]:
        writer.writerow([r["key"], r["label"], r["value"], r["extra"]])
    return _csv_response(buffer, f"run-{run.pk}-{chart}.csv")


def _csv_response(buffer: io.StringIO, filename: str) -> HttpResponse:
    response = HttpResponse(buffer.getvalue(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def questions(request: HttpRequest, pk: int) -> HttpResponse:
    """The questions behind one bar of a dashboard chart, each linked to its review page."""
    run = policies.access_run(request.user, pk)
    filters = {k: request.GET.get(k, "") for k in ("category", "tables", "difficulty", "rounds", "last_tool")}
    items = selectors.chart_items(run=run, user=request.user, **filters)
    page = Paginator(items, 100).get_page(request.GET.get("page"))  # a whole run is 1,000+ rows to render
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "annotations/labels/questions.html",
                  {"run": run, "items": page.object_list, "page": page, "query": query.urlencode(),
                   "filters": {k: v for k, v in filters.items() if v}})


def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "annotations/labels/overview.html", {
        "across": selectors.runs_distribution(runs=policies.visible_runs(request.user), user=request.user),
        "acceptance": selectors.suggestion_acceptance(runs=policies.visible_runs(request.user), user=request.user),
        "queues": selectors.queues_for_user(user=request.user)[:20],
        # what the people who asked said of their answers (the session pages' Right / Wrong)
        "verdicts": agent_selectors.answer_feedback_counts(viewer=request.user),
        "wrong_answers": agent_selectors.answer_feedback_recent(viewer=request.user, verdict="wrong")})


def export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    run = policies.access_run(request.user, pk)
    rows = selectors.export_rows(run=run, user=request.user)
    if fmt == "jsonl":
        response = StreamingHttpResponse((json.dumps(r) + "\n" for r in rows), content_type="application/x-ndjson")
    elif fmt == "csv":
        def lines():
            buffer = io.StringIO()
            writer = csv_dict_writer(buffer, fieldnames=selectors.EXPORT_FIELDS)
            writer.writeheader()
            for r in rows:
                writer.writerow(r)
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
            yield buffer.getvalue()
        response = StreamingHttpResponse(lines(), content_type="text/csv")
    else:
        raise Http404("Export as csv or jsonl.")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-labels.{fmt}"'
    return response
