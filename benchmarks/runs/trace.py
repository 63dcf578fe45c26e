"""Where a session's time goes in bench-runs' worker (``bench --trace``): wall and thread CPU per segment.

The worker records, per session, the moment (and the thread's CPU time) at which its message was received,
its task started, its lease was claimed, each LLM call passed the gate, went out over HTTP and came back,
each turn was stored and the run was told it finished (its dispatch pass). ``summary`` turns those marks into one line per
segment between consecutive marks (claimed -> gate is the session's set-up, http -> http the LLM call as the
worker saw it, store -> store a turn's storing), which says whether a session waits on the interpreter lock
(wall far above CPU) or spends CPU, and where. The wrappers replace private functions of the session
service and the LLM client: a benchmark's instrument, never imported by the app.
"""

from __future__ import annotations

import collections
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

Mark = tuple[float, str, Any, float]  # wall time, mark, session id, thread CPU time


def install(path: Path) -> None:
    """Wrap the marked functions in this process; the marks are written to ``path`` at worker shutdown."""
    from celery import signals

    from agent.llm import client, gate
    from agent.services import sessions
    from agent.services.leases import RUN_SESSION_TASK as SESSION_TASK
    from annotations.runs.services import dispatch

    marks: list[Mark] = []  # list.append is atomic: no lock on the hot path
    local = threading.local()

    def mark(kind: str, session_id: Any = None) -> None:
        marks.append((time.time(), kind, session_id if session_id is not None else getattr(local, "session", None),
                      time.thread_time()))

    def around(owner: Any, name: str, label: str, session_arg: bool = False) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if session_arg:
                local.session = args[0]
            mark(label + "0")
            try:
                return original(*args, **kwargs)
            finally:
                mark(label + "1")
        setattr(owner, name, wrapper)

    @signals.task_received.connect(weak=False)
    def received(request: Any = None, **kwargs: Any) -> None:
        if request.name == SESSION_TASK:
            marks.append((time.time(), "received", request.args[0], 0.0))

    @signals.task_prerun.connect(weak=False)
    def prerun(sender: Any = None, args: Any = None, **kwargs: Any) -> None:
        local.session = args[0] if sender.name == SESSION_TASK else None
        if local.session is not None:
            mark("prerun")

    around(sessions, "_claim", "claim", session_arg=True)
    around(sessions, "_store_turn", "store")
    around(dispatch, "run_session_finished", "notify")
    around(gate.GatedChatModel, "complete", "gate")
    around(client.LLMClient, "_attempt", "http")

    def dump(**kwargs: Any) -> None:
        path.write_text(json.dumps(marks))
    signals.worker_shutdown.connect(dump, weak=False)


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def summary(paths: Iterable[Path]) -> list[str]:
    """One line per segment (consecutive marks of a session), the largest total wall time first."""
    by_session: dict[Any, list[Mark]] = collections.defaultdict(list)
    for path in paths:
        if path.exists():
            for t, kind, session, cpu in json.loads(path.read_text()):
                if session is not None:
                    by_session[session].append((t, kind, session, cpu))
    wall: dict[str, list[float]] = collections.defaultdict(list)
    cpu: dict[str, list[float]] = collections.defaultdict(list)
    for marks in by_session.values():
        marks.sort()
        for (t0, k0, _, c0), (t1, k1, _, c1) in itertools.pairwise(marks):
            if k0 == "received" or k1 == "received":  # the message's wait: other threads' clocks
                if (k0, k1) == ("received", "prerun"):
                    wall["received -> prerun"].append(t1 - t0)
                continue
            if k1 == "prerun":  # a retried task: from the last mark of the previous attempt
                continue
            key = f"{k0} -> {k1}"
            wall[key].append(t1 - t0)
            cpu[key].append(c1 - c0)
    per_session = [sum(c1 - c0 for (_, k0, _, c0), (_, k1, _, c1) in itertools.pairwise(sorted(marks))
                       if "received" not in (k0, k1) and k1 != "prerun") for marks in by_session.values()]
    lines = []
    if per_session:
        lines.append(f"   worker thread CPU per session: p50 {1000 * _pct(per_session, 0.5):.1f} ms, "
                     f"p90 {1000 * _pct(per_session, 0.9):.1f} ms ({len(per_session)} sessions)")
    lines += [f"   {'segment':22s} {'n':>5s}  wall p50 / p90 / max (ms)   thread CPU p50 / p90 (ms)"]
    for key, values in sorted(wall.items(), key=lambda item: -sum(item[1])):
        spent = cpu.get(key)
        cpu_text = f"{1000 * _pct(spent, 0.5):7.2f} / {1000 * _pct(spent, 0.9):6.2f}" if spent else "      -"
        lines.append(f"   {key:22s} {len(values):5d}  {1000 * _pct(values, 0.5):8.1f} / {1000 * _pct(values, 0.9):7.1f}"
                     f" / {1000 * max(values):7.1f}      {cpu_text}")
    return lines
