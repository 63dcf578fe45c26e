"""A provider outage in the middle of a run of real workers: the fake LLM refuses connections for 60 s, then
answers again. Every session waits it out (the outage budget, T2S_LLM_OUTAGE_BUDGET_S), shows that it is waiting
while it does, and the run is answered in full and scored without a restart.

Same harness as test_faults.py: the test's own PostgreSQL and Redis, a real worker process, the replay server.
"""

from __future__ import annotations

import time

import pytest

from tests.faults.test_faults import (  # noqa: F401 - the module's fixtures, used by name
    N,
    _stop,
    check_nothing_lost_or_repeated,
    deployment,
    pg_and_redis,
    start_run,
)

pytestmark = pytest.mark.faults

OUTAGE_S = 60
RECOVERY_BOUND_S = 45  # from the provider's return to the run scored


def test_a_60_second_provider_outage_is_waited_out_and_the_run_scored(deployment):  # noqa: F811
    run_id, server = start_run(deployment, latency_ms=300, concurrency=8)
    worker = deployment.worker(8).start()
    try:
        deployment.wait(lambda: deployment.statuses(run_id).get("answered", 0) >= 4, 90, "four answered sessions")
        server.go_down()
        down_at = time.monotonic()
        waiting = "SELECT count(*) FROM agent_agentsession WHERE waiting_for_llm_since IS NOT NULL"
        # Past its endpoint's retries (a few seconds), a session says it is waiting for the provider.
        deployment.wait(lambda: deployment.rows(waiting)[0][0] > 0, OUTAGE_S - 5, "a session waiting for the LLM")
        assert deployment.statuses(run_id).get("llm_error", 0) == 0
        time.sleep(max(0.0, down_at + OUTAGE_S - time.monotonic()))  # the outage lasts its 60 s
        assert deployment.statuses(run_id).get("llm_error", 0) == 0
        server.come_back()
        back_at = time.monotonic()
        deployment.wait(lambda: deployment.run_status(run_id) == "done", RECOVERY_BOUND_S, "the run to be scored")
        assert time.monotonic() - back_at < RECOVERY_BOUND_S
        check_nothing_lost_or_repeated(deployment, run_id, server, repeats_allowed=8)
        assert deployment.rows(waiting)[0][0] == 0  # no session says it still waits
        assert len(deployment.statuses(run_id)) == 1 and deployment.statuses(run_id)["answered"] == N
    finally:
        _stop(worker, server)
