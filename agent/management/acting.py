"""Management commands are trusted operator tools, except when they act on behalf of a named account (``--user``):
then the account's rules apply exactly as on the pages and the API (the policy modules), its budget counts what
it spends, and the audit log names it. Either way the audit log records the command as the door."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError
from django.http import Http404

from agent.services import audit


@contextmanager
def on_behalf_of(username: str | None) -> Iterator:
    """The named active account (or None without a name), with policy refusals turned into command errors:
    something the account may not see reads "not found", exactly as on the pages."""
    user = None
    if username:
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user {username!r}.")
    try:
        with audit.acting_as(user, via="command"):
            yield user
    except Http404 as exc:
        raise CommandError(str(exc) or "Not found.") from None
    except PermissionDenied as exc:
        raise CommandError(f"{username} may not do this: {exc}") from None
