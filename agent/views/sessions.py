from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agent import policies, selectors
from agent.forms import STRATEGY_LABELS, AskForm, SessionFilterForm, strategy_choices
from agent.services import preferences
from agent.services import sessions as session_services
from agent.strategies import STRATEGIES


def ask(request: HttpRequest) -> HttpResponse:
    start = selectors.ask_initial(user=request.user, requested=request.GET.get("database", ""))
    initial = {"database": start["database"]}
    if start["strategy"] in STRATEGIES:
        initial["strategy"] = start["strategy"]
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
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            preferences.ask_preference_remember(user=request.user, database=form.cleaned_data["database"],
                                                strategy=form.cleaned_data["strategy"])
            return redirect(session)
    recent = selectors.session_list(viewer=request.user, user=request.user)[:8]
    strategies = [(name, STRATEGY_LABELS.get(name, name), getattr(cls, "substitutions", ""))
                  for name, cls in STRATEGIES.items()]
    return render(request, "agent/ask.html", {"form": form, "endpoint": endpoint, "recent": recent,
                                              "strategies": strategies, "start": start,
                                              "strategy_labels": dict(strategy_choices())})


def session_list(request: HttpRequest) -> HttpResponse:
    filters = SessionFilterForm(request.GET or None, user=request.user)
    criteria = filters.cleaned_data if filters.is_valid() else {}
    qs = selectors.session_list(viewer=request.user, **{k: v for k, v in criteria.items() if v})
    page = Paginator(qs, 30).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "agent/session_list.html", {"filters": filters, "page": page, "query": query.urlencode()})


def session_detail(request: HttpRequest, pk: int) -> HttpResponse:
    session = policies.access_session(request.user, pk)
    context = {"session": session, "turns": selectors.session_turns(session=session, with_prompts=True)}
    if request.htmx:
        return render(request, "agent/partials/session_live.html", context)
    return render(request, "agent/session_detail.html", context)


@require_POST
def session_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    session = policies.access_session(request.user, pk)
    policies.check_can_cancel_session(request.user, session)
    if session.is_active:
        session_services.session_cancel(session=session)
        messages.info(request, "Cancellation requested; the session stops after its current step.")
    return redirect(session)
