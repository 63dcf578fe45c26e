"""A dataset of any size built on the spot (no ../shared): one small SQLite database and N count questions.

Used by the run tests, the fault tests and ``make bench-runs``. Every question's gold query is
``SELECT count(*) FROM item WHERE grp = k``, so the replay server can answer each question with its own
gold query and the whole run scores 100 %.
"""

from __future__ import annotations

import json
import sqlite3
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


def replay_script(n: int, *, rounds: int = 2, latency_ms: int = 0, spare: int = 0) -> dict:
    """A keyed replay script: per question, ``rounds - 1`` ExecuteSQL steps of its gold query, then Done.

    ``spare`` more Done steps follow, for fault tests: a call lost in flight is asked again and gets the next
    step, so a session that lost calls still ends with Done instead of an exhausted script.
    """
    scripts = {}
    for i in range(n):
        q, sql = question(i)
        # Each step's text differs: two identical outputs in a row would end the case (the loop rule).
        steps = [{"text": f'Thought: count, step {k}\nAction: ExecuteSQL("{sql}")', "latency_ms": latency_ms}
                 for k in range(max(1, rounds - 1))]
        scripts[q] = [*steps, *[{"text": "Thought: ok\nAction: Done", "latency_ms": latency_ms}] * (1 + spare)]
    return {"scripts": scripts}
