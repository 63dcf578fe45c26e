"""An endpoint's max_concurrency across every worker: slot leases in Redis or in the app database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from agent.llm import CallRefused, LLMClient, LLMSettings
from agent.models import LLMCallLease, LLMEndpoint
from agent.services import gates, llm_slots
from tests.conftest import redis_url_for_tests, service_unavailable
from tests.support.replay_server import ReplayServer

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
SLOW = {"text": "ok", "latency_ms": 150}


def redis_url() -> str:
    url = redis_url_for_tests()
    if url is None:
        service_unavailable("Redis (T2S_TEST_REDIS_URL or CELERY_BROKER_URL=redis://...)")
    try:
        llm_slots.RedisSlots(url).client.ping()
    except Exception:
        service_unavailable(f"Redis at {url}")
    return url


@pytest.fixture(params=["database", "redis"])
def slots(request):
    if request.param == "redis":
        return llm_slots.RedisSlots(redis_url())
    return llm_slots.DatabaseSlots()


def hammer(server: ReplayServer, calls: int, call) -> list[BaseException]:
    """``calls`` threads released together, each making one call through ``call(client)``."""
    client = LLMClient(LLMSettings(base_url=server.url, api_key="k", model="replay-model", max_retries=0))
    barrier = threading.Barrier(calls)
    errors: list[BaseException] = []

    def one() -> None:
        try:
            barrier.wait()
            call(client)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_the_server_never_sees_more_calls_at_once_than_the_slots(slots) -> None:
    key = f"slow-{uuid.uuid4().hex[:8]}"
    with ReplayServer([SLOW] * 10) as server:
        def call(client):
            with llm_slots.slot(key, 2, slots=slots, wait_s=120):
                client.complete([{"role": "user", "content": "hi"}])

        errors = hammer(server, 10, call)
        assert errors == []
        assert len(server.chat_requests()) == 10
        assert server.max_in_flight <= 2
    assert slots.holders(key) == 0  # every slot given back


def test_without_slots_the_same_load_overlaps() -> None:
    """The control for the test above: the replay server does see calls overlap when nothing bounds them."""
    with ReplayServer([{"text": "ok", "latency_ms": 400}] * 10) as server:
        errors = hammer(server, 10, lambda client: client.complete([{"role": "user", "content": "hi"}]))
        assert errors == [] and server.max_in_flight > 2


def test_sessions_calls_hold_the_endpoint_records_max_concurrency(transactional_db) -> None:
    with ReplayServer([SLOW] * 8) as server:
        LLMEndpoint.objects.create(name="two-at-once", base_url=server.url, model="replay-model",
                                   max_concurrency=2, api_key_env="OPENAI_API_KEY")
        snapshot = {"endpoint": "two-at-once", "model": "replay-model", "prices": {}}

        def call(client):
            gates.gated(client, user=None, llm_snapshot=snapshot).complete([{"role": "user", "content": "hi"}])

        assert hammer(server, 8, call) == []
        assert len(server.chat_requests()) == 8 and server.max_in_flight <= 2
    assert LLMCallLease.objects.count() == 0


def test_the_environment_endpoint_takes_its_limit_from_settings(db, settings) -> None:
    """The endpoint set by T2S_LLM_* variables has no record: T2S_LLM_MAX_CONCURRENCY bounds it, not the record
    field's default of 8 (which let a worker at concurrency 16 run only half its sessions' calls at once)."""
    settings.T2S = {**settings.T2S, "LLM_MAX_CONCURRENCY": 3}
    assert gates.endpoint_concurrency("environment") == 3
    with ReplayServer([SLOW] * 9) as server:
        snapshot = {"endpoint": "environment", "model": "replay-model", "prices": {}}

        def call(client):
            gates.gated(client, user=None, llm_snapshot=snapshot).complete([{"role": "user", "content": "hi"}])

        assert hammer(server, 9, call) == []
        assert server.max_in_flight <= 3  # (8 with the record field's default)
    LLMEndpoint.objects.create(name="environment", base_url="http://x", model="m", max_concurrency=5,
                               api_key_env="OPENAI_API_KEY")
    assert gates.endpoint_concurrency("environment") == 5  # a record of that name carries its own


def test_a_slot_is_given_back_when_the_call_fails(slots) -> None:
    key = f"fail-{uuid.uuid4().hex[:8]}"
    with ReplayServer([{"fault": "http", "status": 400}]) as server:
        client = LLMClient(LLMSettings(base_url=server.url, api_key="k", model="replay-model", max_retries=0))
        with pytest.raises(Exception, match="HTTP 400"), llm_slots.slot(key, 1, slots=slots):
            client.complete([{"role": "user", "content": "hi"}])
    assert slots.holders(key) == 0
    with llm_slots.slot(key, 1, slots=slots, wait_s=0):
        pass


def test_a_call_that_finds_no_free_slot_in_time_is_refused(slots) -> None:
    key = f"busy-{uuid.uuid4().hex[:8]}"
    with llm_slots.slot(key, 1, slots=slots), pytest.raises(CallRefused, match="all 1 concurrent calls"), \
            llm_slots.slot(key, 1, slots=slots, wait_s=0.2):
        pass


HOLDER = """
import sys, time, django
django.setup()
from agent.services import llm_slots
with llm_slots.slot(sys.argv[1], 1, ttl_s=float(sys.argv[2])) as token:
    print(token, flush=True)
    time.sleep(3600)
"""


def test_the_lease_of_a_killed_holder_expires_and_its_slot_is_taken_over(slots) -> None:
    """A real process takes the only slot and is killed with SIGKILL (no release, no more renewals)."""
    key = f"dead-{uuid.uuid4().hex[:8]}"
    env = _child_env(slots)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, key, "3"], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        dead_token = holder.stdout.readline().strip()
        assert dead_token, "the holder process did not take the slot"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    # The slot comes free once the dead lease runs out (3 s), never earlier than the holder's lease allows.
    with llm_slots.slot(key, 1, slots=slots, wait_s=120) as token:
        assert token != dead_token
        if isinstance(slots, llm_slots.DatabaseSlots):
            assert list(LLMCallLease.objects.filter(endpoint=key).values_list("token", flat=True)) == [token]
    assert slots.holders(key) == 0


CALLER = """
import sys, django
django.setup()
from agent.llm import LLMClient, LLMSettings
from agent.services import llm_slots
client = LLMClient(LLMSettings(base_url=sys.argv[2], api_key="k", model="replay-model", max_retries=0))
for _ in range(int(sys.argv[3])):
    with llm_slots.slot(sys.argv[1], 2, wait_s=300):
        client.complete([{"role": "user", "content": "hi"}])
print("done", flush=True)
"""


def test_separate_processes_share_the_slots(slots) -> None:
    """Four worker-like processes, three calls each, one endpoint allowing two calls at once."""
    key = f"procs-{uuid.uuid4().hex[:8]}"
    with ReplayServer([SLOW] * 12) as server:
        env = _child_env(slots)
        children = [subprocess.Popen([sys.executable, "-c", CALLER, key, server.url, "3"], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, text=True) for _ in range(4)]
        outputs = [c.communicate(timeout=600)[0] for c in children]
        assert [c.returncode for c in children] == [0, 0, 0, 0] and all("done" in o for o in outputs)
        assert len(server.chat_requests()) == 12
        assert server.max_in_flight <= 2
    assert slots.holders(key) == 0


def _child_env(slots) -> dict[str, str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "t2s_site.settings"}
    if isinstance(slots, llm_slots.RedisSlots):
        env["CELERY_BROKER_URL"] = redis_url()
    else:
        env.pop("CELERY_BROKER_URL", None)
        env["DATABASE_URL"] = _test_database_url()
    return env


def _test_database_url() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def test_leases_held_past_their_ttl_are_renewed_by_one_thread(slots) -> None:
    """Eight calls hold slots for over two leases' time: still held at the end, renewed by one thread, not eight."""
    key = f"renew-{uuid.uuid4().hex[:8]}"
    held, release = threading.Barrier(9), threading.Event()

    def hold() -> None:
        try:
            with llm_slots.slot(key, 8, slots=slots, ttl_s=0.9):
                held.wait()
                release.wait()
        finally:
            connection.close()

    threads = [threading.Thread(target=hold) for _ in range(8)]
    for t in threads:
        t.start()
    held.wait()
    try:
        time.sleep(2.0)  # more than two leases' time: renewed, or they would have run out
        assert slots.holders(key) == 8
        with pytest.raises(CallRefused):
            with llm_slots.slot(key, 8, slots=slots, wait_s=0):
                pass
        names = [t.name for t in threading.enumerate()]
        assert names.count("llm-slot-renewals") == 1
        assert not [n for n in names if n.startswith("llm-slot-") and n != "llm-slot-renewals"]
    finally:
        release.set()
        for t in threads:
            t.join()
    assert llm_slots._renewals.held() == 0
    time.sleep(0.5)  # a renewal round after the release brings no lease back
    assert slots.holders(key) == 0


def test_a_lease_that_vanished_is_no_longer_renewed(slots, caplog) -> None:
    key = f"gone-{uuid.uuid4().hex[:8]}"
    with llm_slots.slot(key, 1, slots=slots, ttl_s=0.6) as token:
        slots.release(key, token)  # as if it had run out while the call was stuck
        deadline = time.monotonic() + 10
        while llm_slots._renewals.held() and time.monotonic() < deadline:  # its next renewal finds it gone
            time.sleep(0.05)
        assert llm_slots._renewals.held() == 0
        assert slots.holders(key) == 0
    assert "expired while its call ran" in caplog.text
