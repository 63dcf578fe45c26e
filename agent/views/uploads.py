"""Uploads through the browser: a SQLite database file, and the progress page of an import running on a worker."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from agent import policies
from agent.conf import agent_settings
from agent.forms import DatabaseUploadForm, add_service_errors
from agent.services import uploads
from agent.sql.base import human_bytes

# Multipart overhead beyond the file itself (form fields, boundaries).
REQUEST_SLACK = 1024 * 1024


def request_too_large(request: HttpRequest, limit: int, what: str) -> str | None:
    """Refuse from the Content-Length alone, before Django reads (and spools) the body."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    return uploads.too_large(length - REQUEST_SLACK, limit, what) if length > limit + REQUEST_SLACK else None


def database_upload(request: HttpRequest) -> HttpResponse:
    policies.check_can_register_database(request.user)
    limit = agent_settings.UPLOAD_MAX_DATABASE_BYTES
    refusal = request_too_large(request, limit, "file") if request.method == "POST" else None
    form = DatabaseUploadForm(None if refusal else request.POST or None, None if refusal else request.FILES or None)
    if not refusal and request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            database = uploads.database_upload(
                chunks=upload.chunks(), size=upload.size, filename=upload.name, name=form.cleaned_data["name"],
                description=form.cleaned_data["description"], user=request.user)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"Uploaded {database.name}; its schema and tool indexes are being built.")
            return redirect(database)
    return render(request, "agent/database_upload.html", {"form": form, "refusal": refusal,
                                                         "limit": human_bytes(limit)},
                  status=413 if refusal else 200)


def import_job(request: HttpRequest, pk: int) -> HttpResponse:
    """An import's progress; htmx polls the partial until it ends."""
    job = policies.access_import_job(request.user, pk)
    template = "agent/partials/import_job.html" if request.htmx else "agent/import_job.html"
    return render(request, template, {"job": job})
