"""Chat-completion client for any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

HTTP is the official ``openai`` SDK's: its httpx client (connection pool, timeouts, TLS, and the proxies of
``HTTP(S)_PROXY``/``ALL_PROXY``/``NO_PROXY`` as httpx reads them). Each request is one attempt
(``max_retries=0`` in the SDK) read through ``with_raw_response``, and the retries are this module's,
because they must know what the SDK's do not: the session's deadline (no retry starts after it, an
attempt's timeout is cut to it), the endpoint's concurrency slot (``hold``, taken per attempt and given
back while waiting), the provider-outage budget (connection refused, 429 and 5xx waited out for minutes,
not counted against ``max_retries``), and the number of attempts a turn stores. The body is decoded
leniently here: servers differ (no ``usage``, ``content: null``, a proxy's HTML page, no choices), and each
case becomes a completion or an ``LLMError``, never a crash in a typed response model.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from agent.textclean import MAX_COMPLETION_CHARS, clean_text

from .pricing import PriceTable
from .types import Completion, LLMError, Message, MessagesLike

PAPER_STOP: tuple[str, ...] = ("\nObservation", "\nThought")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_NO_KEY = "not-needed"
_RETRYABLE_STATUS = {408, 409, 425, 429}
_MAX_RETRY_AFTER_S = 60.0  # a longer Retry-After is waited in steps of this, within the outage budget

if TYPE_CHECKING:
    import openai

Hold = Callable[[], AbstractContextManager[Any]]
OutageListener = Callable[[str | None], None]


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
    max_retries: int = 3  # retries after the first attempt, for transient failures
    backoff_base_s: float = 1.0
    backoff_max_s: float = 10.0
    # A provider outage (connection refused, 429, 5xx) is retried for this long past max_retries.
    outage_budget_s: float = 300.0
    prices: PriceTable = field(default_factory=PriceTable)
    max_concurrent: int | None = None  # cap on simultaneous HTTP attempts through one client (None: no cap)

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
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "api_key"}
        return {**out, "stop": list(self.stop), "prices": self.prices.to_dict()}

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
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        # Imported here: the SDK takes seconds of CPU to import, which every process importing the agent core
        # (web server, commands) would pay without ever calling an LLM.
        import httpx
        import openai

        self.settings = settings
        self._sleep = sleep
        self._clock = clock
        self._rng = rng or random.Random()
        self._sdk: openai.OpenAI | None = None
        self._unusable: str | None = None  # a base URL the SDK refuses: every call fails with this, none waits
        try:
            # A local server usually needs no key; the SDK wants one all the same.
            self._sdk = openai.OpenAI(base_url=settings.base_url or DEFAULT_BASE_URL,
                                      api_key=settings.resolve_api_key() or _NO_KEY,
                                      timeout=settings.timeout_s, max_retries=0)
        except httpx.InvalidURL as exc:
            self._unusable = f"invalid endpoint URL {settings.base_url!r} ({exc})"
        self._slots = threading.BoundedSemaphore(settings.max_concurrent) if settings.max_concurrent else None

    def with_settings(self, **changes: Any) -> LLMClient:
        """A client for another endpoint or other defaults (e.g. a different base URL or key)."""
        return LLMClient(replace(self.settings, **changes), sleep=self._sleep, clock=self._clock, rng=self._rng)

    def close(self) -> None:
        if self._sdk is not None:
            self._sdk.close()

    def bounded(self, deadline: float | None, *, on_outage: OutageListener | None = None) -> BoundedClient:
        """This client with every call cut at ``deadline`` (a ``time.monotonic()`` value), e.g. a session's;
        ``on_outage`` hears when a call starts and stops waiting out a provider outage."""
        return BoundedClient(self, deadline, on_outage)

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
        seed: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        deadline: float | None = None,
        hold: Hold | None = None,
        on_outage: OutageListener | None = None,
    ) -> Completion:
        """One chat completion; arguments left as None take the settings' defaults.

        ``latency_ms`` covers the whole call, retries and waits included: it is what the caller waited.
        Raises ``LLMError`` when no usable completion came, with the same ``latency_ms``.
        ``deadline`` (on the client's ``clock``, ``time.monotonic()``) bounds the whole call: an attempt's
        timeout is cut to it and no retry starts after it. ``hold`` is entered around each attempt (an endpoint's concurrency slot), so
        nothing is held while the call waits to retry. ``on_outage`` is told, with the failure, when the
        call keeps waiting out a provider outage past its ordinary retries, and with None when that ends.
        """
        s = self.settings
        stop_seqs = tuple(s.stop if stop is None else stop)
        request: dict[str, Any] = {
            "model": model or s.model,
            "messages": [_message_dict(m) for m in messages],
            "temperature": s.temperature if temperature is None else temperature,
            "top_p": s.top_p if top_p is None else top_p,
            "max_tokens": s.max_tokens if max_tokens is None else max_tokens,
        }
        if stop_seqs:
            request["stop"] = list(stop_seqs)
        if seed is not None:  # only when asked for: the paper's requests carry no seed
            request["seed"] = seed
        if extra_body:
            request["extra_body"] = dict(extra_body)
        timeout = s.timeout_s if timeout_s is None else timeout_s

        started = self._clock()
        attempts = 0
        outage_since: float | None = None
        told = False
        last: _Failure | None = None
        try:
            while True:
                left = None if deadline is None else deadline - self._clock()
                if left is not None and left <= 0:
                    why = f": {last.message}" if last is not None else ""
                    raise LLMError(f"LLM call stopped at the session time limit after {attempts} attempts{why}",
                                   attempts=attempts, status_code=last.status_code if last else None,
                                   cause=last.cause if last else None,
                                   latency_ms=(self._clock() - started) * 1000)
                attempts += 1
                try:
                    with hold() if hold is not None else nullcontext():
                        body = self._attempt(request, timeout if left is None else min(timeout, left))
                    text, usage, resp_model, finish = _decode(body, request["model"])
                except _Failure as failure:
                    last = failure
                    now = self._clock()
                    outage_left = 0.0  # how much longer the outage budget lets this call wait
                    if failure.outage:
                        outage_since = now if outage_since is None else outage_since
                        outage_left = outage_since + s.outage_budget_s - now
                    ordinary = attempts <= s.max_retries
                    if not failure.retryable or (not ordinary and outage_left <= 0):
                        raise _error(failure, attempts, started, outage_since, now) from failure.cause
                    pause = self._backoff(attempts, failure.retry_after)
                    if not ordinary:  # past the endpoint's retries: waiting out an outage
                        if on_outage is not None and not told:
                            on_outage(failure.message)
                            told = True
                        pause = min(pause, outage_left)
                    if deadline is not None:
                        pause = max(0.0, min(pause, deadline - now))
                    self._sleep(pause)
                    continue
                break
        finally:
            if told and on_outage is not None:
                on_outage(None)
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
            latency_ms=(self._clock() - started) * 1000,
            model=resp_model,
            finish_reason=finish,
            attempts=attempts,
            # Without a usage field the cost is unknown (None), not zero.
            cost=s.prices.cost(resp_model, prompt_tokens, completion_tokens) if usage else None,
        )

    def _attempt(self, request: dict[str, Any], timeout: float) -> Any:
        """One HTTP request; the decoded JSON body, or a ``_Failure`` saying whether to try again."""
        import httpx
        import openai

        if self._sdk is None:
            raise _Failure(self._unusable or "no client", retryable=False)
        with self._slots if self._slots is not None else nullcontext():
            try:
                raw = self._sdk.chat.completions.with_raw_response.create(**request, timeout=timeout)
                text = raw.text
            except openai.APITimeoutError as exc:
                raise _Failure("request timed out", retryable=True, cause=exc) from exc
            except openai.APIConnectionError as exc:
                cause = exc.__cause__ or exc
                # A URL no request can go to is a configuration error, not an outage to wait out.
                usable = not isinstance(cause, httpx.UnsupportedProtocol)
                raise _Failure(f"connection error ({cause})", retryable=usable, outage=usable, cause=exc) from exc
            except openai.APIStatusError as exc:
                status = exc.status_code
                raise _Failure(f"HTTP {status}: {_short(exc.response.text)}", status_code=status, cause=exc,
                               retryable=status in _RETRYABLE_STATUS or status >= 500,
                               outage=status == 429 or status >= 500,
                               retry_after=_retry_after(exc.response.headers.get("retry-after"))) from exc
            except httpx.InvalidURL as exc:  # a URL that parses but no request can carry
                raise _Failure(f"invalid endpoint URL ({exc})", retryable=False, cause=exc) from exc
        try:
            return json.loads(text)
        except ValueError as exc:
            # A transient proxy page is the usual cause, so this is retried like a 5xx.
            raise _Failure(f"response is not JSON: {_short(text)!r}", retryable=True, cause=exc) from exc

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        s = self.settings
        if retry_after is not None:
            return min(retry_after, _MAX_RETRY_AFTER_S)
        # Exponential backoff with "equal jitter": half fixed, half random, so retries spread out.
        delay = min(s.backoff_max_s, s.backoff_base_s * (2 ** min(attempt - 1, 30)))
        return delay / 2 + self._rng.uniform(0, delay / 2)


class BoundedClient:
    """An ``LLMClient`` whose calls all end by one deadline (a session's wall-clock limit)."""

    def __init__(self, client: LLMClient, deadline: float | None, on_outage: OutageListener | None = None) -> None:
        self.client = client
        self.deadline = deadline
        self.on_outage = on_outage

    def __getattr__(self, name: str) -> Any:  # settings, close(), ... of the client
        return getattr(self.client, name)

    def complete(self, messages: MessagesLike, **kwargs: Any) -> Completion:
        return self.client.complete(messages, deadline=self.deadline, on_outage=self.on_outage, **kwargs)


class _Failure(Exception):
    """A failed attempt: ``retryable`` (transient), ``outage`` (the provider is down or overloaded)."""

    def __init__(self, message: str, *, retryable: bool, outage: bool = False, status_code: int | None = None,
                 cause: BaseException | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.outage = outage
        self.status_code = status_code
        self.cause = cause or self
        self.retry_after = retry_after


def _error(failure: _Failure, attempts: int, started: float, outage_since: float | None, now: float) -> LLMError:
    tried = f" after {attempts} attempts" if attempts > 1 else ""
    if outage_since is not None and failure.outage and attempts > 1:
        tried += f" ({now - outage_since:.0f} s of provider outage)"
    return LLMError(f"LLM call failed{tried}: {failure.message}", attempts=attempts,
                    status_code=failure.status_code, cause=failure.cause, latency_ms=(now - started) * 1000)


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
