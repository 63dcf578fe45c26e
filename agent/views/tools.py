from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agent import policies, services
from agent.sql import SQLError
from agent.tools import IndexMissing, registry, render_call, tool_names

DEFAULT_TOOL = "SearchValue"


def tool_console(request: HttpRequest) -> HttpResponse:
    policies.check_can_use_tools(request.user)
    databases = policies.visible_databases(request.user).ready()
    name = request.POST.get("database") or request.GET.get("database")
    database = databases.filter(name=name).first() if name else databases.first()
    spec = registry.find(request.POST.get("tool") or request.GET.get("tool")) or registry.get(DEFAULT_TOOL)
    context = {"databases": databases, "database": database, "tool": spec.name, "tool_names": tool_names(),
               "form": request.POST, "schema": database.schema_info() if database else None}
    if request.method == "POST" and database is not None:
        args, kwargs = spec.call_from_fields(request.POST)
        context["action"] = render_call(spec.name, args, kwargs)
        try:
            toolbox = services.toolbox_for(database)
        except (IndexMissing, SQLError) as exc:
            context["error"] = f"The tools are not ready on {database.name}: {exc}"
        else:
            with toolbox:
                context["outcome"] = toolbox.run(spec.name, args, kwargs)
        if request.htmx:
            return render(request, "agent/partials/tool_observation.html", context)
    return render(request, "agent/tool_console.html", context)
