from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agent import policies, selectors
from agent.forms import AuditFilterForm

PAGE_SIZE = 50


def audit_list(request: HttpRequest) -> HttpResponse:
    """The audit log for Data admins: who changed databases, endpoints, access, budgets and roles, who ran what."""
    policies.check_can_view_audit(request.user)
    filters = AuditFilterForm(request.GET or None)
    page = Paginator(selectors.audit_list(**filters.criteria()), PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "agent/audit_list.html", {"filters": filters, "page": page, "query": query.urlencode(),
                                                     "section": "audit"})
