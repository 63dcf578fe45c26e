from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.replay_server import (
    ReplayServer,
    ReplayServerProcess,
    _KeyIndex,
    deterministic_embedding,
    main,
)

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


def brute_force_key(keys: list[str], texts: list[str]) -> str | None:
    """The keyed-script rule as written: the longest key found in any text; the first listed among equals."""
    best = None
    for key in keys:
        if (best is None or len(key) > len(best)) and any(key in t for t in texts):
            best = key
    return best


def test_the_longest_key_in_any_user_or_assistant_message_picks_the_script() -> None:
    # "bcd" overlaps the earlier "ab"; "cd" and "xy" have the same length, the first listed wins.
    index = _KeyIndex(["ab", "bcd", "q", "cd", "xy"])
    assert index.match(["abcd"]) == "bcd"
    assert index.match(["xy cd"]) == "cd"
    assert index.match(["nothing here", "a q"]) == "q"
    assert index.match(["zzz"]) is None
    assert index.match(["ab", "later bcd"]) == "bcd"
    assert index.match(["abcd"]) == "bcd"  # the second time from the memo


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(st.text(alphabet="abc ?", max_size=6), max_size=8, unique=True),
       texts=st.lists(st.text(alphabet="abc ?", max_size=30), max_size=4))
def test_the_key_index_agrees_with_trying_every_key(keys: list[str], texts: list[str]) -> None:
    assert _KeyIndex(keys).match(texts) == brute_force_key(keys, texts)


def test_a_keyed_script_of_many_questions_answers_each_its_own() -> None:
    keys = [f"How many items are in group {i}? (question {i})" for i in range(500)]
    script = {"scripts": {k: [f"answer {i}"] for i, k in enumerate(keys)}}
    with ReplayServer(script) as server:
        for i in (0, 5, 50, 499):
            assert chat(server, f"schema ...\nQuestion: {keys[i]}").json()["choices"][0]["message"]["content"] \
                == f"answer {i}"


def test_the_server_in_its_own_process_replays_a_keyed_script() -> None:
    with ReplayServerProcess({"scripts": {"alpha": ["A1", "A2"], "beta": ["B1"]}}, model="m-x") as server:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/v1")
        answers = [HTTP.post(f"{server.url}/chat/completions",
                             json={"messages": [{"role": "user", "content": f"Q: {k}"}]}).json()
                   for k in ("alpha", "beta", "alpha")]
        url = server.url
    assert [a["choices"][0]["message"]["content"] for a in answers] == ["A1", "B1", "A2"]
    assert answers[0]["model"] == "m-x"
    with pytest.raises(httpx.ConnectError):  # stopped with the block
        HTTP.post(f"{url}/chat/completions", json={"messages": []})


def test_a_bad_script_fails_before_a_process_is_started() -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        ReplayServerProcess([{"fault": "explode"}])


def test_a_json_step_is_answered_as_is() -> None:
    body = {"choices": [{"message": {"role": "assistant", "content": None}}]}
    with ReplayServer([{"fault": "json", "body": body}]) as server:
        reply = chat(server, "q")
    assert reply.status_code == 200 and reply.json() == body


def test_an_outage_refuses_connections_and_drops_kept_ones_until_the_server_comes_back() -> None:
    with ReplayServer(["before", "after"]) as server:
        client = httpx.Client(timeout=5)
        kept = lambda: client.post(f"{server.url}/chat/completions",  # noqa: E731
                                   json={"messages": [{"role": "user", "content": "q"}]})
        assert kept().json()["choices"][0]["message"]["content"] == "before"
        server.go_down()
        with pytest.raises(httpx.TransportError):
            kept()  # a request on the kept connection: closed unanswered
        with pytest.raises(httpx.ConnectError):
            HTTP.post(f"{server.url}/chat/completions", json={"messages": []})
        server.come_back()
        assert kept().json()["choices"][0]["message"]["content"] == "after"  # the script where it stopped
        client.close()


def _conversation(server: ReplayServer, system: str, question: str, turns: int) -> list[str]:
    """A conversation of ``turns`` calls, each after the previous answers (as the agent loop sends them)."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    answers = []
    for _ in range(turns):
        body = HTTP.post(f"{server.url}/chat/completions", json={"model": "m", "messages": messages}).json()
        text = body["choices"][0]["message"]["content"]
        answers.append(text)
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": "Observation: ok"}]
    return answers


def test_a_by_turn_script_answers_every_conversation_alike_whatever_their_number_or_order() -> None:
    with ReplayServer({"scripts": {"Q: count": {"by_turn": ["first", "second"]}}}) as server:
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda _: _conversation(server, "sys", "Q: count", 2), range(6)))
        assert results == [["first", "second"]] * 6
        assert server.remaining("Q: count") == 2  # nothing is consumed
    with ReplayServer({"scripts": {"Q: count": {"by_turn": ["only"]}}}) as server:
        messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "Q: count"},
                    {"role": "assistant", "content": "only"}, {"role": "user", "content": "Observation: x"}]
        response = HTTP.post(f"{server.url}/chat/completions", json={"model": "m", "messages": messages})
    assert response.status_code == 400 and "exhausted" in response.json()["error"]["message"]


def test_a_conditional_step_answers_by_whether_the_system_message_holds_a_text() -> None:
    step = {"if_system_contains": "EXEMPLAR-7", "then": "right", "else": {"text": "wrong", "latency_ms": 1}}
    with ReplayServer({"scripts": {"Q: x": {"by_turn": [step]}}, "default": [step]}) as server:
        with_it = _conversation(server, "tools ... Example 1 EXEMPLAR-7 ...", "Q: x", 1)
        without = _conversation(server, "tools ... Example 1 other ...", "Q: x", 1)
        # the marker in a user message does not count: only the system message, where exemplars sit
        in_question = _conversation(server, "tools", "Q: x EXEMPLAR-7", 1)
        sequential = _conversation(server, "EXEMPLAR-7", "no key here", 1)
    assert (with_it, without, in_question, sequential) == (["right"], ["wrong"], ["wrong"], ["right"])


def test_a_malformed_conditional_or_script_object_is_refused_up_front() -> None:
    with pytest.raises(ValueError, match="conditional"):
        ReplayServer([{"if_system_contains": "x", "then": "a"}])
    with pytest.raises(ValueError, match="by_turn"):
        ReplayServer({"scripts": {"k": {"steps": ["a"]}}})
    with pytest.raises(ValueError, match="'text' or 'fault'"):
        ReplayServer([{"if_system_contains": "x", "then": "a", "else": {"latency_ms": 3}}])
