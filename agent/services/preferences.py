"""Per-account choices the pages remember (writes)."""

from __future__ import annotations

from agent.models import AskPreference, Database


def ask_preference_remember(*, user, database: Database, strategy: str) -> None:
    """Ask opens next time on the database and strategy this account just asked with."""
    if user is None or not user.is_authenticated:
        return
    AskPreference.objects.update_or_create(user=user, defaults={"database": database, "strategy": strategy})
