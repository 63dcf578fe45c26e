"""Celery's Redis transport, with one Redis client per channel pool for the commands it sends outside the poll.

kombu builds a new ``redis.Redis`` for each of those commands: a delivered message's bookkeeping
(``QoS.append``), its ack, every publish. Building one fills redis-py's table of some 200 response callbacks:
about 0.15 ms of CPU on a quiet core, several times that in a worker whose 64 threads share the interpreter
lock, and a worker's consumer thread paid it twice for every message it handed to a session. A client holds no
connection of its own (each command takes one from the channel's pool and gives it back), so one client per
pool serves every thread; a channel that replaces its pool (after a fork, or a reconnect) gets a new one.
The blocking reads (BRPOP, LISTEN) keep kombu's own client on their own pool.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    _command_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)
        client = self._command_client
        if client is None or client.connection_pool is not self.pool:
            client = self._command_client = super()._create_client()
        return client


class Transport(kombu_redis.Transport):
    Channel = Channel
