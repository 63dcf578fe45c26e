"""An account with no role sees no page: one check for every URL, from ``agent.policies``."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from agent import policies


class AuditContextMiddleware:
    """Everything a request changes is recorded as done by its user (``agent/services/audit.py``); the request
    itself is kept, so an API request authenticated by token is named once the API has authenticated it."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        from agent.services import audit

        path = request.path_info
        via = "admin" if path.startswith("/admin/") else "api" if path.startswith("/api/") else "web"
        with audit.acting_as(request, via=via):
            return self.get_response(request)


class RoleRequiredMiddleware:
    """Signed-in accounts without a role get 403 everywhere but login, logout, the token endpoint and the admin.

    (Anonymous requests are left to ``LoginRequiredMiddleware``; API requests authenticated by token are checked
    by the API's own permission classes, which call the same policy.)
    """

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs):
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated or policies.can_view(user):
            return None
        match = request.resolver_match
        if match is not None and policies.url_needs_role(match.url_name, match.namespaces):
            raise PermissionDenied("Your account has no role yet: ask a Data admin to give you one.")
        return None
