"""Where few-shot exemplars come from, without the agent app knowing who keeps them.

A session takes its exemplars as plain data (``agent.strategies.FewShot``),
resolved by whoever creates it. The app that stores exemplar sets registers a
``FewShotSource`` when Django starts (``annotations``' ``AppConfig.ready``);
the Ask form, the API and the ``ask`` command list and resolve through it.
With no source registered there is nothing to choose and sessions are
zero-shot.
"""

from __future__ import annotations

from typing import Protocol

from agent.strategies import FewShot


class FewShotSource(Protocol):
    def choices(self, user, database=None) -> list[tuple[int, str]]:
        """(id, label) of every version ``user`` may pick (every database it draws on granted), in display order;
        for ``database``, only those usable on it."""
        ...

    def by_id(self, pk: int, user) -> FewShot | None:
        """The version with this id if ``user`` may see it (None otherwise, exactly as for a missing one)."""
        ...

    def by_name(self, spec: str, user=None) -> FewShot | None:
        """``SET`` (newest version) or ``SET:N`` / ``SET:vN``, as the command line takes it; among the versions
        ``user`` may see when one is given (a command run on someone's behalf), else among all."""
        ...

    def default_for(self, database, *, use_evidence: bool = True) -> FewShot | None:
        """The exemplars a session on ``database`` gets when none are chosen (the paper's set that fits)."""
        ...

    def source_visible(self, source, user) -> bool:
        """Whether ``user`` sees every database the exemplars came from, by the source a session's snapshot names
        (``FewShot.source``); False when it cannot be told (no such source, or it is gone)."""
        ...


_source: FewShotSource | None = None


def register_source(source: FewShotSource | None) -> None:
    global _source
    _source = source


def choices(user, database=None) -> list[tuple[int, str]]:
    return _source.choices(user, database) if _source is not None else []


def by_id(pk: int, user) -> FewShot | None:
    return _source.by_id(pk, user) if _source is not None else None


def by_name(spec: str, user=None) -> FewShot | None:
    return _source.by_name(spec, user) if _source is not None else None


def default_for(database, *, use_evidence: bool = True) -> FewShot | None:
    return _source.default_for(database, use_evidence=use_evidence) if _source is not None else None


def source_visible(source, user) -> bool:
    """See ``FewShotSource.source_visible``; with no source registered nothing can be told: False."""
    return _source.source_visible(source, user) if _source is not None else False
