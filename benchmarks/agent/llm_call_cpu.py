"""Thread CPU of one LLM call in the client (`python -m benchmarks.agent.llm_call_cpu`).

``LLMClient.complete()`` against the replay LLM server in a process of its own (its CPU is not counted),
timed with ``time.thread_time()`` per call: encoding, HTTP, decoding and the client's checks, what each call
costs the interpreter lock a worker's sessions share. ``--threads`` calls at once through one client.
Compare commits in alternation on a busy machine. No Django: the agent core only.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from agent.llm import LLMClient, LLMSettings, Message
from tests.support.replay_server import ReplayServerProcess

# About the size of a first call's prompt without exemplars (2.8 KB), a short completion.
MESSAGES = [Message("system", "You are terse. " * 200), Message("user", "How many singers are there? " * 20)]
COMPLETION = "Thought: count them\nAction: ExecuteSQL('SELECT COUNT(*) FROM singer')"
WARM_UP = 50


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    per_thread = args.calls // args.threads

    with ReplayServerProcess([COMPLETION] * (WARM_UP + per_thread * args.threads)) as server:
        client = LLMClient(LLMSettings(base_url=server.url, model="replay-model", max_retries=0))
        for _ in range(WARM_UP):
            client.complete(MESSAGES)

        def calls(_: int) -> list[float]:
            spent = []
            for _ in range(per_thread):
                started = time.thread_time()
                client.complete(MESSAGES)
                spent.append((time.thread_time() - started) * 1000)
            return spent

        with ThreadPoolExecutor(args.threads) as pool:
            cpu = sorted(ms for spent in pool.map(calls, range(args.threads)) for ms in spent)
        client.close()
    print(f"{len(cpu)} calls, {args.threads} thread(s): thread CPU per call p50 {statistics.median(cpu):.3f} ms, "
          f"mean {statistics.fmean(cpu):.3f}, p90 {cpu[int(len(cpu) * 0.9)]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
