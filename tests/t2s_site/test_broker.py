"""The Redis transport keeps one command client per channel pool (t2s_site/broker.py)."""

from __future__ import annotations

import os
import uuid

import pytest
import redis
from django.conf import settings
from kombu import Connection

from t2s_site import broker
from t2s_site.celery import app
from tests.conftest import service_unavailable


@pytest.fixture
def redis_url() -> str:
    url = os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith("redis://"):
        service_unavailable("Redis (CELERY_BROKER_URL=redis://...)")
    try:
        redis.Redis.from_url(url).ping()
    except redis.RedisError:
        service_unavailable(f"Redis at {url}")
    return url


@pytest.fixture
def clients_built(monkeypatch) -> list[int]:
    built: list[int] = []
    original = redis.Redis.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counting)
    return built


def test_a_redis_broker_uses_the_transport(redis_url: str) -> None:
    assert settings.CELERY_BROKER_TRANSPORT == "t2s_site.broker:Transport"
    with app.connection_for_write() as connection:
        assert isinstance(connection.default_channel, broker.Channel)


def test_publishing_receiving_and_acking_build_no_client_per_message(redis_url: str, clients_built: list[int]) -> None:
    # kombu alone built one client per publish, per delivered message's bookkeeping and per ack: 3 x 20 here.
    name = f"t2s-broker-test-{uuid.uuid4().hex}"
    with Connection(redis_url, transport=broker.Transport) as connection:
        queue = connection.SimpleQueue(name)
        try:
            for i in range(20):
                queue.put({"n": i})
            received, tags = [], []
            for _ in range(20):
                message = queue.get(timeout=5)
                received.append(message.payload["n"])
                tags.append(message.delivery_tag)
                message.ack()
            assert received == list(range(20))
            channel = connection.default_channel
            assert not any(channel.client.hexists(channel.unacked_key, tag) for tag in tags)  # all acked
        finally:
            queue.clear()
            queue.close()
            connection.default_channel.queue_delete(name)
    assert len(clients_built) <= 4  # the command client, the poll's client, a pipeline's own


def test_a_channel_that_replaces_its_pool_gets_a_client_on_the_new_one(redis_url: str) -> None:
    with Connection(redis_url, transport=broker.Transport) as connection:
        channel = connection.default_channel
        first = channel._create_client()
        assert channel._create_client() is first
        channel._disconnect_pools()  # what a fork or a reconnect does
        second = channel._create_client()
        assert second is not first
        assert second.connection_pool is channel.pool
        assert second.ping()
