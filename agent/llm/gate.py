"""A hook around every LLM call, so the layer that owns a session can bound its spend.

The core knows nothing about users, budgets or other workers: the session layer passes a ``gate``, a
callable that gets the planned call and returns a context manager, which the client enters around each HTTP
attempt of the call (so nothing it holds is kept while the call waits to retry). The gate refuses a call by
raising ``CallRefused`` (an ``LLMError``, so every strategy already stores it as a failed turn and stops with
that message); it may also wait (a concurrency slot) before it lets the attempt go.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from .types import ChatModel, Completion, LLMError, MessagesLike


class CallRefused(LLMError):
    """The gate would not let this call go (a budget reached, no concurrency slot in time)."""


@dataclass(frozen=True)
class PlannedCall:
    """What the gate knows before a call: the messages and the ceiling on the completion's tokens."""

    messages: MessagesLike
    model: str | None
    max_tokens: int


Gate = Callable[[PlannedCall], AbstractContextManager[Any]]


class GatedChatModel:
    """A ``ChatModel`` whose calls pass through ``gate``: held around each attempt of the call (the client's
    ``hold``), so a retry passes it again and a wait between attempts holds nothing."""

    def __init__(self, inner: ChatModel, gate: Gate) -> None:
        self.inner = inner
        self.gate = gate

    def __getattr__(self, name: str) -> Any:  # settings, close(), ... of the wrapped client
        return getattr(self.inner, name)

    def complete(self, messages: MessagesLike, *, model: str | None = None, max_tokens: int | None = None,
                 stop: Sequence[str] | None = None, **kwargs: Any) -> Completion:
        ceiling = max_tokens if max_tokens is not None else \
            getattr(getattr(self.inner, "settings", None), "max_tokens", 0) or 0
        planned = PlannedCall(messages=messages, model=model, max_tokens=ceiling)
        return self.inner.complete(messages, model=model, max_tokens=max_tokens, stop=stop,
                                   hold=lambda: self.gate(planned), **kwargs)
