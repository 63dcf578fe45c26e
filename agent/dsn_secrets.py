"""PostgreSQL DSN passwords, encrypted at rest.

A registered DSN is stored with its password (the userinfo's, or a ``password=`` / ``sslpassword=`` query
parameter) replaced by ``t2senc1.<Fernet token>``; everything else (user, host, database, options) stays readable.
``reveal_dsn`` puts the password back, and only the code that connects calls it (``open_connector`` and the
registration's role check). Masking (``mask_dsn``) hides the sealed value like any password.

The key: ``T2S_DSN_KEY`` (one Fernet key, or several separated by commas: the first encrypts, all decrypt, for
rotation), else a key file beside the secret key (``var/dsn_key``), created 0600 on first use.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from agent.conf import agent_settings

MARK = "t2senc1."
_SECRET_PARAMS = ("password", "sslpassword")
_lock = threading.Lock()
_cache: dict[tuple, MultiFernet] = {}


class DsnKeyError(Exception):
    """A stored password cannot be decrypted with the configured key."""


def _key_source() -> tuple[str, Path]:
    return agent_settings.DSN_KEY, Path(agent_settings.DSN_KEY_FILE)


def _read_or_create_key(path: Path) -> bytes:
    """The key in ``path``, created 0600 on first use. Written aside and linked into place, so two processes
    starting at once agree on one key and never read a half-written file."""
    if not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(Fernet.generate_key())
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            tmp.unlink(missing_ok=True)
    return path.read_bytes().strip()


def _fernet() -> MultiFernet:
    env_keys, key_file = _key_source()
    with _lock:
        cached = _cache.get((env_keys, key_file))
        if cached is None:
            if env_keys:
                keys = [k.strip().encode() for k in env_keys.split(",") if k.strip()]
            else:
                keys = [_read_or_create_key(key_file)]
            cached = _cache[(env_keys, key_file)] = MultiFernet([Fernet(k) for k in keys])
        return cached


def _seal(secret: str) -> str:
    return MARK + _fernet().encrypt(secret.encode("utf-8")).decode("ascii")


def _open(sealed: str) -> str:
    try:
        return _fernet().decrypt(sealed[len(MARK):].encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError):
        raise DsnKeyError(
            "The stored password of this database cannot be decrypted with the current key (T2S_DSN_KEY or "
            "var/dsn_key was changed or lost): register the database again with its password.") from None


def _rewrite(dsn: str, change) -> str:
    """``dsn`` with ``change(raw_value) -> raw_value`` applied to its userinfo password and secret parameters."""
    if "://" not in dsn:
        return dsn
    parts = urlsplit(dsn)
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        user, _, password = userinfo.partition(":")
        if password:
            netloc = f"{user}:{change(password)}@{hostport}"
    items = []
    for item in parts.query.split("&") if parts.query else []:
        key, sep, value = item.partition("=")
        items.append(f"{key}={change(value)}" if sep and value and key.lower() in _SECRET_PARAMS else item)
    return urlunsplit((parts.scheme, netloc, parts.path, "&".join(items), parts.fragment))


def seal_dsn(dsn: str) -> str:
    """The DSN to store: each plain password encrypted (an already sealed one is left as it is)."""
    return _rewrite(dsn, lambda raw: raw if unquote(raw).startswith(MARK) else _seal(unquote(raw)))


def reveal_dsn(dsn: str) -> str:
    """The DSN to connect with: each sealed password decrypted. Raises DsnKeyError if the key does not fit."""
    return _rewrite(dsn, lambda raw: quote(_open(unquote(raw)), safe="") if unquote(raw).startswith(MARK) else raw)


def is_sealed(dsn: str) -> bool:
    """Whether ``dsn`` holds no plain password (no password at all counts as sealed)."""
    found = []
    _rewrite(dsn, lambda raw: found.append(unquote(raw).startswith(MARK)) or raw)
    return all(found)
