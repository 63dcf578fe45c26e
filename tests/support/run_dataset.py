"""A dataset of any size built on the spot (no ../shared): one small SQLite database and N count questions.

Used by the run tests, the fault tests and ``make bench-runs``. Every question's gold query is
``SELECT count(*) FROM item WHERE grp = k``, so the replay server can answer each question with its own
gold query and the whole run scores 100 %.
"""

from __future__ import annotations

import json
import math
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path

DB_ID = "shop"


def question(i: int) -> tuple[str, str]:
    return f"How many items are in group {i}? (question {i})", f"SELECT count(*) FROM item WHERE grp = {i % 7}"


def write_dataset(root: Path, n: int) -> Path:
    """A JSONL dataset folder at ``root``: ``questions.jsonl`` and ``database/shop/shop.sqlite``; returns the file."""
    folder = root / "database" / DB_ID
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / f"{DB_ID}.sqlite"
    if not db.exists():
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, grp INTEGER)")
            conn.executemany("INSERT INTO item VALUES (?, ?, ?)", [(i, f"item {i}", i % 7) for i in range(200)])
        conn.close()
    path = root / "questions.jsonl"
    with path.open("w") as handle:
        for i in range(n):
            q, sql = question(i)
            handle.write(json.dumps({"question": q, "sql": sql, "database": DB_ID}) + "\n")
    return path


Latency = Callable[[int, int], float]  # (question, call) -> milliseconds


def lognormal_latency(*, median_ms: float = 2500, p90_ms: float = 8000, seed: int = 0) -> Latency:
    """LLM call latencies with a long tail, as providers show them (default: median 2.5 s, p90 8 s), drawn once per
    (question, call) from a generator seeded by ``seed`` and the pair: the same script every time."""
    sigma = math.log(p90_ms / median_ms) / 1.2815515655446004  # the standard normal's 90th percentile
    return lambda i, k: median_ms * math.exp(sigma * random.Random(f"{seed}:{i}:{k}").gauss(0.0, 1.0))


def replay_script(n: int, *, rounds: int = 2, latency_ms: float = 0, spare: int = 0,
                  latency: Latency | None = None) -> dict:
    """A keyed replay script: per question, ``rounds - 1`` ExecuteSQL steps of its gold query, then Done.

    Each call waits ``latency_ms``, or ``latency(question, call)`` when given (``lognormal_latency``).
    ``spare`` more Done steps follow, for fault tests: a call lost in flight is asked again and gets the next
    step, so a session that lost calls still ends with Done instead of an exhausted script.
    """
    delay = latency or (lambda i, k: latency_ms)
    scripts = {}
    for i in range(n):
        q, sql = question(i)
        # Each step's text differs: two identical outputs in a row would end the case (the loop rule).
        steps = [{"text": f'Thought: count, step {k}\nAction: ExecuteSQL("{sql}")', "latency_ms": delay(i, k)}
                 for k in range(max(1, rounds - 1))]
        done = max(1, rounds - 1)
        scripts[q] = [*steps, *[{"text": "Thought: ok\nAction: Done", "latency_ms": delay(i, done)}] * (1 + spare)]
    return {"scripts": scripts}


def session_latency_s(script: dict, i: int) -> float:
    """The LLM time of question ``i``'s session in ``script`` (its calls up to the first Done), in seconds."""
    total = 0.0
    for step in script["scripts"][question(i)[0]]:
        total += float(step.get("latency_ms") or 0) / 1000
        if step["text"].endswith("Action: Done"):
            break
    return total


def ideal_schedule_s(durations: list[float], concurrency: int) -> float:
    """The wall time of sessions of these durations started in order, each as soon as one of ``concurrency``
    slots is free, with no cost between them: what a perfect dispatcher achieves."""
    import heapq

    slots = [0.0] * max(1, concurrency)
    for duration in durations:
        heapq.heappush(slots, heapq.heappop(slots) + duration)
    return max(slots)
