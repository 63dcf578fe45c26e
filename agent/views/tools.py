from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agent import services
from agent.models import Database
from agent.sql import SQLError
from agent.tool_calls import action_text, call_from_fields
from agent.tools import TOOL_NAMES, IndexMissing


def tool_console(request: HttpRequest) -> HttpResponse:
    databases = Database.objects.ready()
    name = request.POST.get("database") or request.GET.get("database")
    database = databases.filter(name=name).first() if name else databases.first()
    tool = request.POST.get("tool") or request.GET.get("tool") or "SearchValue"
    if tool not in TOOL_NAMES:
        tool = "SearchValue"
    context = {"databases": databases, "database": database, "tool": tool, "tool_names": TOOL_NAMES,
               "form": request.POST, "schema": database.schema_info() if database else None}
    if request.method == "POST" and database is not None:
        args, kwargs = call_from_fields(tool, request.POST)
        context["action"] = action_text(tool, args, kwargs)
        try:
            toolbox = services.toolbox_for(database)
        except (IndexMissing, SQLError) as exc:
            context["error"] = f"The tools are not ready on {database.name}: {exc}"
        else:
            try:
                context["outcome"] = toolbox.run(tool, args, kwargs)
            finally:
                toolbox.connector.close()
        if request.htmx:
            return render(request, "agent/partials/tool_observation.html", context)
    return render(request, "agent/tool_console.html", context)
