"""HTTP for the LLM client: one POST of a JSON body to one URL, over kept-alive connections.

The standard library's ``http.client`` does it for about a third of httpx's CPU: in the bench worker (64
sessions sharing one interpreter lock, 3 calls each) httpx2 took 1.4-1.6 ms of thread CPU per call unloaded
and 2.5 ms under load, ``http.client`` 0.5-0.6 ms, and that CPU delays every other session. httpx2 remains
for an endpoint the environment sends through a proxy (``HTTP(S)_PROXY``/``ALL_PROXY``): it applies
``NO_PROXY``, proxy credentials, HTTPS and SOCKS proxies as it always did, where a proxy adds its own
latency anyway.
"""

from __future__ import annotations

import codecs
import http.client
import select
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit
from urllib.request import getproxies

import httpx2

KEEPALIVE_EXPIRY_S = 5.0  # httpx's: an idle connection older than this is closed, not reused
USER_AGENT = "t2s-studio"
# The server closed a kept-alive connection while it sat idle: nothing of the request was processed.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


@dataclass(frozen=True)
class Reply:
    status: int
    text: str
    retry_after: str | None  # the ``Retry-After`` header as sent


class TransportError(Exception):
    """No reply: the connection failed or an operation took longer than the timeout."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class Transport(Protocol):
    def post_json(self, body: bytes, timeout: float) -> Reply: ...

    def close(self) -> None: ...


def open_transport(url: str, headers: Mapping[str, str], *, max_connections: int | None,
                   max_idle: int) -> Transport:
    """A transport posting to ``url`` with ``headers``; httpx2 when the environment names a proxy for it."""
    if proxy_configured(urlsplit(url).scheme):
        return HttpxTransport(url, headers, max_connections=max_connections, max_idle=max_idle)
    return PooledTransport(url, headers, max_idle=max_idle)


def proxy_configured(scheme: str) -> bool:
    """Whether httpx would look for a proxy for ``scheme`` URLs (read from the environment as httpx reads it).

    ``NO_PROXY`` is left to httpx, whose matching (suffixes, CIDR ranges, ports) urllib's does not repeat
    exactly; only ``NO_PROXY=*``, which turns every proxy off in httpx too, is honoured here.
    """
    proxies = getproxies()
    if "*" in (host.strip() for host in proxies.get("no", "").split(",")):
        return False
    return bool(proxies.get(scheme.lower()) or proxies.get("all"))


class PooledTransport:
    """``http.client`` connections, kept open between calls and shared by threads (thread-safe).

    At most ``max_idle`` idle connections are kept, the most recently used first (LIFO: the warmest, and the
    rest expire); calls in flight at once each get their own. A kept connection the server has closed is
    found before use (its socket reads as closed) or, if the close crosses the request, by a
    disconnection before any reply byte: the request then goes once more on a new connection, as httpx does,
    without counting as a failed attempt.
    """

    def __init__(self, url: str, headers: Mapping[str, str], *, max_idle: int) -> None:
        parts = urlsplit(url)
        self._error: str | None = None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            # Reported by every call as httpx reported it (a connection error), not when the client is built.
            self._error = f"unsupported URL {url!r} (http:// or https:// and a host expected)"
        try:
            port = parts.port
        except ValueError:
            port, self._error = None, f"invalid port in URL {url!r}"
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = port or (443 if self._https else 80)
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = {"User-Agent": USER_AGENT, "Accept": "application/json",
                         "Content-Type": "application/json", **headers}
        # The trust store httpx used (the system's; SSL_CERT_FILE / SSL_CERT_DIR honoured), built once.
        self._ssl = httpx2.create_ssl_context() if self._https and self._error is None else None
        if self._ssl is not None:
            self._ssl.set_alpn_protocols(["http/1.1"])  # as httpx offered it: some servers expect ALPN
        self._max_idle = max_idle
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []  # (connection, idle since)
        self._lock = threading.Lock()
        self._closed = False

    def post_json(self, body: bytes, timeout: float) -> Reply:
        if self._error is not None:
            raise TransportError(self._error)
        headers = {**self._headers, "Content-Length": str(len(body))}
        conn, reused = self._checkout()
        try:
            try:
                response = self._exchange(conn, body, headers, timeout)
            except _STALE:
                if not reused:
                    raise
                conn.close()
                conn = self._connection()
                response = self._exchange(conn, body, headers, timeout)
            data = response.read()
        except TimeoutError as exc:
            conn.close()
            raise TransportError("request timed out", timed_out=True) from exc
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise TransportError(str(exc) or type(exc).__name__) from exc
        except BaseException:
            conn.close()  # a half-read reply must never be reused
            raise
        if response.will_close:
            conn.close()
        else:
            self._checkin(conn)
        msg = response.msg
        encoding = msg.get("Content-Encoding")
        if encoding and encoding.strip().lower() in ("gzip", "deflate", "x-gzip"):
            try:
                data = zlib.decompress(data, 47)  # 32 + 15: a gzip or zlib header, detected
            except zlib.error:
                pass  # undecodable: the caller sees bytes that are not JSON, as for any garbled body
        return Reply(response.status, data.decode(_charset(msg.get("Content-Type")), "replace"),
                     msg.get("Retry-After"))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def _exchange(self, conn: http.client.HTTPConnection, body: bytes, headers: Mapping[str, str],
                  timeout: float) -> http.client.HTTPResponse:
        # The attempt's timeout bounds connecting, each write and each read, as httpx's did.
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        conn.request("POST", self._target, body, headers)
        return conn.getresponse()

    def _checkout(self) -> tuple[http.client.HTTPConnection, bool]:
        now = time.monotonic()
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("the LLM client is closed")
                if not self._idle:
                    break
                conn, since = self._idle.pop()
            if now - since < KEEPALIVE_EXPIRY_S and not _closed_by_peer(conn):
                return conn, True
            conn.close()
        return self._connection(), False

    def _checkin(self, conn: http.client.HTTPConnection) -> None:
        now = time.monotonic()
        expired: list[tuple[http.client.HTTPConnection, float]] = []
        with self._lock:
            # The oldest idle ones come first: those past the expiry are closed now, not left holding a socket
            # the server has long closed until a burst of calls reaches them.
            while self._idle and now - self._idle[0][1] >= KEEPALIVE_EXPIRY_S:
                expired.append(self._idle.pop(0))
            keep = not self._closed and len(self._idle) < self._max_idle
            if keep:
                self._idle.append((conn, now))
        for old, _ in expired:
            old.close()
        if not keep:
            conn.close()

    def _connection(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port)


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    """An idle connection with something to read has been closed (or broken) by the server."""
    sock = conn.sock
    if sock is None:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _charset(content_type: str | None) -> str:
    """The body's charset as the server names it, else UTF-8 (what httpx's ``Response.text`` assumed)."""
    if content_type and "charset=" in content_type.lower():
        name = content_type.lower().split("charset=", 1)[1].split(";", 1)[0].strip().strip('"')
        try:
            return codecs.lookup(name).name if name else "utf-8"
        except LookupError:
            pass
    return "utf-8"


class HttpxTransport:
    """httpx2, for an endpoint reached through a proxy (the behaviour of the client before ``PooledTransport``)."""

    def __init__(self, url: str, headers: Mapping[str, str], *, max_connections: int | None,
                 max_idle: int) -> None:
        self._url = url
        limits = httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_idle)
        self._http = httpx2.Client(headers={"Content-Type": "application/json", **headers},
                                   follow_redirects=False, limits=limits)

    def post_json(self, body: bytes, timeout: float) -> Reply:
        try:
            response = self._http.post(self._url, content=body, timeout=timeout)
        except httpx2.TimeoutException as exc:
            raise TransportError("request timed out", timed_out=True) from exc
        except httpx2.HTTPError as exc:  # connection refused or reset, protocol errors
            raise TransportError(str(exc) or type(exc).__name__) from exc
        return Reply(response.status_code, response.text, response.headers.get("retry-after"))

    def close(self) -> None:
        self._http.close()
