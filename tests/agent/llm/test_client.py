from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from agent.llm import PAPER_STOP, LLMClient, LLMError, LLMSettings, Message, Price, PriceTable
from tests.support.replay_server import ReplayServer

PRICES = PriceTable.from_mapping({"replay-model": Price(input_per_mtok=2.5, output_per_mtok=10.0)})
MESSAGES = [Message("system", "You are terse."), Message("user", "How many singers are there?")]
PROMPT_WORDS = 3 + 5  # the replay server counts words of all messages


class SleepRecorder:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def make_client(server: ReplayServer, sleep: SleepRecorder | None = None, **overrides) -> LLMClient:
    settings = LLMSettings(base_url=server.url, api_key="test-key", model="replay-model", prices=PRICES,
                           timeout_s=2.0, backoff_base_s=0.001, backoff_max_s=0.01)
    settings = LLMSettings(**{**settings.__dict__, **overrides})
    return LLMClient(settings, sleep=sleep or SleepRecorder())


def test_completion_reports_usage_latency_and_cost() -> None:
    with ReplayServer(["Thought: count them\nAction: ExecuteSQL('SELECT 1')"]) as server:
        completion = make_client(server).complete(MESSAGES)
    assert completion.text == "Thought: count them\nAction: ExecuteSQL('SELECT 1')"
    assert completion.prompt_tokens == PROMPT_WORDS
    assert completion.completion_tokens == 6
    assert completion.model == "replay-model"
    assert completion.finish_reason == "stop"
    assert completion.attempts == 1
    assert completion.latency_ms > 0
    assert completion.cost == pytest.approx((PROMPT_WORDS * 2.5 + 6 * 10.0) / 1_000_000)


def test_paper_defaults_are_sent_and_per_call_overrides_win() -> None:
    with ReplayServer(["a", "b"]) as server:
        client = make_client(server)
        client.complete(MESSAGES)
        client.complete(MESSAGES, model="other", temperature=0.0, top_p=1.0, max_tokens=64, stop=["\nX"])
        first, second = (r.params for r in server.chat_requests())
        sent = server.chat_requests()[0].messages
    assert first == {"model": "replay-model", "temperature": 0.7, "top_p": 0.95, "max_tokens": 512,
                     "stop": list(PAPER_STOP)}
    assert second == {"model": "other", "temperature": 0.0, "top_p": 1.0, "max_tokens": 64, "stop": ["\nX"]}
    assert sent == [m.to_dict() for m in MESSAGES]


def test_stop_sequence_cuts_the_scripted_text() -> None:
    with ReplayServer(["Thought: t\nAction: Done\nObservation: invented by the model"]) as server:
        completion = make_client(server).complete(MESSAGES)
    assert completion.text == "Thought: t\nAction: Done"
    assert completion.completion_tokens == 4


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_transient_http_error_is_retried_then_succeeds(status: int) -> None:
    sleep = SleepRecorder()
    with ReplayServer([{"fault": "http", "status": status}, "ok"]) as server:
        completion = make_client(server, sleep).complete(MESSAGES)
        assert len(server.chat_requests()) == 2
    assert completion.text == "ok"
    assert completion.attempts == 2
    assert len(sleep.calls) == 1


def test_timeout_is_retried_then_succeeds() -> None:
    script = [{"fault": "timeout", "delay_ms": 600}, "after the timeout"]
    with ReplayServer(script) as server:
        completion = make_client(server, timeout_s=0.2).complete(MESSAGES)
    assert completion.text == "after the timeout"
    assert completion.attempts == 2


def test_repeated_timeouts_end_in_llm_error() -> None:
    script = [{"fault": "timeout", "delay_ms": 400}] * 3
    with ReplayServer(script) as server:
        with pytest.raises(LLMError, match="timed out") as info:
            make_client(server, timeout_s=0.1, max_retries=2).complete(MESSAGES)
    assert info.value.attempts == 3


@pytest.mark.parametrize("fault", [{"fault": "garbage", "body": "<html>bad gateway</html>"},
                                   {"fault": "no_choices"}])
def test_garbage_response_ends_in_llm_error_after_retries(fault: dict) -> None:
    sleep = SleepRecorder()
    with ReplayServer([fault] * 4) as server:
        with pytest.raises(LLMError) as info:
            make_client(server, sleep).complete(MESSAGES)
        assert len(server.chat_requests()) == 4
    assert info.value.attempts == 4
    assert len(sleep.calls) == 3
    assert "after 4 attempts" in str(info.value)
    assert info.value.cause is not None


def test_persistent_429_ends_in_llm_error_naming_the_status() -> None:
    with ReplayServer([{"fault": "http", "status": 429, "message": "slow down"}] * 4) as server:
        with pytest.raises(LLMError, match="HTTP 429.*slow down") as info:
            make_client(server).complete(MESSAGES)
    assert info.value.status_code == 429


def test_client_error_is_not_retried() -> None:
    with ReplayServer([{"fault": "http", "status": 400}, "never reached"]) as server:
        with pytest.raises(LLMError, match="HTTP 400") as info:
            make_client(server).complete(MESSAGES)
        assert len(server.chat_requests()) == 1
    assert info.value.attempts == 1


def test_backoff_grows_exponentially_with_jitter_and_honours_retry_after() -> None:
    sleep = SleepRecorder()
    script = [{"fault": "http", "status": 500}] * 3 + [{"fault": "http", "status": 429, "retry_after": 0}, "ok"]
    with ReplayServer(script) as server:
        make_client(server, sleep, backoff_base_s=1.0, backoff_max_s=100.0, max_retries=5).complete(MESSAGES)
    first, second, third, retry_after = sleep.calls
    assert 0.5 <= first <= 1.0 and 1.0 <= second <= 2.0 and 2.0 <= third <= 4.0
    assert retry_after == 0.0


def test_connection_refused_ends_in_llm_error() -> None:
    server = ReplayServer([])
    url = server.url
    server.stop()  # nothing listens on that port any more
    client = LLMClient(LLMSettings(base_url=url, model="m", max_retries=1, backoff_base_s=0.001),
                       sleep=SleepRecorder())
    with pytest.raises(LLMError, match="connection error") as info:
        client.complete(MESSAGES)
    assert info.value.attempts == 2


def test_unknown_model_or_missing_usage_has_no_cost() -> None:
    with ReplayServer([{"text": "hi", "usage": None}, "hello there"]) as server:
        client = make_client(server)
        no_usage = client.complete(MESSAGES)
        unknown = client.complete(MESSAGES, model="mystery-model")
    assert (no_usage.prompt_tokens, no_usage.completion_tokens, no_usage.cost) == (0, 0, None)
    assert unknown.model == "mystery-model"
    assert unknown.cost is None


def test_settings_from_env_reference_the_key_by_variable_name() -> None:
    env = {"OPENAI_BASE_URL": "http://llm:8000/v1", "OPENAI_API_KEY": "sk-secret", "OPENAI_MODEL": "qwen"}
    settings = LLMSettings.from_env(env, max_retries=5)
    assert (settings.base_url, settings.api_key, settings.model, settings.max_retries) == (
        "http://llm:8000/v1", None, "qwen", 5)
    assert settings.resolve_api_key(env) == "sk-secret"
    assert LLMSettings.from_env({}).base_url is None
    assert LLMSettings(api_key="sk-direct").resolve_api_key({}) == "sk-direct"


def test_settings_snapshot_never_holds_the_key() -> None:
    settings = LLMSettings(base_url="http://x/v1", api_key="sk-secret", prices=PRICES, max_concurrent=2)
    snapshot = json.dumps(settings.to_dict())
    assert "sk-secret" not in snapshot and "sk-secret" not in repr(settings)
    restored = LLMSettings.from_dict(json.loads(snapshot))
    assert restored == LLMSettings(base_url="http://x/v1", prices=PRICES, max_concurrent=2)


def test_the_key_is_read_from_the_named_variable_and_sent_as_a_bearer_token(monkeypatch) -> None:
    monkeypatch.setenv("T2S_TEST_LLM_KEY", "sk-from-env")
    with ReplayServer(["ok", "ok"]) as server:
        LLMClient(LLMSettings(base_url=server.url, api_key_env="T2S_TEST_LLM_KEY", model="m")).complete(MESSAGES)
        LLMClient(LLMSettings(base_url=server.url, model="m")).complete(MESSAGES)
        with_key, without = server.chat_requests()
    assert with_key.headers["authorization"] == "Bearer sk-from-env"
    assert without.headers["authorization"] == "Bearer not-needed"  # local servers ignore it


def test_max_concurrent_serialises_calls() -> None:
    with ReplayServer([{"text": "ok", "latency_ms": 150}] * 4) as server:
        client = make_client(server, max_concurrent=1)
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda _: client.complete(MESSAGES), range(4)))
        elapsed = time.monotonic() - started
    assert elapsed >= 0.6


def test_with_settings_points_at_another_endpoint() -> None:
    with ReplayServer(["from b"]) as b:
        client = LLMClient(LLMSettings(base_url="http://127.0.0.1:9/v1", model="replay-model"))
        assert client.with_settings(base_url=b.url).complete(MESSAGES).text == "from b"


def test_concurrent_calls_keep_their_connections_open_for_the_next_round() -> None:
    # 40 sessions calling at once, round after round (a run at concurrency 40): the second round reuses the
    # first round's connections instead of opening (on HTTPS: handshaking) new ones. httpx's default pool
    # kept only 20 of them open.
    import threading

    n = 40
    with ReplayServer([{"text": "ok", "latency_ms": 200}] * (2 * n)) as server:
        client = make_client(server)
        for _ in range(2):
            barrier = threading.Barrier(n)

            def call(barrier: threading.Barrier) -> None:
                barrier.wait()
                client.complete(MESSAGES)

            threads = [threading.Thread(target=call, args=(barrier,)) for _ in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
        peers = {r.peer for r in server.requests}
    assert len(server.requests) == 2 * n
    assert len(peers) == n
