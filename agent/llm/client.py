"""Chat-completion client for any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

Plain HTTP (``transport``: the standard library's ``http.client`` over kept-alive connections) and our
own decoding, not the OpenAI SDK: servers differ in what they send (a missing ``usage``, ``content:
null``, a proxy's HTML error page, a body without choices), the raw completion is what a turn stores,
and each of those cases must become an ``LLMError`` or a lenient reading, never a crash in a typed
response model. Retries are ours, so every attempt is counted, backoff and timeouts are per endpoint, a
session's deadline cuts a call in flight, and a failed call reports how long it really took (all
attempts and backoff).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from agent.textclean import MAX_COMPLETION_CHARS, clean_text

from .pricing import PriceTable
from .transport import TransportError, open_transport
from .types import Completion, LLMError, Message, MessagesLike

PAPER_STOP: tuple[str, ...] = ("\nObservation", "\nThought")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEEPALIVE_CONNECTIONS = 256  # idle connections kept per client (one client per endpoint in a worker)
_NO_KEY = "not-needed"
_RETRYABLE_STATUS = {408, 409, 425, 429}


@dataclass(frozen=True)
class LLMSettings:
    """One endpoint and its defaults; sampling defaults are the paper's (Table 12)."""

    base_url: str | None = None  # None: OpenAI's API (DEFAULT_BASE_URL)
    api_key: str | None = field(default=None, repr=False)  # never in to_dict() or repr
    api_key_env: str | None = None  # name of an environment variable holding the key, read when the client starts
    model: str = "gpt-4o-2024-05-13"
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 512
    stop: tuple[str, ...] = PAPER_STOP
    timeout_s: float = 60.0
    max_retries: int = 3  # retries after the first attempt, for transient failures only
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    prices: PriceTable = field(default_factory=PriceTable)
    max_concurrent: int | None = None  # cap on simultaneous HTTP calls through one client (None: no cap)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
        """``OPENAI_BASE_URL`` and ``OPENAI_MODEL`` from the environment; the key stays in ``OPENAI_API_KEY``.

        The key is referenced by variable name, so these settings can be stored
        or logged without it. Keyword overrides win.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {"base_url": env.get("OPENAI_BASE_URL") or None, "api_key_env": "OPENAI_API_KEY"}
        if env.get("OPENAI_MODEL"):
            values["model"] = env["OPENAI_MODEL"]
        values.update(overrides)
        return cls(**values)

    def resolve_api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        if self.api_key:
            return self.api_key
        env = os.environ if environ is None else environ
        return (env.get(self.api_key_env) or None) if self.api_key_env else None

    def to_dict(self) -> dict[str, Any]:
        """A snapshot without the API key (``api_key_env`` names where it comes from)."""
        return {
            "base_url": self.base_url, "api_key_env": self.api_key_env, "model": self.model,
            "temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
            "stop": list(self.stop), "timeout_s": self.timeout_s, "max_retries": self.max_retries,
            "backoff_base_s": self.backoff_base_s, "backoff_max_s": self.backoff_max_s,
            "prices": self.prices.to_dict(), "max_concurrent": self.max_concurrent,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LLMSettings:
        known = {f.name for f in fields(cls)} - {"api_key"}
        values = {k: v for k, v in d.items() if k in known}
        if "stop" in values:
            values["stop"] = tuple(values["stop"])
        if "prices" in values:
            values["prices"] = PriceTable.from_dict(values["prices"] or {})
        return cls(**values)


class LLMClient:
    """Thread-safe: one instance can serve many sessions at once."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        self._rng = rng or random.Random()
        # A local server usually needs no key; some clients' conventions expect a bearer all the same.
        headers = {"Authorization": f"Bearer {settings.resolve_api_key() or _NO_KEY}"}
        self._url = (settings.base_url or DEFAULT_BASE_URL).rstrip("/") + "/chat/completions"
        # A connection per call in flight, kept open between calls. httpx's default pool kept 20: with 64
        # sessions at once, 44 connections were closed and opened again at every round (a TCP handshake, and
        # on HTTPS a TLS one, of a few ms of CPU each), and a burst of new connections can overflow a
        # server's accept queue (a dropped SYN is retried after 1 s).
        self._http = open_transport(self._url, headers, max_connections=settings.max_concurrent,
                                    max_idle=settings.max_concurrent or KEEPALIVE_CONNECTIONS)
        self._slots = threading.BoundedSemaphore(settings.max_concurrent) if settings.max_concurrent else None

    def with_settings(self, **changes: Any) -> LLMClient:
        """A client for another endpoint or other defaults (e.g. a different base URL or key)."""
        return LLMClient(replace(self.settings, **changes), sleep=self._sleep, rng=self._rng)

    def close(self) -> None:
        self._http.close()

    def bounded(self, deadline: float | None) -> BoundedClient:
        """This client with every call cut at ``deadline`` (a ``time.monotonic()`` value), e.g. a session's."""
        return BoundedClient(self, deadline)

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        extra_body: Mapping[str, Any] | None = None,
        deadline: float | None = None,
    ) -> Completion:
        """One chat completion; arguments left as None take the settings' defaults.

        ``latency_ms`` covers the whole call, retries and backoff included: it is
        what the caller waited. Raises ``LLMError`` when no usable completion came,
        with the same ``latency_ms``. ``deadline`` (``time.monotonic()``) bounds the
        whole call: an attempt's timeout is cut to it and no retry starts after it.
        """
        s = self.settings
        stop_seqs = tuple(s.stop if stop is None else stop)
        params: dict[str, Any] = {
            "model": model or s.model,
            "messages": [_message_dict(m) for m in messages],
            "temperature": s.temperature if temperature is None else temperature,
            "top_p": s.top_p if top_p is None else top_p,
            "max_tokens": s.max_tokens if max_tokens is None else max_tokens,
        }
        if stop_seqs:
            params["stop"] = list(stop_seqs)
        if extra_body:
            params.update(dict(extra_body))
        timeout = s.timeout_s if timeout_s is None else timeout_s

        started = time.monotonic()
        attempts = 0
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise LLMError(f"LLM call stopped at the session time limit after {attempts} attempts",
                               attempts=attempts, latency_ms=(time.monotonic() - started) * 1000)
            attempts += 1
            try:
                body = self._post(params, timeout if left is None else min(timeout, left))
                text, usage, resp_model, finish = _decode(body, params["model"])
            except _Failure as failure:
                if not failure.retryable or attempts > s.max_retries:
                    tried = f" after {attempts} attempts" if attempts > 1 else ""
                    raise LLMError(f"LLM call failed{tried}: {failure.message}", attempts=attempts,
                                   status_code=failure.status_code, cause=failure.cause,
                                   latency_ms=(time.monotonic() - started) * 1000) from failure.cause
                pause = self._backoff(attempts, failure.retry_after)
                if deadline is not None:
                    pause = max(0.0, min(pause, deadline - time.monotonic()))
                self._sleep(pause)
                continue
            # Some servers ignore ``stop``; cut here too so a hallucinated Observation never survives.
            text = cut_at_stop(text, stop_seqs)
            # A reply is outside text: NUL and lone surrogates replaced, and at most MAX_COMPLETION_CHARS kept
            # (what the parser reads, what the next prompt repeats and what a turn stores).
            text = clean_text(text, limit=MAX_COMPLETION_CHARS)
            prompt_tokens, completion_tokens = usage or (0, 0)
            return Completion(
                text=text,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_ms=(time.monotonic() - started) * 1000,
                model=resp_model,
                finish_reason=finish,
                attempts=attempts,
                # Without a usage field the cost is unknown (None), not zero.
                cost=s.prices.cost(resp_model, prompt_tokens, completion_tokens) if usage else None,
            )

    def _post(self, params: dict[str, Any], timeout: float) -> Any:
        if self._slots is None:
            return self._post_once(params, timeout)
        with self._slots:  # held for one HTTP attempt only, never during backoff
            return self._post_once(params, timeout)

    def _post_once(self, params: dict[str, Any], timeout: float) -> Any:
        # As httpx encoded ``json=``: compact, UTF-8, and NaN refused (a ValueError, not a request).
        body = json.dumps(params, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        try:
            reply = self._http.post_json(body, timeout)
        except TransportError as exc:
            cause = exc.__cause__ or exc
            if exc.timed_out:
                raise _Failure("request timed out", retryable=True, cause=cause) from cause
            raise _Failure(f"connection error ({exc})", retryable=True, cause=cause) from cause
        text = reply.text
        status = reply.status
        if status >= 400:
            retryable = status in _RETRYABLE_STATUS or status >= 500
            raise _Failure(f"HTTP {status}: {_short(text)}", retryable=retryable, status_code=status,
                           retry_after=_retry_after(reply.retry_after))
        # Redirects are not followed: a 3xx body is read like any other and is rarely a completion.
        try:
            return json.loads(text)
        except ValueError as exc:
            # A transient proxy page is the usual cause, so this is retried like a 5xx.
            raise _Failure(f"response is not JSON: {_short(text)!r}", retryable=True, cause=exc) from exc

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        s = self.settings
        if retry_after is not None:
            return min(retry_after, s.backoff_max_s)
        # Exponential backoff with "equal jitter": half fixed, half random, so retries spread out.
        delay = min(s.backoff_max_s, s.backoff_base_s * (2 ** (attempt - 1)))
        return delay / 2 + self._rng.uniform(0, delay / 2)


class BoundedClient:
    """An ``LLMClient`` whose calls all end by one deadline (a session's wall-clock limit)."""

    def __init__(self, client: LLMClient, deadline: float | None) -> None:
        self.client = client
        self.deadline = deadline

    def __getattr__(self, name: str) -> Any:  # settings, close(), ... of the client
        return getattr(self.client, name)

    def complete(self, messages: MessagesLike, **kwargs: Any) -> Completion:
        return self.client.complete(messages, deadline=self.deadline, **kwargs)


class _Failure(Exception):
    def __init__(self, message: str, *, retryable: bool, status_code: int | None = None,
                 cause: BaseException | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status_code = status_code
        self.cause = cause or self
        self.retry_after = retry_after


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the earliest stop sequence, as a server honouring ``stop`` would return it."""
    cut = len(text)
    for seq in stop:
        if seq:
            pos = text.find(seq)
            if pos != -1:
                cut = min(cut, pos)
    return text[:cut]


def _decode(body: Any, requested_model: str) -> tuple[str, tuple[int, int] | None, str, str | None]:
    if not isinstance(body, dict):
        raise _Failure(f"response is not a JSON object: {_short(json.dumps(body))!r}", retryable=True)
    if "error" in body and not body.get("choices"):
        raise _Failure(f"endpoint returned an error: {_short(json.dumps(body['error']))}", retryable=True)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _Failure("response has no choices", retryable=True)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _Failure("response choice has no message", retryable=True)
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise _Failure("response message content is not text", retryable=True)
    raw_usage = body.get("usage")
    usage = ((_int(raw_usage.get("prompt_tokens")), _int(raw_usage.get("completion_tokens")))
             if isinstance(raw_usage, dict) else None)
    model = body.get("model") if isinstance(body.get("model"), str) and body.get("model") else requested_model
    finish = choice.get("finish_reason")
    return content or "", usage, model, finish if isinstance(finish, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _message_dict(m: Message | Mapping[str, str]) -> dict[str, str]:
    if isinstance(m, Message):
        return m.to_dict()
    return {"role": str(m["role"]), "content": str(m["content"])}


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: the exponential backoff applies
        return None


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
