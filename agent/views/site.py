from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.views.decorators.http import require_GET


@require_GET
@login_not_required
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on every page: send them to the icon in static/ (served by WhiteNoise)."""
    return redirect(static("favicon.ico"), permanent=True)
