"""DRF permission classes: thin adapters over ``agent.policies`` / ``annotations.policies``.

(A module of its own: DRF imports it from settings, before any view.)"""

from __future__ import annotations

from rest_framework import permissions
from rest_framework.request import Request

from agent import policies


class PolicyPermission(permissions.BasePermission):
    """Reads need a role that may read; each write action asks the policy named in the view's ``write_policies``
    (an action without one is refused). The rules themselves live in the policy modules, shared with the pages."""

    def has_permission(self, request: Request, view) -> bool:
        if not policies.can_view(request.user):
            return False
        if request.method in permissions.SAFE_METHODS:
            return True
        rule = getattr(view, "write_policies", {}).get(getattr(view, "action", None))
        return bool(rule and rule(request.user))
