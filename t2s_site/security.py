"""Response headers that hold on every page: the Content-Security-Policy.

Scripts come only from our own origin (``static/js``, ``static/vendor``): no inline ``<script>``, no ``on*=``
attributes, no ``eval``. So text a model or a database put on a page can never run as script, even if an
escaping mistake let markup through.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse


def csp_header_value(directives: dict[str, list[str]]) -> str:
    return "; ".join(" ".join([name, *values]) for name, values in directives.items())


class ContentSecurityPolicyMiddleware:
    """Adds ``settings.CONTENT_SECURITY_POLICY`` to every response that does not set its own."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.value = csp_header_value(settings.CONTENT_SECURITY_POLICY)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.value and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.value
        return response
