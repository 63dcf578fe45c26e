from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agent import policies, selectors
from agent.forms import STRATEGY_LABELS, AskForm, SessionFilterForm, add_service_errors, strategy_choices
from agent.services import budgets, feedback, few_shot, preferences
from agent.services import sessions as session_services
from agent.strategies import STRATEGIES
from agent.textclean import csv_writer


def ask(request: HttpRequest) -> HttpResponse:
    start = selectors.ask_initial(user=request.user, requested=request.GET.get("database", ""))
    initial = {"database": start["database"]}
    # The remembered strategy, else the first offered (so the large label names what the select shows); never one
    # that needs an example pool, which a single question does not have.
    offered = [name for name, cls in STRATEGIES.items() if not cls.needs_pool]
    initial["strategy"] = start["strategy"] if start["strategy"] in offered else offered[0]
    form = AskForm(request.POST or None, initial=initial, user=request.user)
    endpoint = session_services.default_llm_endpoint()
    if request.method == "POST":
        policies.check_can_ask(request.user)
    if request.method == "POST" and form.is_valid():
        try:
            session = session_services.session_create(
                database=form.cleaned_data["database"], question=form.cleaned_data["question"],
                evidence=form.cleaned_data["evidence"], strategy=form.cleaned_data["strategy"],
                options=form.options(), user=request.user,
                few_shot=form.few_shot(), zero_shot=form.cleaned_data["zero_shot"],
                paper_replica=form.cleaned_data["paper_replica"],
            )
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            preferences.ask_preference_remember(user=request.user, database=form.cleaned_data["database"],
                                                strategy=form.cleaned_data["strategy"])
            return redirect(session)
    recent = selectors.session_rows(selectors.session_list(viewer=request.user, user=request.user))[:8]
    strategies = [(name, STRATEGY_LABELS.get(name, name), getattr(cls, "substitutions", ""), cls.needs_pool)
                  for name, cls in STRATEGIES.items()]
    return render(request, "agent/ask.html", {"form": form, "endpoint": endpoint, "recent": recent,
                                              "strategies": strategies, "start": start,
                                              "strategy_labels": dict(strategy_choices()),
                                              "budget": budgets.budget_status_if_limited(request.user)})


def session_list(request: HttpRequest) -> HttpResponse:
    """Sessions as a trace list: filter, sort by a column, page by cursor (``?cursor=``; deep pages stay fast)."""
    filters = SessionFilterForm(request.GET or None, user=request.user)
    criteria = filters.cleaned_data if filters.is_valid() else {}
    qs = selectors.session_list(viewer=request.user, **{k: v for k, v in criteria.items() if v})
    sort = request.GET.get("sort", "")
    sort = sort if sort in selectors.SESSION_SORTS else selectors.DEFAULT_SESSION_SORT
    page = selectors.session_page(selectors.session_rows(qs), sort=sort, cursor=request.GET.get("cursor"))
    query = request.GET.copy()
    for key in ("cursor", "page", "sort"):
        query.pop(key, None)
    columns = [(label, key, _next_sort(sort, key)) for label, key in SORTABLE_COLUMNS]
    return render(request, "agent/session_list.html", {
        "filters": filters, "page": page, "sessions": page.object_list, "query": query.urlencode(), "sort": sort,
        "sort_query": f"{query.urlencode()}&sort={sort}" if query else f"sort={sort}", "columns": columns,
        "models": selectors.session_models(viewer=request.user)})


# Column headers of the sessions list that sort it: (label, sort key without direction).
SORTABLE_COLUMNS = [("Rounds", "rounds"), ("Tokens", "tokens"), ("Cost", "cost"), ("Latency", "latency"),
                    ("Asked", "created")]


def _next_sort(current: str, key: str) -> str:
    """A header link sorts by its column, largest first; clicked again, smallest first."""
    return key if current == f"-{key}" else f"-{key}"


def session_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The session with every turn; its live poll (htmx, ``?after=<last turn index>``) gets only the new turns
    and the status line, so a long session's page does not re-render every prompt each second."""
    session = policies.access_session(request.user, pk)
    after = request.GET.get("after", "")
    if request.htmx and (after.isdigit() or after == "-1"):
        turns = selectors.session_turns(session=session, viewer=request.user, with_prompts=True, after=int(after))
        last = turns[-1].index if turns else int(after)
        return render(request, "agent/partials/session_poll_update.html",
                      {"session": session, "turns": turns, "last_index": last})
    turns = selectors.session_turns(session=session, viewer=request.user, with_prompts=True)
    context = {"session": session, "turns": turns, "last_index": turns[-1].index if turns else -1,
               "config": policies.session_config_for(request.user, session)}
    if request.htmx:
        return render(request, "agent/partials/session_live.html", context)
    context["exemplars_withheld"] = _version_withheld(session, request.user)
    return render(request, "agent/session_detail.html", context)


def _version_withheld(session, user) -> bool:
    """Whether the session names a published set version ``user`` may not see (its set's workspace, its
    databases), or one that cannot be told: then it is not named."""
    chosen = (session.config or {}).get("exemplar_set_version") if isinstance(session.config, dict) else None
    if not isinstance(chosen, dict) or chosen.get("id") is None or chosen.get("candidate_id"):
        return False
    try:
        version_id = int(chosen["id"])
    except (TypeError, ValueError):
        return True
    return few_shot.by_id(version_id, user) is None


@require_POST
def session_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    session = policies.access_session(request.user, pk)
    policies.check_can_cancel_session(request.user, session)
    if session.is_active:
        session_services.session_cancel(session=session)
        messages.info(request, "Cancellation requested; the session stops after its current step.")
    return redirect(session)


@require_POST
def session_feedback(request: HttpRequest, pk: int) -> HttpResponse:
    """Right or wrong, with an optional corrected query (run read-only before it is kept)."""
    session = policies.access_session(request.user, pk)
    policies.check_can_give_feedback(request.user, session)
    try:
        feedback.answer_feedback_set(session=session, user=request.user, verdict=request.POST.get("verdict", ""),
                                     corrected_sql=request.POST.get("corrected_sql", ""),
                                     note=request.POST.get("note", ""))
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, message)
    else:
        messages.success(request, "Thank you: your verdict on this answer is saved.")
    return redirect(session)


def session_result_csv(request: HttpRequest, pk: int) -> HttpResponse:
    """The answer's rows as CSV: the final query run again read-only, every row up to the query row limit."""
    session = policies.access_session(request.user, pk)
    try:
        result = feedback.answer_rows(session=session)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect(session)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="session-{session.pk}-answer.csv"'
    writer = csv_writer(response)  # neutralises spreadsheet formulas in the cells
    writer.writerow(result.columns)
    writer.writerows(result.rows)
    return response


@require_POST
def session_follow_up(request: HttpRequest, pk: int) -> HttpResponse:
    """A new question continuing this session's conversation: a new session linked to it, on its database and
    strategy, whose prompt carries the earlier questions and answers."""
    parent = policies.access_session(request.user, pk)
    policies.check_can_follow_up(request.user, parent)
    try:
        session = session_services.session_create(
            database=parent.database, question=request.POST.get("question", ""), strategy=parent.strategy,
            user=request.user, follow_up_of=parent)
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, message)
        return redirect(parent)
    return redirect(session)
