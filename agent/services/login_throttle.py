"""Throttled sign-in: too many wrong passwords lock the account, or the address they come from, for a while.

Every way in that checks a password (the login page, the admin's login, ``POST /api/token/``) goes through
``django.contrib.auth.authenticate``: failures are counted from its ``user_login_failed`` signal, and the
authentication backend (``agent.auth``) refuses a locked account or address even with the right password.
Counters live in Django's cache (shared by every web process: a file cache under ``var/`` by default, Redis with
``CACHE_URL``). A lock ends by itself after ``LOGIN_LOCKOUT_S``; nothing needs an admin to unlock.
"""

from __future__ import annotations

import hashlib
import math
import time

from django.core.cache import cache

from agent.conf import agent_settings

# Tests move this clock forward to see a lockout end; the cache's own expiry only cleans up.
clock = time.time

_PREFIX = "t2s:login"


def client_address(request) -> str:
    """The client's address: REMOTE_ADDR, or the one header a trusted proxy sets (``CLIENT_ADDRESS_HEADER``)."""
    if request is None:
        return ""
    meta = request.META
    header = agent_settings.CLIENT_ADDRESS_HEADER
    if header and meta.get(header):
        # A proxy appends the address it saw last: the rightmost entry is the one it vouches for.
        return meta[header].split(",")[-1].strip()
    return meta.get("REMOTE_ADDR", "") or ""


def _keys(username: str | None, address: str) -> list[tuple[str, str, int]]:
    """(kind, cache key, failures allowed) for the account and the address that apply."""
    keys = []
    if username:
        digest = hashlib.sha256(username.strip().lower().encode("utf-8")).hexdigest()[:32]
        keys.append(("account", f"{_PREFIX}:account:{digest}", agent_settings.LOGIN_FAILURES_PER_ACCOUNT))
    if address:
        digest = hashlib.sha256(address.encode("utf-8")).hexdigest()[:32]
        keys.append(("address", f"{_PREFIX}:address:{digest}", agent_settings.LOGIN_FAILURES_PER_ADDRESS))
    return keys


def locked_for(*, username: str | None, address: str) -> float:
    """Seconds until this account and this address may try again (0: not locked)."""
    now = clock()
    waits = [cache.get(f"{key}:lock", 0) - now for _kind, key, _limit in _keys(username, address)]
    return max([0.0, *waits])


def record_failure(*, username: str | None, address: str) -> None:
    """Count a wrong password; the failure that reaches the limit locks the account or address."""
    if locked_for(username=username, address=address):
        return  # refused while locked: the lock ends when it said it would, not later
    now = clock()
    window = agent_settings.LOGIN_FAILURE_WINDOW_S
    lockout = agent_settings.LOGIN_LOCKOUT_S
    for _kind, key, limit in _keys(username, address):
        count, since = cache.get(f"{key}:failures", (0, now))
        if now - since > window:
            count, since = 0, now
        count += 1
        if limit and count >= limit:
            cache.set(f"{key}:lock", now + lockout, timeout=math.ceil(lockout) + 60)
            cache.delete(f"{key}:failures")
        else:
            cache.set(f"{key}:failures", (count, since), timeout=math.ceil(window) + 60)


def record_success(*, username: str | None) -> None:
    """A right password clears the account's failures (not the address's: one good account must not reset them)."""
    for kind, key, _limit in _keys(username, ""):
        if kind == "account":
            cache.delete(f"{key}:failures")


def lockout_message(seconds: float) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return (f"Too many failed sign-ins for this account or from this address: sign-in is locked for "
            f"{minutes} more minute{'s' if minutes != 1 else ''}. Try again later.")


def on_login_failed(sender, credentials: dict, request=None, **kwargs) -> None:
    """``user_login_failed`` receiver."""
    record_failure(username=credentials.get("username"), address=client_address(request))


def on_logged_in(sender, request, user, **kwargs) -> None:
    """``user_logged_in`` receiver."""
    record_success(username=user.get_username())
