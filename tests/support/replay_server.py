"""A small OpenAI-compatible HTTP server that replays scripted chat completions.

Tests and benchmarks talk to it over real HTTP, so the whole path (client,
retries, stop sequences, parser, loop) runs as it would against vLLM or OpenAI.

Script format (Python objects or the same as JSON)::

    ["Thought: ...\\nAction: SearchValue('x')",            # a completion text
     {"text": "...", "latency_ms": 50},                   # with a delay before answering
     {"fault": "http", "status": 429},                    # an HTTP error (body is an OpenAI-style error)
     {"fault": "timeout", "delay_ms": 2000},              # answer only after the client gave up
     {"fault": "garbage", "body": "<html>oops</html>"},   # 200 with a non-JSON body
     {"fault": "no_choices"},                             # 200 JSON without choices
     {"fault": "json", "body": {"choices": [...]}},       # 200 with this JSON body as is (a lenient server's)
     {"text": "...", "usage": {"prompt_tokens": 7, "completion_tokens": 3}}]  # explicit usage

A keyed script replays independently per conversation: ``{"scripts": {marker:
steps, ...}, "default": steps}``. A request uses the script of the longest
marker found in any non-system message (the question text is a good marker,
since exemplars sit in the system message), else ``default``. Each script has
its own cursor; an exhausted script answers HTTP 400 "replay script exhausted"
(not retryable, so a test fails fast and clearly).

A keyed script may also be ``{"by_turn": steps}``: stateless, the step is chosen by the number of assistant
messages the request already holds (the conversation's turn), so any number of conversations with that key,
at once or one after another (an experiment's trials), get the same answers; past the last step it answers
"replay script exhausted". Any step may depend on the system message, where the exemplars sit::

    {"if_system_contains": "an exemplar's text", "then": step, "else": step}

(``then``/``else`` are steps, conditional ones too), so a scripted model answers right only when a given
exemplar is in its prompt.

Usage accounting, deterministic so tests can assert exact totals:
prompt_tokens = the number of whitespace-separated words over all message
contents of the request; completion_tokens = the number of words of the text
returned (after cutting at the first stop sequence). A step's ``usage`` wins;
``"usage": null`` omits the field.

``server.go_down()`` makes the endpoint unreachable (connections refused, kept ones closed unanswered) until
``server.come_back()``, on the same port with the scripts where they were: a provider outage.

Command line: ``python -m tests.support.replay_server --port 8765 --script file.json`` (``--port 0``: any free
port; the first line printed names the URL). ``ReplayServerProcess`` runs it so, for benchmarks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Step = str | Mapping[str, Any]
EMBEDDING_DIM = 16


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    body: dict[str, Any]
    script_key: str | None  # None: the default script (or not a chat request)
    step_index: int | None  # position in that script, None when the script was exhausted
    received_at: float
    headers: dict[str, str] = field(default_factory=dict)  # names lower-cased
    peer: str = ""  # the client's address and port: one per connection (keep-alive reuses it)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def params(self) -> dict[str, Any]:
        """Everything sent except the messages (model, temperature, stop, ...)."""
        return {k: v for k, v in self.body.items() if k != "messages"}


@dataclass
class _Script:
    steps: list[Step]
    cursor: int = 0
    by_turn: bool = False  # stateless: the step of the conversation's turn, no cursor


_UNSEEN = object()


class _KeyIndex:
    """Finds the longest script key contained in a text without trying every key against it.

    Each key is filed under its first ``width`` characters (``width``: the shortest key's length, at most
    16); a text is read once, position by position, and only the keys filed under the characters found there
    are compared. The answer for a text is kept, so a conversation's user message (schema and question,
    repeated in every request) is read once. Scanning every key per request took about 1.2 ms at 320 keys
    and grew with the script; this grows only with the text. Equal lengths: the key listed first wins.
    """

    MEMO = 4096  # texts remembered (then forgotten all at once)

    def __init__(self, keys: Iterable[str]) -> None:
        self.rank = {k: i for i, k in enumerate(keys)}
        self.empty = "" in self.rank
        sized = [k for k in self.rank if k]
        self.width = min(16, min(map(len, sized), default=1))
        self.buckets: dict[str, list[str]] = {}
        for key in sorted(sized, key=self.order):
            self.buckets.setdefault(key[: self.width], []).append(key)
        self.memo: dict[str, str | None] = {}

    def order(self, key: str) -> tuple[int, int]:
        return -len(key), self.rank[key]

    def longest_in(self, text: str) -> str | None:
        known = self.memo.get(text, _UNSEEN)
        if known is not _UNSEEN:
            return known  # type: ignore[return-value]
        best: str | None = "" if self.empty else None
        buckets, width = self.buckets, self.width
        if buckets:
            for i in range(len(text) - width + 1):
                bucket = buckets.get(text[i: i + width])
                if bucket is None:
                    continue
                for key in bucket:  # best first: the first that fits is this position's best
                    if best is not None and self.order(key) >= self.order(best):
                        break
                    if text.startswith(key, i):
                        best = key
                        break
        if len(self.memo) >= self.MEMO:
            self.memo.clear()
        self.memo[text] = best
        return best

    def match(self, texts: Iterable[str]) -> str | None:
        found = [k for k in map(self.longest_in, texts) if k is not None]
        return min(found, key=self.order) if found else None


@dataclass
class _State:
    scripts: dict[str, _Script]
    default: _Script
    model: str
    index: _KeyIndex = field(init=False)
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[RecordedRequest] = field(default_factory=list)
    down: bool = False  # an outage: requests on kept connections are dropped unanswered
    in_flight: int = 0  # chat requests being answered now
    max_in_flight: int = 0  # the most ever answered at once

    def __post_init__(self) -> None:
        self.index = _KeyIndex(self.scripts)


def count_words(text: str) -> int:
    """The replay server's token count: whitespace-separated words."""
    return len(text.split())


def prompt_word_count(messages: Iterable[Mapping[str, Any]]) -> int:
    return sum(count_words(str(m.get("content") or "")) for m in messages)


def deterministic_embedding(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """A unit vector derived from the text's SHA-256: same text, same vector, on every run."""
    raw = b""
    counter = 0
    while len(raw) < dim * 4:
        raw += hashlib.sha256(f"{counter}:{text}".encode()).digest()
        counter += 1
    values = [v / 2**31 - 1.0 for v in struct.unpack(f">{dim}I", raw[: dim * 4])]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


class _Server(ThreadingHTTPServer):
    # An LLM endpoint takes a burst of connections (64 sessions calling at once); the standard library's
    # accept queue of 5 can drop some, and a dropped SYN comes back 1 s later, as with no real endpoint.
    request_queue_size = 256


class ReplayServer:
    """Start with ``with ReplayServer(script) as server:``; point a client at ``server.url``."""

    def __init__(self, script: Sequence[Step] | Mapping[str, Any] = (), *, host: str = "127.0.0.1",
                 port: int = 0, model: str = "replay-model") -> None:
        scripts, default = _normalise(script)
        self._state = _State(scripts=scripts, default=default, model=model)
        self._httpd = self._listen(host, port)
        self._thread: threading.Thread | None = None

    def _listen(self, host: str, port: int) -> _Server:
        httpd = _Server((host, port), _Handler)
        httpd.daemon_threads = True
        httpd.state = self._state  # type: ignore[attr-defined]
        return httpd

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The base URL an OpenAI client expects (ends in ``/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def max_in_flight(self) -> int:
        """The most chat requests this server was answering at the same moment (give steps a ``latency_ms``)."""
        with self._state.lock:
            return self._state.max_in_flight

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def chat_requests_for(self, script_key: str | None) -> list[RecordedRequest]:
        """Chat requests replayed from one script (None: the default script)."""
        return [r for r in self.chat_requests() if r.script_key == script_key]

    def remaining(self, script_key: str | None = None) -> int:
        with self._state.lock:
            script = self._state.default if script_key is None else self._state.scripts[script_key]
            return len(script.steps) - (0 if script.by_turn else script.cursor)

    def start(self) -> ReplayServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="replay-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:  # shutdown() would wait forever if serve_forever never ran
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def go_down(self) -> None:
        """A provider outage: new connections are refused and requests on kept ones dropped unanswered."""
        self._state.down = True
        self.stop()

    def come_back(self) -> None:
        """The end of the outage: the same port answers again, each script where it stopped."""
        self._httpd = self._listen(self.host, self.port)
        self._state.down = False
        self.start()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ReplayServerProcess:
    """The same server in a process of its own: ``with ReplayServerProcess(script) as server:``.

    For benchmarks: a real LLM endpoint answers from elsewhere, so the server's CPU (parsing each request,
    writing each answer) must not share the measuring process's interpreter lock. Only ``url`` is offered;
    the request log stays in the child (tests that inspect it use ``ReplayServer``).
    """

    def __init__(self, script: Sequence[Step] | Mapping[str, Any] = (), *, host: str = "127.0.0.1",
                 model: str = "replay-model", start_timeout_s: float = 30.0) -> None:
        _normalise(script)  # a bad script fails here, not in the child
        self._script, self._host, self._model, self._timeout = script, host, model, start_timeout_s
        self._proc: subprocess.Popen[str] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.url = ""

    def start(self) -> ReplayServerProcess:
        self._dir = tempfile.TemporaryDirectory(prefix="replay-")
        path = Path(self._dir.name) / "script.json"
        path.write_text(json.dumps(self._script), encoding="utf-8")
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.replay_server", "--host", self._host, "--port", "0",
             "--script", str(path), "--model", self._model], cwd=root, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True)
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], self._timeout)
        line = self._proc.stdout.readline() if ready else ""
        if " on http" not in line:
            self.stop()
            raise RuntimeError(f"the replay server process did not start: {line!r}")
        self.url = line.split(" on ", 1)[1].split()[0]
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> ReplayServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _normalise(script: Sequence[Step] | Mapping[str, Any]) -> tuple[dict[str, _Script], _Script]:
    if isinstance(script, Mapping):
        unknown = set(script) - {"scripts", "default"}
        if unknown:
            raise ValueError(f"keyed script: unknown keys {sorted(unknown)}; expected 'scripts' and 'default'")
        keyed = {str(k): _script(v) for k, v in (script.get("scripts") or {}).items()}
        return keyed, _script(script.get("default") or [])
    return {}, _Script(_check_steps(script))


def _script(value: Any) -> _Script:
    if isinstance(value, Mapping):
        if set(value) != {"by_turn"}:
            raise ValueError(f"a script object takes only 'by_turn', got {sorted(value)}")
        return _Script(_check_steps(value["by_turn"]), by_turn=True)
    return _Script(_check_steps(value))


def _check_steps(steps: Iterable[Step]) -> list[Step]:
    out = list(steps)
    for step in out:
        if isinstance(step, str):
            continue
        if not isinstance(step, Mapping):
            raise ValueError(f"script step must be a string or an object, got {step!r}")
        if "if_system_contains" in step:
            if not isinstance(step["if_system_contains"], str) or set(step) != {"if_system_contains", "then",
                                                                                 "else"}:
                raise ValueError(f"a conditional step is {{if_system_contains: text, then: step, else: step}}: "
                                 f"{step!r}")
            _check_steps([step["then"], step["else"]])
            continue
        fault = step.get("fault")
        if fault is None and "text" not in step:
            raise ValueError(f"script step needs 'text' or 'fault': {step!r}")
        if fault not in (None, "http", "timeout", "garbage", "no_choices", "json"):
            raise ValueError(f"unknown fault {fault!r}")
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ReplayServer/1"
    # Headers and body go out in two writes; with Nagle on, delayed ACKs add ~40 ms per response.
    disable_nagle_algorithm = True

    @property
    def state(self) -> _State:
        return self.server.state  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # quiet in tests; the request log is kept in memory instead

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": self.state.model, "object": "model",
                                                         "owned_by": "replay"}]})
        else:
            self._json(404, _error(f"no route for GET {self.path}", "not_found"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.state.down:
            self.close_connection = True  # no answer: the client sees the connection closed
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            self._json(400, _error("request body is not a JSON object", "invalid_request_error"))
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/chat/completions"):
            self._chat(path, body)
        elif path.endswith("/embeddings"):
            self._record(path, body, None, None)
            self._embeddings(body)
        else:
            self._json(404, _error(f"no route for POST {self.path}", "not_found"))

    def _record(self, path: str, body: dict[str, Any], key: str | None, index: int | None) -> None:
        with self.state.lock:
            self.state.requests.append(RecordedRequest(path, body, key, index, time.time(), self._headers(),
                                                       f"{self.client_address[0]}:{self.client_address[1]}"))

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _chat(self, path: str, body: dict[str, Any]) -> None:
        with self.state.lock:
            self.state.in_flight += 1
            self.state.max_in_flight = max(self.state.max_in_flight, self.state.in_flight)
        self._answering = True
        try:
            self._answer_chat(path, body)
        finally:
            self._done_answering()

    def _done_answering(self) -> None:
        # Counted out before the answer is written: once the client has it, its next call may come in at once.
        if getattr(self, "_answering", False):
            self._answering = False
            with self.state.lock:
                self.state.in_flight -= 1

    def _answer_chat(self, path: str, body: dict[str, Any]) -> None:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        state = self.state
        key = _match_key(state.index, messages)  # the index is read-only but for its memo: no lock needed
        with state.lock:
            script = state.default if key is None else state.scripts[key]
            position = sum(1 for m in messages if m.get("role") == "assistant") if script.by_turn else script.cursor
            if position < len(script.steps):
                index: int | None = position
                step: Step | None = script.steps[position]
                if not script.by_turn:
                    script.cursor += 1
            else:
                index, step = None, None
            state.requests.append(RecordedRequest(path, body, key, index, time.time(), self._headers(),
                                                       f"{self.client_address[0]}:{self.client_address[1]}"))
        if step is None:
            self._json(400, _error(f"replay script exhausted (script {key!r})", "invalid_request_error"))
            return
        step = _resolve(step, "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system"))
        spec: Mapping[str, Any] = {"text": step} if isinstance(step, str) else step
        delay_ms = spec.get("latency_ms", spec.get("delay_ms", 0)) or 0
        if delay_ms:
            time.sleep(float(delay_ms) / 1000)
        fault = spec.get("fault")
        if fault == "http":
            status = int(spec.get("status", 500))
            headers = {"Retry-After": str(spec["retry_after"])} if "retry_after" in spec else {}
            self._json(status, _error(str(spec.get("message", f"scripted HTTP {status}")), "server_error"),
                       headers)
        elif fault == "garbage":
            self._send(200, str(spec.get("body", "<html>502 Bad Gateway</html>")).encode(), "text/html")
        elif fault == "json":
            self._json(200, spec.get("body"))
        elif fault == "no_choices":
            self._json(200, {"id": "replay", "object": "chat.completion", "model": self._model(body),
                             "choices": []})
        else:
            # "timeout" steps reach here only when the client waited longer than the delay.
            self._completion(body, messages, str(spec.get("text", "")), spec)

    def _completion(self, body: dict[str, Any], messages: list[dict[str, Any]], text: str,
                    spec: Mapping[str, Any]) -> None:
        stop = body.get("stop")
        stops = [stop] if isinstance(stop, str) else [s for s in stop or [] if isinstance(s, str) and s]
        finish = "stop"
        cut = min((p for p in (text.find(s) for s in stops) if p != -1), default=-1)
        if cut != -1:
            text = text[:cut]
        payload: dict[str, Any] = {
            "id": f"replay-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self._model(body),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": spec.get("finish_reason", finish)}],
        }
        if "usage" in spec:
            if spec["usage"] is not None:
                payload["usage"] = dict(spec["usage"])
        else:
            prompt = prompt_word_count(messages)
            completion = count_words(text)
            payload["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                                "total_tokens": prompt + completion}
        self._json(200, payload)

    def _embeddings(self, body: dict[str, Any]) -> None:
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else [str(t) for t in inputs or []]
        data = [{"object": "embedding", "index": i, "embedding": deterministic_embedding(t)}
                for i, t in enumerate(texts)]
        words = sum(count_words(t) for t in texts)
        self._json(200, {"object": "list", "data": data, "model": self._model(body),
                         "usage": {"prompt_tokens": words, "total_tokens": words}})

    def _model(self, body: dict[str, Any]) -> str:
        model = body.get("model")
        return model if isinstance(model, str) and model else self.state.model

    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def _send(self, status: int, data: bytes, content_type: str, headers: Mapping[str, str] | None = None) -> None:
        self._done_answering()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a scripted timeout): nothing to answer


def _resolve(step: Step, system: str) -> Step:
    """A conditional step's branch for this request's system message (a plain step as it is)."""
    while isinstance(step, Mapping) and "if_system_contains" in step:
        step = step["then"] if step["if_system_contains"] in system else step["else"]
    return step


def _match_key(index: _KeyIndex, messages: list[dict[str, Any]]) -> str | None:
    """The script of the longest key found in a non-system message (None: the default script)."""
    return index.match(str(m.get("content") or "") for m in messages if m.get("role") != "system")


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": None}}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Replay scripted chat completions over an OpenAI-compatible API.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--script", required=True, help="JSON file: a list of steps or {scripts, default}")
    parser.add_argument("--model", default="replay-model")
    ns = parser.parse_args(argv)
    with open(ns.script, encoding="utf-8") as fh:
        script = json.load(fh)
    server = ReplayServer(script, host=ns.host, port=ns.port, model=ns.model)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # terminate() stops it like Ctrl-C
    print(f"replay server on {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
        print(f"served {len(server.requests)} requests", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
