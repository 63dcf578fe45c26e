"""Writes and enqueues live in services, and work is queued only once the transaction commits."""

from __future__ import annotations

import pytest
from celery import current_app
from django.core.exceptions import ValidationError
from django.urls import reverse

from agent import services
from agent.models import Database

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    """Messages the refresh task would have sent to the broker."""
    calls = []
    task = current_app.tasks["agent.tasks.refresh_database"]
    monkeypatch.setattr(task, "apply_async", lambda args=(), kwargs=None, **options: calls.append((args, kwargs or {})))
    return calls


def test_the_refresh_button_marks_pending_and_queues_after_commit(staff_client, demo_database, sent,
                                                                 django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = staff_client.post(reverse("database_refresh", args=["chinook"]))
    assert response.status_code == 302
    assert Database.objects.get(pk=demo_database.pk).status == Database.Status.PENDING
    assert sent == [] and len(callbacks) == 1  # nothing sent inside the request's transaction
    callbacks[0]()
    assert sent == [((demo_database.pk,), {})]


def test_a_saved_registration_is_refreshed_only_when_its_source_changed(demo_database, sent,
                                                                         django_capture_on_commit_callbacks):
    demo_database.description = "the demo"
    with django_capture_on_commit_callbacks(execute=True):
        services.database_save(database=demo_database, changed=["description"])
    assert sent == [] and Database.objects.get(pk=demo_database.pk).status == Database.Status.READY
    demo_database.column_backend = "bm25"
    with django_capture_on_commit_callbacks(execute=True):
        services.database_save(database=demo_database, changed=["column_backend"])
    assert sent == [((demo_database.pk,), {"force": True})]
    assert Database.objects.get(pk=demo_database.pk).status == Database.Status.PENDING


def test_a_registration_saved_with_a_bad_location_is_refused(demo_database, sent):
    demo_database.location = "/nowhere/at/all.sqlite"
    with pytest.raises(ValidationError, match="cannot be registered"):  # one message for every refused path
        services.database_save(database=demo_database, changed=["location"])
    assert sent == []
