"""Refusal and error pages: pages of the app (navigation, the reason in words, who can grant access), and JSON
for the API, whose clients read ``detail`` whatever went wrong."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader

from agent import selectors

_API_DETAIL = {403: "You do not have permission to perform this action.", 404: "Not found.",
               500: "Server error."}


def _is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/") and not request.path_info.startswith("/api/docs/")


def _reason(exception: BaseException | None) -> str:
    """The policy's own sentence ("Labelling needs the Annotator role."), never a bare exception repr."""
    if exception is None or not exception.args:
        return ""
    text = str(exception.args[0])
    # Django's resolver passes a dict ({"path": ..., "tried": ...}) for an unmatched URL: not a reason.
    return text if isinstance(exception.args[0], str) else ""


def _page(request: HttpRequest, status: int, template: str, exception: BaseException | None) -> HttpResponse:
    reason = _reason(exception)
    if _is_api(request):
        return JsonResponse({"detail": reason or _API_DETAIL[status]}, status=status)
    user = getattr(request, "user", None)
    signed_in = bool(user is not None and user.is_authenticated)
    context = {"reason": reason, "granters": selectors.access_granters() if signed_in else []}
    return HttpResponse(loader.get_template(template).render(context, request), status=status)


def permission_denied(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    return _page(request, 403, "403.html", exception)


def page_not_found(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    return _page(request, 404, "404.html", exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """No database query and no request context here: whatever failed may be the database itself."""
    if _is_api(request):
        return JsonResponse({"detail": _API_DETAIL[500]}, status=500)
    return HttpResponse(loader.get_template("500.html").render({}), status=500)
