from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.support.replay_server import ReplayServer, deterministic_embedding, main

ROOT = Path(__file__).resolve().parents[2]
HTTP = httpx.Client(timeout=5)  # one pooled client: building one per request costs ~0.1 s


def chat(server: ReplayServer, content: str, **params) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "system", "content": "sys Q: decoy"},
                                       {"role": "user", "content": content}], **params}
    return HTTP.post(f"{server.url}/chat/completions", json=body)


def test_replays_steps_in_order_and_counts_words_as_tokens() -> None:
    with ReplayServer(["one two three", "four"]) as server:
        first = chat(server, "how many rows").json()
        second = chat(server, "again").json()
    assert first["choices"][0]["message"]["content"] == "one two three"
    assert first["usage"] == {"prompt_tokens": 3 + 3, "completion_tokens": 3, "total_tokens": 9}
    assert second["choices"][0]["message"]["content"] == "four"


def test_stop_parameter_cuts_at_the_first_stop_sequence() -> None:
    with ReplayServer(["Thought: a\nAction: Done\nThought: more\nObservation: x"]) as server:
        data = chat(server, "q", stop=["\nObservation", "\nThought"]).json()
    assert data["choices"][0]["message"]["content"] == "Thought: a\nAction: Done"
    assert data["usage"]["completion_tokens"] == 4


def test_faults_are_served_as_scripted() -> None:
    script = [{"fault": "http", "status": 429, "retry_after": 1}, {"fault": "garbage", "body": "<html>"},
              {"fault": "no_choices"}]
    with ReplayServer(script) as server:
        limited = chat(server, "q")
        garbage = chat(server, "q")
        empty = chat(server, "q")
        exhausted = chat(server, "q")
    assert limited.status_code == 429 and limited.headers["retry-after"] == "1"
    assert garbage.status_code == 200 and garbage.text == "<html>"
    assert empty.json()["choices"] == []
    assert exhausted.status_code == 400 and "exhausted" in exhausted.json()["error"]["message"]


def test_keyed_scripts_replay_independently_under_concurrency() -> None:
    keys = [f"question number {i}" for i in range(8)]
    script = {"scripts": {k: [f"{k} step {n}" for n in range(5)] for k in keys}}
    with ReplayServer(script) as server:
        def session(key: str) -> list[str]:
            return [chat(server, f"Q: {key}?").json()["choices"][0]["message"]["content"] for _ in range(5)]

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = dict(zip(keys, pool.map(session, keys), strict=True))
        assert len(server.chat_requests()) == 40
        assert [r.step_index for r in server.chat_requests_for(keys[3])] == [0, 1, 2, 3, 4]
    for key in keys:
        assert results[key] == [f"{key} step {n}" for n in range(5)]


def test_marker_in_system_message_does_not_select_a_script() -> None:
    with ReplayServer({"scripts": {"decoy": ["keyed"]}, "default": ["default"]}) as server:
        data = chat(server, "something else").json()
    assert data["choices"][0]["message"]["content"] == "default"


def test_records_messages_and_params() -> None:
    with ReplayServer(["ok"]) as server:
        chat(server, "hello", temperature=0.7, max_tokens=5)
        request = server.chat_requests()[0]
    assert request.messages[-1] == {"role": "user", "content": "hello"}
    assert request.params == {"model": "m", "temperature": 0.7, "max_tokens": 5}


def test_models_and_deterministic_embeddings() -> None:
    with ReplayServer([], model="replay-x") as server:
        models = HTTP.get(f"{server.url}/models").json()
        emb = HTTP.post(f"{server.url}/embeddings", json={"model": "e", "input": ["a b", "c"]}).json()
    assert models["data"][0]["id"] == "replay-x"
    assert [d["embedding"] for d in emb["data"]] == [deterministic_embedding("a b"), deterministic_embedding("c")]
    assert emb["usage"]["prompt_tokens"] == 3
    assert sum(v * v for v in deterministic_embedding("a b")) == pytest.approx(1.0)


def test_invalid_script_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        ReplayServer([{"fault": "explode"}])
    with pytest.raises(ValueError, match="needs 'text' or 'fault'"):
        ReplayServer([{"latency_ms": 5}])


def test_command_line_serves_a_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["from the command line"]))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.replay_server", "--port", str(port),
                             "--script", str(script)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                response = HTTP.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                                     json={"messages": [{"role": "user", "content": "hi"}]})
                break
            except httpx.ConnectError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert response.json()["choices"][0]["message"]["content"] == "from the command line"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_main_rejects_a_missing_script_argument() -> None:
    with pytest.raises(SystemExit):
        main([])
