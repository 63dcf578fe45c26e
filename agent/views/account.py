from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agent.roles import ROLES
from agent.services import budgets


def account(request: HttpRequest) -> HttpResponse:
    """The signed-in account: its roles and its daily LLM budget, today's use and what is left."""
    status = budgets.budget_status(request.user)
    roles = [g.name for g in request.user.groups.filter(name__in=ROLES).order_by("name")]
    return render(request, "agent/account.html", {"status": status, "roles": roles, "section": "account"})
