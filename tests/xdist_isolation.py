"""What each pytest-xdist worker (``make test`` runs several) keeps to itself, set before Django reads its settings.

Loaded with ``-p tests.xdist_isolation`` (pyproject's addopts): a conftest would come too late, pytest-django
imports the settings before any conftest. Outside xdist it does nothing. pytest-django already gives each
worker its own test database (``test_<name>_gw0`` ...); here each worker also gets:

- its own ``T2S_VAR_DIR`` (SQLite broker and app database, file cache, secret key, beat schedule), since
  tests purge the broker and clear the cache;
- its own Redis server when the broker is Redis: queue names and the LLM slot keys are global to a Redis
  database, and a worker's ``purge_broker()`` must not drop another worker's messages. It is the same
  ``redis-server`` as the configured one, on a free port, stopped when the worker exits.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path

WORKER = os.environ.get("PYTEST_XDIST_WORKER")


def _isolate(worker: str) -> None:
    base = os.environ.get("T2S_VAR_DIR") or str(Path(__file__).resolve().parents[1] / "var")
    var_dir = Path(base) / "xdist" / worker
    var_dir.mkdir(parents=True, exist_ok=True)
    os.environ["T2S_VAR_DIR"] = str(var_dir)
    if os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"):
        from tests.support.private_services import PrivateRedis, redis_bin

        if redis_bin() is None:
            raise RuntimeError("parallel tests on a Redis broker need redis-server (one per worker); "
                               "run with -n 0 to share the configured Redis")
        redis = PrivateRedis().start()
        _servers.append(redis)
        atexit.register(redis.close)  # also when the worker ends without unconfiguring
        os.environ["CELERY_BROKER_URL"] = redis.url


_servers: list = []


def pytest_unconfigure(config) -> None:
    # execnet may end a worker with os._exit, which skips atexit: stop the worker's Redis here first.
    while _servers:
        _servers.pop().close()


if WORKER:
    _isolate(WORKER)
