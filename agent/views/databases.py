from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agent import policies, selectors, services
from agent.forms import DatabaseRegisterForm, add_service_errors
from agent.sql import SQLError


def home(request: HttpRequest) -> HttpResponse:
    return redirect("ask")


def database_list(request: HttpRequest) -> HttpResponse:
    return render(request, "agent/database_list.html", {"databases": selectors.database_list(user=request.user)})


def database_register(request: HttpRequest) -> HttpResponse:
    policies.check_can_register_database(request.user)
    form = DatabaseRegisterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            database = services.database_register(**form.cleaned_data, must_be_new=True, user=request.user)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"Registered {database.name}; introspection is queued.")
            return redirect(database)
    return render(request, "agent/database_register.html", {"form": form})


def database_detail(request: HttpRequest, name: str) -> HttpResponse:
    database = policies.access_database(request.user, name)
    schema = database.schema_info()
    template = "agent/partials/database_status.html" if request.htmx else "agent/database_detail.html"
    return render(request, template, {"database": database, "schema": schema,
                                      "index_rows": selectors.index_rows(database=database)})


@require_POST
def database_refresh(request: HttpRequest, name: str) -> HttpResponse:
    database = policies.access_database(request.user, name)
    policies.check_can_change_database(request.user, database)
    services.database_refresh_queue(database=database)
    messages.info(request, f"Refresh of {database.name} queued.")
    return redirect(database)


def table_rows(request: HttpRequest, name: str, table: str) -> HttpResponse:
    database = policies.access_database(request.user, name)
    info = selectors.database_table(database=database, table=table)
    if info is None:
        raise Http404("No such table")
    try:
        result, error = selectors.table_preview(database=database, table=info), None
    except SQLError as exc:
        result, error = None, str(exc)
    caption = f"First rows of {info.name} ({info.row_count} in all)" if info.row_count is not None else ""
    return render(request, "partials/result_table.html", {"result": result, "error": error, "caption": caption})
