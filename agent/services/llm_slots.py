"""An endpoint's ``max_concurrency`` across every worker, session and run: a semaphore of expiring leases.

Each HTTP attempt of an LLM call holds a slot and gives it back when it ends, with or without an error (a call
waiting to retry holds none). A holder renews its lease every third of ``LLM_SLOT_LEASE_S`` while its call runs (one thread
per process renews them all), so a slot whose process died comes free at most ``LLM_SLOT_LEASE_S`` later. Where
the slots live:

- Redis, when the Celery broker is Redis: one sorted set per endpoint (member: lease token, score: expiry by
  the Redis server's clock), changed only by Lua scripts, so every worker on every machine sees one count;
- otherwise the app database (``LLMCallLease`` rows, unique per endpoint and slot number), which works with
  the embedded SQLite app database and with PostgreSQL alike.

A call that finds every slot taken waits (polling with jitter) up to ``LLM_SLOT_WAIT_S``, then is refused.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Protocol

from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent.conf import agent_settings
from agent.llm import CallRefused
from agent.models import LLMCallLease

# The slot store blinked (a broker or database restart): a call waits as for a busy slot, and a store that
# stays away past the wait raises this to the session, which treats it as transient (queued again, not failed).
STORE_ERRORS: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError, OperationalError,
                                                 InterfaceError)
# How long a store outage is waited out before the session is handed back to the queue.
STORE_OUTAGE_S = 30.0

logger = logging.getLogger(__name__)


class SlotBackend(Protocol):
    def try_acquire(self, key: str, limit: int, token: str, ttl_s: float) -> bool: ...

    def renew(self, key: str, token: str, ttl_s: float) -> bool: ...

    def release(self, key: str, token: str) -> None: ...

    def holders(self, key: str) -> int: ...


# --- Redis -------------------------------------------------------------------------------------------------

_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) + 60)
  return 1
end
return 0
"""
_RENEW = """
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 60)
return 1
"""
_COUNT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
"""


class RedisSlots:
    """Slots in Redis (the broker's server); expiry by the Redis clock, so machines' clocks need not agree."""

    prefix = "t2s:llm-slots:"

    def __init__(self, url: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url)
        self._acquire = self.client.register_script(_ACQUIRE)
        self._renew = self.client.register_script(_RENEW)
        self._count = self.client.register_script(_COUNT)

    def try_acquire(self, key: str, limit: int, token: str, ttl_s: float) -> bool:
        return bool(self._acquire(keys=[self.prefix + key], args=[limit, token, ttl_s]))

    def renew(self, key: str, token: str, ttl_s: float) -> bool:
        return bool(self._renew(keys=[self.prefix + key], args=[token, ttl_s]))

    def release(self, key: str, token: str) -> None:
        self.client.zrem(self.prefix + key, token)

    def holders(self, key: str) -> int:
        return int(self._count(keys=[self.prefix + key]))


# --- the app database ------------------------------------------------------------------------------------


class DatabaseSlots:
    """Slots as ``LLMCallLease`` rows: the unique (endpoint, slot) constraint makes a slot one holder's."""

    def try_acquire(self, key: str, limit: int, token: str, ttl_s: float) -> bool:
        now = timezone.now()
        LLMCallLease.objects.filter(endpoint=key, expires_at__lt=now).delete()  # holders that died
        taken = set(LLMCallLease.objects.filter(endpoint=key).values_list("slot", flat=True))
        for slot in range(limit):
            if slot in taken:
                continue
            try:
                with transaction.atomic():
                    LLMCallLease.objects.create(endpoint=key, slot=slot, token=token,
                                                expires_at=now + timedelta(seconds=ttl_s))
                return True
            except IntegrityError:
                continue  # another process took it between our read and our insert
        return False

    def renew(self, key: str, token: str, ttl_s: float) -> bool:
        return bool(LLMCallLease.objects.filter(endpoint=key, token=token).update(
            expires_at=timezone.now() + timedelta(seconds=ttl_s)))

    def release(self, key: str, token: str) -> None:
        LLMCallLease.objects.filter(endpoint=key, token=token).delete()

    def holders(self, key: str) -> int:
        return LLMCallLease.objects.filter(endpoint=key, expires_at__gte=timezone.now()).count()


_redis_backends: dict[str, RedisSlots] = {}
_backends_lock = threading.Lock()


def backend() -> SlotBackend:
    """Redis when the broker is Redis, else the app database."""
    url = str(getattr(settings, "CELERY_BROKER_URL", "") or "")
    if url.startswith(("redis://", "rediss://")):
        with _backends_lock:
            if url not in _redis_backends:
                _redis_backends[url] = RedisSlots(url)
            return _redis_backends[url]
    return DatabaseSlots()


class _Renewals:
    """One thread per process renews every lease this process holds, each a third of its ``ttl_s`` after the
    last renewal (not a thread and a database connection per call). A lease found gone stops being renewed; an
    error is logged and the lease renewed again at its next turn, which may come before it runs out."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._leases: dict[str, tuple[SlotBackend, str, float]] = {}  # token: (backend, key, ttl_s)
        self._due: dict[str, float] = {}  # token: when to renew it next (time.monotonic())
        self._next = float("inf")  # when the thread wakes next by itself
        self._thread: threading.Thread | None = None

    def add(self, slots: SlotBackend, key: str, token: str, ttl_s: float) -> None:
        due = time.monotonic() + ttl_s / 3
        with self._lock:
            self._leases[token] = (slots, key, ttl_s)
            self._due[token] = due
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True, name="llm-slot-renewals")
                self._thread.start()
            elif due < self._next:
                self._wake.set()

    def remove(self, token: str) -> None:
        with self._lock:
            self._leases.pop(token, None)
            self._due.pop(token, None)

    def held(self) -> int:
        with self._lock:
            return len(self._leases)

    def _run(self) -> None:
        while True:
            now = time.monotonic()
            with self._lock:
                due = [(token, self._leases[token]) for token, at in self._due.items() if at <= now]
                for token, (_, _, ttl_s) in due:
                    self._due[token] = now + ttl_s / 3
                self._next = min(self._due.values(), default=now + 60.0)
                self._wake.clear()
            for token, (slots, key, ttl_s) in due:
                self._renew(slots, key, token, ttl_s)
            if due:
                connection.close()  # the database backend's renewals: no connection left open between them
            self._wake.wait(max(0.0, self._next - time.monotonic()))

    def _renew(self, slots: SlotBackend, key: str, token: str, ttl_s: float) -> None:
        try:
            renewed = slots.renew(key, token, ttl_s)
        except Exception:  # a blip: the next renewal may succeed before the lease runs out
            logger.exception("could not renew an LLM slot lease on %s", key)
            return
        if not renewed:
            with self._lock:
                still_held = token in self._leases  # else released while we renewed
                if still_held:  # said before it is dropped: whoever sees it gone can read why
                    logger.warning("LLM slot lease on %s expired while its call ran", key)
                self._leases.pop(token, None)
                self._due.pop(token, None)

    def _after_fork(self) -> None:
        # A forked child holds none of its parent's calls, and the parent's lock may have been taken mid-way.
        self.__init__()  # type: ignore[misc]


_renewals = _Renewals()
os.register_at_fork(after_in_child=_renewals._after_fork)


@contextmanager
def slot(key: str, limit: int, *, slots: SlotBackend | None = None, ttl_s: float | None = None,
         wait_s: float | None = None) -> Iterator[str]:
    """Hold one of ``limit`` slots of ``key`` for the duration of the block; yields the lease token."""
    slots = slots or backend()
    ttl_s = float(ttl_s if ttl_s is not None else agent_settings.LLM_SLOT_LEASE_S)
    wait_s = float(wait_s if wait_s is not None else agent_settings.LLM_SLOT_WAIT_S)
    limit = max(1, int(limit))
    token = uuid.uuid4().hex
    deadline = time.monotonic() + wait_s
    delay = 0.02
    outage_since: float | None = None
    while True:
        try:
            if slots.try_acquire(key, limit, token, ttl_s):
                break
            outage_since = None
        except STORE_ERRORS:
            now = time.monotonic()
            outage_since = outage_since or now
            if now - outage_since > min(STORE_OUTAGE_S, wait_s):
                raise
            logger.warning("LLM slot store for %s unreachable; waiting for it", key)
        if time.monotonic() > deadline:
            raise CallRefused(f"Endpoint {key}: all {limit} concurrent calls (its max_concurrency) stayed busy "
                              f"for {wait_s:.0f} s.")
        time.sleep(delay * (0.5 + random.random()))  # jitter, so waiters do not poll in step
        delay = min(delay * 1.5, 0.5)
    _renewals.add(slots, key, token, ttl_s)
    try:
        yield token
    finally:
        _renewals.remove(token)
        try:
            slots.release(key, token)
        except STORE_ERRORS:  # the lease runs out by itself within ttl_s; the call's result must not be lost
            logger.warning("could not release an LLM slot lease on %s; it expires in %.0f s", key, ttl_s)
