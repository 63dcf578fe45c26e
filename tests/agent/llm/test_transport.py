"""The LLM client's HTTP: kept-alive connections, stale ones, framing and encodings, HTTPS, proxies."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable

import pytest

from agent.llm import LLMClient, LLMError, LLMSettings, Message, transport
from agent.llm.transport import HttpxTransport, PooledTransport, open_transport
from tests.support.replay_server import ReplayServer

MESSAGES = [Message("user", "How many singers are there?")]
COMPLETION = {"model": "m", "choices": [{"message": {"role": "assistant", "content": "ok"},
                                         "finish_reason": "stop"}]}
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
              "NO_PROXY", "REQUEST_METHOD")


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:  # a proxy set where the tests run would send them through httpx2
        monkeypatch.delenv(name, raising=False)


def client_for(url: str, **overrides) -> LLMClient:
    values = {"timeout_s": 2.0, "max_retries": 2, "backoff_base_s": 0.001, "backoff_max_s": 0.001, **overrides}
    settings = LLMSettings(base_url=url, model="m", **values)
    return LLMClient(settings, sleep=lambda _: None)


def reply(body: bytes | str = json.dumps(COMPLETION), *, status: str = "200 OK",
          headers: tuple[str, ...] = ("Content-Type: application/json",), chunked: bool = False) -> bytes:
    data = body.encode() if isinstance(body, str) else body
    if chunked:  # in chunks of 7 bytes, then the last (empty) one
        framing = "Transfer-Encoding: chunked"
        data = b"".join(b"%x\r\n%s\r\n" % (len(data[i:i + 7]), data[i:i + 7]) for i in range(0, len(data), 7))
        data += b"0\r\n\r\n"
    else:
        framing = f"Content-Length: {len(data)}"
    head = "\r\n".join([f"HTTP/1.1 {status}", *headers, framing, "", ""])
    return head.encode() + data


class SocketServer:
    """Accepts connections itself, so a test sees each one; ``answer(conn_index, request_index)`` returns the
    bytes to send for a request (None: close the connection without answering; after the bytes, the
    connection stays open unless ``close_after`` says so)."""

    def __init__(self, answer: Callable[[int, int], bytes | None],
                 close_after: Callable[[int, int], bool] = lambda c, r: False) -> None:
        self.answer, self.close_after = answer, close_after
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        self.connections = 0
        self.closed_by_client = 0  # connections that ended with the client closing them
        self.requests: list[tuple[int, bytes]] = []  # (connection index, request head)
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                index = self.connections
                self.connections += 1
            threading.Thread(target=self._serve, args=(sock, index), daemon=True).start()

    def _serve(self, sock: socket.socket, conn_index: int) -> None:
        reader = sock.makefile("rb")
        with sock, reader:
            for request_index in range(1000):
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        with self.lock:
                            self.closed_by_client += 1
                        return
                    head += line
                length = int(next((h.split(b":")[1] for h in head.split(b"\r\n")
                                   if h.lower().startswith(b"content-length:")), b"0"))
                reader.read(length)
                with self.lock:
                    self.requests.append((conn_index, head))
                data = self.answer(conn_index, request_index)
                if data is None:
                    return
                sock.sendall(data)
                if self.close_after(conn_index, request_index):
                    return

    def close(self) -> None:
        self.listener.close()

    def __enter__(self) -> SocketServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def test_sequential_calls_share_one_connection() -> None:
    with ReplayServer(["a", "b", "c"]) as server:
        client = client_for(server.url)
        texts = [client.complete(MESSAGES).text for _ in range(3)]
        peers = {r.peer for r in server.requests}
    assert texts == ["a", "b", "c"]
    assert len(peers) == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_before_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "_STALE", ())  # found before use, not by the retry of a failed send
    with SocketServer(lambda c, r: reply(), close_after=lambda c, r: True) as server:
        client = client_for(server.url, max_retries=0)
        first = client.complete(MESSAGES)
        time.sleep(0.1)  # the server's FIN arrives while the connection sits in the pool
        second = client.complete(MESSAGES)
    assert (first.attempts, second.attempts) == (1, 1)
    assert server.connections == 2
    assert len(server.requests) == 2  # nothing was sent down the closed connection


def test_a_kept_connection_closed_across_the_request_is_retried_once_without_counting_an_attempt() -> None:
    # The server takes the second request on the kept connection and closes without a reply byte (its
    # keep-alive timer fired as the request came): sent again on a new connection, not a failed attempt.
    with SocketServer(lambda c, r: None if (c, r) == (0, 1) else reply()) as server:
        client = client_for(server.url, max_retries=0)
        client.complete(MESSAGES)
        second = client.complete(MESSAGES)
    assert second.attempts == 1
    assert server.connections == 2
    assert [c for c, _ in server.requests] == [0, 0, 1]


def test_a_new_connection_closed_without_reply_is_a_counted_failure() -> None:
    with SocketServer(lambda c, r: None) as server:
        with pytest.raises(LLMError, match="connection error.*closed connection") as info:
            client_for(server.url, max_retries=2).complete(MESSAGES)
    assert info.value.attempts == 3
    assert server.connections == 3  # one per attempt: a fresh connection is never retried silently


def test_idle_connections_expire() -> None:
    with ReplayServer(["a", "b"]) as server:
        client = client_for(server.url)
        client.complete(MESSAGES)
        transport_ = client._http
        assert isinstance(transport_, PooledTransport)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(transport, "KEEPALIVE_EXPIRY_S", 0.0)
            client.complete(MESSAGES)
        peers = [r.peer for r in server.requests]
    assert peers[0] != peers[1]


def test_expired_idle_connections_are_closed_when_a_connection_comes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "KEEPALIVE_EXPIRY_S", 0.5)

    def slow_reply(conn_index: int, request_index: int) -> bytes:
        time.sleep(0.1)  # so that three calls at once hold three connections
        return reply()

    with SocketServer(slow_reply) as server:
        pool = PooledTransport(server.url + "/chat/completions", {}, max_idle=4)
        threads = [threading.Thread(target=pool.post_json, args=(b"{}", 2.0)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
        time.sleep(0.3)
        pool.post_json(b"{}", 2.0)  # the newest idle connection, used and put back
        time.sleep(0.3)  # the other two are now past the expiry, the one just used is not
        pool.post_json(b"{}", 2.0)
        deadline = time.monotonic() + 2
        while server.closed_by_client < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        closed = server.closed_by_client
        pool.close()
    assert server.connections == 3
    assert closed == 2


def test_a_timed_out_connection_is_not_reused_for_the_next_attempt() -> None:
    # The late reply to the first attempt must not be read as the second attempt's.
    script = [{"fault": "timeout", "delay_ms": 300}, "second"]
    with ReplayServer(script) as server:
        completion = client_for(server.url, timeout_s=0.1).complete(MESSAGES)
        peers = [r.peer for r in server.requests]
    assert (completion.text, completion.attempts) == ("second", 2)
    assert peers[0] != peers[1]


def test_a_read_timeout_counts_as_a_retryable_attempt() -> None:
    stall = threading.Event()

    def never_answer(conn_index: int, request_index: int) -> None:
        stall.wait(2)  # past the client's timeout, then the connection is closed

    with SocketServer(never_answer) as server:
        with pytest.raises(LLMError, match="timed out") as info:
            client_for(server.url, timeout_s=0.1, max_retries=1).complete(MESSAGES)
        stall.set()
    assert info.value.attempts == 2


def test_chunked_gzip_and_charset_bodies_are_decoded() -> None:
    latin = json.dumps({**COMPLETION, "choices": [{"message": {"content": "café"}}]}, ensure_ascii=False)
    replies = [reply(chunked=True),
               reply(gzip.compress(json.dumps(COMPLETION).encode()),
                     headers=("Content-Type: application/json", "Content-Encoding: gzip")),
               reply(latin.encode("latin-1"), headers=("Content-Type: application/json; charset=ISO-8859-1",)),
               reply(json.dumps(COMPLETION).encode() + b"\xff", headers=())]
    with SocketServer(lambda c, r: replies[r]) as server:
        client = client_for(server.url, max_retries=0)
        chunked, gzipped, latin1 = (client.complete(MESSAGES).text for _ in range(3))
        with pytest.raises(LLMError, match="not JSON.*\ufffd"):  # invalid UTF-8 replaced, not a crash
            client.complete(MESSAGES)
    assert (chunked, gzipped, latin1) == ("ok", "ok", "café")
    assert server.connections == 1


def test_a_reply_without_length_closes_its_connection() -> None:
    body = json.dumps(COMPLETION).encode()
    with SocketServer(lambda c, r: b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body,
                      close_after=lambda c, r: True) as server:
        client = client_for(server.url)
        assert [client.complete(MESSAGES).text for _ in range(2)] == ["ok", "ok"]
    assert server.connections == 2


def test_redirects_are_not_followed() -> None:
    moved = reply("", status="307 Temporary Redirect", headers=("Location: /elsewhere",))
    with SocketServer(lambda c, r: moved) as server:
        with pytest.raises(LLMError, match="not JSON") as info:
            client_for(server.url, max_retries=1).complete(MESSAGES)
        paths = {head.split(b" ")[1] for _, head in server.requests}
    assert info.value.attempts == 2
    assert paths == {b"/v1/chat/completions"}


def test_requests_carry_the_path_prefix_and_headers() -> None:
    with SocketServer(lambda c, r: reply()) as server:
        LLMClient(LLMSettings(base_url=server.url + "/", model="m", api_key="sk-x")).complete(MESSAGES)
        head = server.requests[0][1].decode()
    request_line, *lines = head.split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines if line)}
    assert request_line == "POST /v1/chat/completions HTTP/1.1"
    assert headers["authorization"] == "Bearer sk-x"
    assert headers["content-type"] == "application/json"
    assert headers["host"] == server.url.split("/")[2]
    assert int(headers["content-length"]) > 0


def test_idle_connections_kept_are_capped_and_the_rest_closed() -> None:
    # 6 calls at once, twice, with 2 idle connections kept: the second round reuses 2 and opens 4.
    n = 6
    with ReplayServer([{"text": "ok", "latency_ms": 150}] * (2 * n)) as server:
        pool = PooledTransport(server.url + "/chat/completions", {}, max_idle=2)
        body = json.dumps({"model": "m", "messages": [m.to_dict() for m in MESSAGES]}).encode()
        for _ in range(2):
            barrier = threading.Barrier(n)
            replies: list[int] = []

            def call(barrier: threading.Barrier = barrier, replies: list[int] = replies) -> None:
                barrier.wait()
                replies.append(pool.post_json(body, 5.0).status)

            threads = [threading.Thread(target=call) for _ in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(10)
            assert replies == [200] * n
        peers = {r.peer for r in server.requests}
        pool.close()
    assert len(peers) == n + (n - 2)


def test_a_closed_client_refuses_calls() -> None:
    with ReplayServer(["a"]) as server:
        client = client_for(server.url)
        client.complete(MESSAGES)
        client.close()
        with pytest.raises(RuntimeError, match="closed"):
            client.complete(MESSAGES)


def test_https_endpoints_get_verified_tls_connections_to_the_right_port() -> None:
    pool = PooledTransport("https://llm.example.com/v1/chat/completions", {}, max_idle=1)
    conn = pool._connection()  # built only: nothing connects
    assert isinstance(conn, http.client.HTTPSConnection)
    assert (conn.host, conn.port) == ("llm.example.com", 443)
    context = conn._context  # type: ignore[attr-defined]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    explicit = PooledTransport("http://[::1]:8000/v1/chat/completions", {}, max_idle=1)._connection()
    assert type(explicit) is http.client.HTTPConnection and (explicit.host, explicit.port) == ("::1", 8000)


@pytest.mark.parametrize("url", ["localhost:8000/v1", "ftp://host/v1", "http://host:port/v1"])
def test_an_unusable_url_fails_each_call_as_a_connection_error(url: str) -> None:
    client = client_for(url, max_retries=0)  # building the client does not raise
    with pytest.raises(LLMError, match="connection error"):
        client.complete(MESSAGES)


@pytest.mark.parametrize(("env", "url", "proxied"), [
    ({}, "http://llm:8000/v1", False),
    ({"HTTPS_PROXY": "http://proxy:3128"}, "http://llm:8000/v1", False),
    ({"HTTPS_PROXY": "http://proxy:3128"}, "https://api.openai.com/v1", True),
    ({"http_proxy": "http://proxy:3128"}, "http://llm:8000/v1", True),
    ({"ALL_PROXY": "http://proxy:3128"}, "http://llm:8000/v1", True),
    ({"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": "llm"}, "http://llm:8000/v1", True),  # httpx decides
    ({"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": "*"}, "http://llm:8000/v1", False),
])
def test_endpoints_behind_a_proxy_keep_httpx(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str,
                                            proxied: bool) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    chosen = open_transport(url + "/chat/completions", {}, max_connections=None, max_idle=1)
    assert isinstance(chosen, HttpxTransport if proxied else PooledTransport)
    chosen.close()


def test_a_call_through_an_http_proxy_reaches_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The replay server stands in for the proxy: it answers any path ending in /chat/completions, so it
    # receives the absolute URI a proxy is sent.
    with ReplayServer(["via the proxy"]) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://{proxy.host}:{proxy.port}")
        completion = client_for("http://llm.invalid:8000/v1").complete(MESSAGES)
        (request,) = proxy.requests
    assert completion.text == "via the proxy"
    assert request.path == "http://llm.invalid:8000/v1/chat/completions"
