"""The labels' version: a token that label counts are cached under, replaced by every change of what they count.

The cached counts (the labels overview, the queue list's progress) read the labels (which exist, which are
final), the reveals, the queues (run, filters, blindness, annotators per question), which run items are
failures (``ex``: evaluation, a resumed run) and the question fields the queue filters use (a dataset's
re-import). Every service that writes one of these calls ``labels_changed`` once it has written, as do the
admin's forms: ``bulk_create``, ``bulk_update`` and queryset ``update`` send no signal, so nothing relies on
one. Notes, corrected gold queries, reservations and suggestions are not counted and replace nothing.

Deletes cascading from a run, a dataset or a question reach it through the run items' ``post_delete``
(``annotations.apps``), once per transaction; a receiver on the labels themselves would make Django load and
delete a run's 40k labels a hundred at a time instead of in one statement.

Its own module, below services and selectors, so that the runs' and the labels' services both call it.
"""

from __future__ import annotations

import uuid

from django.core.cache import cache
from django.db import transaction

LABELS_VERSION_KEY = "labels:version"
LABELS_VERSION_READ = "t2s_labels_version_read"  # set on the connection: read since this thread replaced it


def labels_version() -> str:
    """The current token (counts cached under another one are stale)."""
    setattr(transaction.get_connection(), LABELS_VERSION_READ, True)
    token = cache.get(LABELS_VERSION_KEY)
    if token is None:  # first use, or evicted: a new token, so nothing counted before is trusted
        cache.add(LABELS_VERSION_KEY, uuid.uuid4().hex, timeout=None)
        token = cache.get(LABELS_VERSION_KEY) or "uncached"
    return token


def labels_changed() -> None:
    """What the cached label counts read has just been written: replace the version, now (for this
    transaction's own next read) and again after the commit (another view that read the new version before
    the commit counted the old rows under it).

    Inside a transaction it is replaced once, plus once more after each read of it there, so a delete that
    reaches it once per run item replaces it once."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        _new_labels_version()
        return
    if not any(entry[1] is _new_labels_version for entry in connection.run_on_commit):
        transaction.on_commit(_new_labels_version)
    elif not getattr(connection, LABELS_VERSION_READ, True):
        return  # replaced earlier in this transaction and not read since
    _new_labels_version()
    setattr(connection, LABELS_VERSION_READ, False)


def _new_labels_version() -> None:
    cache.set(LABELS_VERSION_KEY, uuid.uuid4().hex, timeout=None)
