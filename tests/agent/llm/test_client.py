"""The LLM client over real HTTP against the replay server: what it sends, how it reads lenient servers, what it
retries and for how long, and what a failed call reports."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

from agent.llm import PAPER_STOP, LLMClient, LLMError, LLMSettings, Message, Price, PriceTable
from tests.support.replay_server import ReplayServer

PRICES = PriceTable.from_mapping({"replay-model": Price(input_per_mtok=2.5, output_per_mtok=10.0)})
MESSAGES = [Message("system", "You are terse."), Message("user", "How many singers are there?")]
PROMPT_WORDS = 3 + 5  # the replay server counts words of all messages


class FakeClock:
    """Time that passes only when the client sleeps: waits of minutes take none."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def make_client(server: ReplayServer | str, clock: FakeClock | None = None, **overrides) -> LLMClient:
    url = server if isinstance(server, str) else server.url
    values = {"base_url": url, "api_key": "test-key", "model": "replay-model", "prices": PRICES, "timeout_s": 2.0,
              "backoff_base_s": 1.0, "backoff_max_s": 10.0, "outage_budget_s": 0.0, **overrides}
    clock = clock or FakeClock()
    return LLMClient(LLMSettings(**values), sleep=clock.sleep, clock=clock)


def refused_url() -> str:
    server = ReplayServer([])
    url = server.url
    server.stop()  # nothing listens on that port any more
    return url


def test_completion_reports_usage_latency_and_cost() -> None:
    with ReplayServer(["Thought: count them\nAction: ExecuteSQL('SELECT 1')"]) as server:
        completion = LLMClient(LLMSettings(base_url=server.url, model="replay-model", prices=PRICES)).complete(MESSAGES)
    assert completion.text == "Thought: count them\nAction: ExecuteSQL('SELECT 1')"
    assert completion.prompt_tokens == PROMPT_WORDS
    assert completion.completion_tokens == 6
    assert completion.model == "replay-model"
    assert completion.finish_reason == "stop"
    assert completion.attempts == 1
    assert completion.latency_ms > 0
    assert completion.cost == pytest.approx((PROMPT_WORDS * 2.5 + 6 * 10.0) / 1_000_000)


def test_paper_defaults_are_sent_and_per_call_overrides_win() -> None:
    with ReplayServer(["a", "b", "c", "d"]) as server:
        client = make_client(server)
        client.complete(MESSAGES)
        client.complete(MESSAGES, model="other", temperature=0.0, top_p=1.0, max_tokens=64, stop=["\nX"])
        client.complete(MESSAGES, stop=[], extra_body={"seed": 7})
        client.complete(MESSAGES, stop=[], seed=0)
        first, second, third, fourth = (r.params for r in server.chat_requests())
        sent = server.chat_requests()[0].messages
    assert first == {"model": "replay-model", "temperature": 0.7, "top_p": 0.95, "max_tokens": 512,
                     "stop": list(PAPER_STOP)}
    assert second == {"model": "other", "temperature": 0.0, "top_p": 1.0, "max_tokens": 64, "stop": ["\nX"]}
    assert third == {"model": "replay-model", "temperature": 0.7, "top_p": 0.95, "max_tokens": 512, "seed": 7}
    assert fourth == {**third, "seed": 0}  # a seed of 0 is a seed; only None sends none (the paper's requests)
    assert sent == [m.to_dict() for m in MESSAGES]


def test_stop_sequence_cuts_the_scripted_text() -> None:
    with ReplayServer(["Thought: t\nAction: Done\nObservation: invented by the model"]) as server:
        completion = make_client(server).complete(MESSAGES)
    assert completion.text == "Thought: t\nAction: Done"
    assert completion.completion_tokens == 4


def test_a_server_that_ignores_stop_is_cut_by_the_client() -> None:
    body = {"choices": [{"message": {"role": "assistant", "content": "Action: Done\nObservation: made up"},
                         "finish_reason": "length"}], "model": "replay-model"}
    with ReplayServer([{"fault": "json", "body": body}]) as server:
        completion = make_client(server).complete(MESSAGES)
    assert completion.text == "Action: Done"
    assert completion.finish_reason == "length"


def test_content_null_reads_as_an_empty_completion() -> None:
    body = {"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 0}}
    with ReplayServer([{"fault": "json", "body": body}]) as server:
        completion = make_client(server).complete(MESSAGES)
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == ("", 9, 0)
    assert completion.model == "replay-model"  # a server that names no model: the one asked for
    assert completion.cost == pytest.approx(9 * 2.5 / 1_000_000)


def test_unknown_model_or_missing_usage_has_no_cost() -> None:
    with ReplayServer([{"text": "hi", "usage": None}, "hello there"]) as server:
        client = make_client(server)
        no_usage = client.complete(MESSAGES)
        unknown = client.complete(MESSAGES, model="mystery-model")
    assert (no_usage.text, no_usage.prompt_tokens, no_usage.completion_tokens, no_usage.cost) == ("hi", 0, 0, None)
    assert unknown.model == "mystery-model"
    assert unknown.cost is None


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_transient_http_error_is_retried_then_succeeds(status: int) -> None:
    clock = FakeClock()
    with ReplayServer([{"fault": "http", "status": status}, "ok"]) as server:
        completion = make_client(server, clock).complete(MESSAGES)
        assert len(server.chat_requests()) == 2
    assert completion.text == "ok"
    assert completion.attempts == 2
    assert len(clock.sleeps) == 1


def test_timeout_is_retried_then_succeeds() -> None:
    script = [{"fault": "timeout", "delay_ms": 600}, "after the timeout"]
    with ReplayServer(script) as server:
        completion = make_client(server, timeout_s=0.2).complete(MESSAGES)
    assert completion.text == "after the timeout"
    assert completion.attempts == 2


def test_repeated_timeouts_end_in_llm_error_even_with_an_outage_budget() -> None:
    script = [{"fault": "timeout", "delay_ms": 400}] * 3
    with ReplayServer(script) as server:
        with pytest.raises(LLMError, match="timed out") as info:
            make_client(server, timeout_s=0.1, max_retries=2, outage_budget_s=300).complete(MESSAGES)
    assert info.value.attempts == 3


@pytest.mark.parametrize("fault", [{"fault": "garbage", "body": "<html>bad gateway</html>"},
                                   {"fault": "no_choices"}])
def test_garbage_response_ends_in_llm_error_after_retries(fault: dict) -> None:
    clock = FakeClock()
    with ReplayServer([fault] * 4) as server:
        with pytest.raises(LLMError) as info:
            make_client(server, clock, outage_budget_s=300).complete(MESSAGES)
        assert len(server.chat_requests()) == 4
    assert info.value.attempts == 4
    assert len(clock.sleeps) == 3
    assert "after 4 attempts" in str(info.value)
    assert info.value.cause is not None


def test_persistent_429_without_outage_budget_ends_in_llm_error_naming_the_status() -> None:
    with ReplayServer([{"fault": "http", "status": 429, "message": "slow down"}] * 4) as server:
        with pytest.raises(LLMError, match="HTTP 429.*slow down") as info:
            make_client(server).complete(MESSAGES)
    assert info.value.status_code == 429
    assert info.value.attempts == 4


def test_client_error_is_not_retried() -> None:
    with ReplayServer([{"fault": "http", "status": 400}, "never reached"]) as server:
        with pytest.raises(LLMError, match="HTTP 400") as info:
            make_client(server, outage_budget_s=300).complete(MESSAGES)
        assert len(server.chat_requests()) == 1
    assert info.value.attempts == 1


def test_backoff_grows_exponentially_with_jitter_and_honours_retry_after() -> None:
    clock = FakeClock()
    script = [{"fault": "http", "status": 500}] * 3 + [{"fault": "http", "status": 429, "retry_after": 0}, "ok"]
    with ReplayServer(script) as server:
        make_client(server, clock, backoff_max_s=100.0, max_retries=5).complete(MESSAGES)
    first, second, third, retry_after = clock.sleeps
    assert 0.5 <= first <= 1.0 and 1.0 <= second <= 2.0 and 2.0 <= third <= 4.0
    assert retry_after == 0.0


def test_connection_refused_without_outage_budget_ends_in_llm_error() -> None:
    with pytest.raises(LLMError, match="connection error") as info:
        make_client(refused_url(), max_retries=1).complete(MESSAGES)
    assert info.value.attempts == 2
    assert info.value.latency_ms is not None


# --- provider outages ----------------------------------------------------------------------------------


def test_a_provider_outage_is_waited_out_within_the_budget() -> None:
    clock = FakeClock()
    heard: list[str | None] = []
    script = [{"fault": "http", "status": 503}] * 12 + ["back"]
    with ReplayServer(script) as server:
        completion = make_client(server, clock, max_retries=2, outage_budget_s=300).complete(
            MESSAGES, on_outage=heard.append)
    assert completion.text == "back" and completion.attempts == 13
    assert max(clock.sleeps) <= 10.0  # polled at least every backoff_max_s
    assert 30 < sum(clock.sleeps) < 300
    assert completion.latency_ms == pytest.approx(sum(clock.sleeps) * 1000, rel=0.01)
    # Told once when the ordinary retries were spent and the call kept waiting, and once when it ended.
    assert heard == ["HTTP 503: " + json.dumps({"error": {"message": "scripted HTTP 503", "type": "server_error",
                                                          "code": None}}), None]


def test_an_outage_longer_than_the_budget_fails_the_call_saying_so() -> None:
    clock = FakeClock()
    heard: list[str | None] = []
    with pytest.raises(LLMError, match=r"after \d+ attempts \(\d+ s of provider outage\): connection error") as info:
        make_client(refused_url(), clock, max_retries=3, outage_budget_s=60).complete(MESSAGES, on_outage=heard.append)
    waited = sum(clock.sleeps)
    assert waited == pytest.approx(60)  # the budget, its last wait cut to it
    assert info.value.attempts > 8
    assert heard[0].startswith("connection error") and heard[-1] is None


def test_an_outage_wait_ends_at_the_session_deadline() -> None:
    clock = FakeClock()
    with ReplayServer([{"fault": "http", "status": 502}] * 40) as server:
        client = make_client(server, clock, outage_budget_s=300).bounded(clock() + 25)
        with pytest.raises(LLMError, match="session time limit.*HTTP 502"):
            client.complete(MESSAGES)
    assert sum(clock.sleeps) == pytest.approx(25)


def test_the_gate_is_held_for_each_attempt_and_never_while_waiting() -> None:
    clock = FakeClock()
    held = 0
    entered = 0

    @contextmanager
    def hold():
        nonlocal held, entered
        held += 1
        entered += 1
        try:
            yield
        finally:
            held -= 1

    def sleep(seconds: float) -> None:
        assert held == 0
        clock.sleep(seconds)

    script = [{"fault": "http", "status": 503}] * 5 + ["ok"]
    with ReplayServer(script) as server:
        client = LLMClient(LLMSettings(base_url=server.url, model="m", max_retries=1, outage_budget_s=300),
                           sleep=sleep, clock=clock)
        assert client.complete(MESSAGES, hold=hold).text == "ok"
    assert entered == 6 and held == 0 and len(clock.sleeps) == 5


def test_a_url_no_request_can_go_to_is_not_waited_out() -> None:
    for url in ("localhost:8000/v1", "ftp://host/v1", "http://host:port/v1"):
        clock = FakeClock()
        client = make_client(url, clock, outage_budget_s=300)  # building the client does not raise
        with pytest.raises(LLMError) as info:
            client.complete(MESSAGES)
        assert info.value.attempts == 1 and clock.sleeps == [], url


def test_a_provider_down_then_back_is_waited_out_in_real_time() -> None:
    with ReplayServer(["before", "after"]) as server:
        client = LLMClient(LLMSettings(base_url=server.url, model="m", max_retries=0, outage_budget_s=30,
                                       backoff_base_s=0.05, backoff_max_s=0.2))
        assert client.complete(MESSAGES).text == "before"
        server.go_down()
        timer = threading.Timer(1.0, server.come_back)
        timer.start()
        try:
            completion = client.complete(MESSAGES)  # its kept connection is dropped, new ones refused
        finally:
            timer.join()
    assert completion.text == "after" and completion.attempts > 1 and completion.latency_ms >= 900


# --- settings, keys, endpoints ---------------------------------------------------------------------------


def test_settings_from_env_reference_the_key_by_variable_name() -> None:
    env = {"OPENAI_BASE_URL": "http://llm:8000/v1", "OPENAI_API_KEY": "sk-secret", "OPENAI_MODEL": "qwen"}
    settings = LLMSettings.from_env(env, max_retries=5)
    assert (settings.base_url, settings.api_key, settings.model, settings.max_retries) == (
        "http://llm:8000/v1", None, "qwen", 5)
    assert settings.resolve_api_key(env) == "sk-secret"
    assert LLMSettings.from_env({}).base_url is None
    assert LLMSettings(api_key="sk-direct").resolve_api_key({}) == "sk-direct"


def test_settings_snapshot_never_holds_the_key() -> None:
    settings = LLMSettings(base_url="http://x/v1", api_key="sk-secret", prices=PRICES, max_concurrent=2,
                           outage_budget_s=42)
    snapshot = json.dumps(settings.to_dict())
    assert "sk-secret" not in snapshot and "sk-secret" not in repr(settings)
    restored = LLMSettings.from_dict(json.loads(snapshot))
    assert restored == LLMSettings(base_url="http://x/v1", prices=PRICES, max_concurrent=2, outage_budget_s=42)


def test_the_key_is_read_from_the_named_variable_and_sent_as_a_bearer_token(monkeypatch) -> None:
    monkeypatch.setenv("T2S_TEST_LLM_KEY", "sk-from-env")
    with ReplayServer(["ok", "ok"]) as server:
        LLMClient(LLMSettings(base_url=server.url, api_key_env="T2S_TEST_LLM_KEY", model="m")).complete(MESSAGES)
        LLMClient(LLMSettings(base_url=server.url, model="m")).complete(MESSAGES)
        with_key, without = server.chat_requests()
    assert with_key.headers["authorization"] == "Bearer sk-from-env"
    assert without.headers["authorization"] == "Bearer not-needed"  # local servers ignore it
    assert with_key.path == "/v1/chat/completions"


def test_max_concurrent_serialises_calls() -> None:
    with ReplayServer([{"text": "ok", "latency_ms": 150}] * 4) as server:
        client = make_client(server, max_concurrent=1)
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda _: client.complete(MESSAGES), range(4)))
        assert server.max_in_flight == 1


def test_with_settings_points_at_another_endpoint() -> None:
    with ReplayServer(["from b"]) as b:
        client = LLMClient(LLMSettings(base_url="http://127.0.0.1:9/v1", model="replay-model"))
        assert client.with_settings(base_url=b.url).complete(MESSAGES).text == "from b"


def test_a_call_through_an_http_proxy_reaches_it_unless_no_proxy_names_the_host(monkeypatch) -> None:
    # The replay server stands in for the proxy: it answers any path ending in /chat/completions, so it
    # receives the absolute URI a proxy is sent.
    with ReplayServer(["via the proxy"]) as proxy, ReplayServer(["direct"]) as direct:
        monkeypatch.setenv("HTTP_PROXY", f"http://{proxy.host}:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        completion = make_client("http://llm.invalid:8000/v1").complete(MESSAGES)
        (request,) = proxy.requests
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        bypassed = make_client(direct).complete(MESSAGES)
        assert len(proxy.requests) == 1
    assert completion.text == "via the proxy"
    assert request.path == "http://llm.invalid:8000/v1/chat/completions"
    assert bypassed.text == "direct"


def test_a_closed_client_refuses_calls() -> None:
    with ReplayServer(["a"]) as server:
        client = make_client(server, max_retries=0)
        client.complete(MESSAGES)
        client.close()
        with pytest.raises((LLMError, RuntimeError)):
            client.complete(MESSAGES)


def test_a_session_deadline_cuts_a_call_in_flight() -> None:
    with ReplayServer([{"text": "too late", "latency_ms": 3000}]) as server:
        client = LLMClient(LLMSettings(base_url=server.url, model="m", timeout_s=60)).bounded(time.monotonic() + 0.5)
        started = time.monotonic()
        with pytest.raises(LLMError, match="session time limit|timed out"):
            client.complete(MESSAGES)
    assert time.monotonic() - started < 2.5
