"""Plain values passed between the LLM client and its callers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Message:
    role: str  # "system", "user" or "assistant"
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Message:
        return cls(role=str(d["role"]), content=str(d["content"]))


@dataclass(frozen=True)
class Completion:
    """One chat completion as the API reported it.

    Token counts come from the response's ``usage`` field (0 when the server
    sent none); ``cost`` is None when the model has no entry in the price table
    or the server sent no usage.
    ``attempts`` counts HTTP attempts including the successful one.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    model: str
    finish_reason: str | None
    attempts: int = 1
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LLMError(Exception):
    """The endpoint did not give a usable completion (after retries, when the cause was transient).

    ``cause`` is the last underlying exception, ``status_code`` the last HTTP
    status seen (None for connection errors, timeouts and garbage bodies).
    ``latency_ms`` is what the caller waited, every attempt and backoff included
    (None when no call was made, e.g. refused by a gate).
    """

    def __init__(self, message: str, *, attempts: int = 0, status_code: int | None = None,
                 cause: BaseException | None = None, latency_ms: float | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.latency_ms = latency_ms
        self.status_code = status_code
        self.cause = cause


MessagesLike = Sequence[Message | Mapping[str, str]]


class ChatModel(Protocol):
    """What a strategy needs from an LLM: one chat completion per call, parameters overridable per call;
    ``hold`` is entered around each HTTP attempt (a gate's concurrency slot)."""

    def complete(
        self,
        messages: MessagesLike,
        *,
        model: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        timeout_s: float | None = None,
        seed: int | None = None,
        hold: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> Completion: ...
