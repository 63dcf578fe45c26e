from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agent import services
from agent.models import Database
from agent.sql import SQLError
from agent.tools import TOOL_NAMES, IndexMissing


def _call_from_form(tool: str, data) -> tuple[list, dict]:
    if tool == "SearchColumn":
        phrases = [p.strip() for p in data.get("phrases", "").splitlines() if p.strip()]
        return [phrases if len(phrases) != 1 else phrases[0]], {}
    if tool == "SearchValue":
        kwargs = {k: data[k].strip() for k in ("table", "column") if data.get(k, "").strip()}
        return [data.get("value", "")], kwargs
    if tool == "FindShortestPath":
        return [], {"start": data.get("start", "").strip(), "end": data.get("end", "").strip()}
    return [data.get("sql", "")], {}


def action_text(tool: str, args: list, kwargs: dict) -> str:
    """The call as the agent would write it, e.g. ``SearchValue("France", table="Customer")``."""
    parts = [json.dumps(a, ensure_ascii=False) for a in args]
    parts += [f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in kwargs.items()]
    return f"{tool}({', '.join(parts)})"


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
        args, kwargs = _call_from_form(tool, request.POST)
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
