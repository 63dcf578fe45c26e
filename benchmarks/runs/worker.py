"""A Celery worker that also samples itself, for ``make bench-runs``.

``python -m benchmarks.runs.worker STATS_FILE <celery worker arguments>``: the real worker, with the
dispatcher's entry points (``run_dispatch``, a pass, and ``run_session_finished``, a finished session's, which
includes finding the session's run) wrapped to add up the CPU time of the threads running them, and a thread
writing one JSON line per second to STATS_FILE: the process's CPU seconds, the consumer thread's (Celery's main
thread, which receives, hands out and acks messages), the dispatcher's, the number of calls and of passes, and
the resident set size. With ``T2S_BENCH_TRACE=FILE`` it also marks each session's steps (benchmarks/runs/trace.py).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from pathlib import Path


def _rss_mb() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _thread_cpu_s(native_id: int) -> float:
    with open(f"/proc/self/task/{native_id}/stat") as handle:
        fields = handle.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def main() -> None:
    stats_file, celery_args = sys.argv[1], sys.argv[2:]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "t2s_site.settings")
    import django

    django.setup()
    from annotations.runs.services import dispatch

    lock = threading.Lock()
    local = threading.local()
    dispatch_cpu = [0.0, 0, 0, 0]  # CPU seconds, calls, passes, (unused: kept for the samples' format)

    def timed(original, *, counts: int):
        # The signal's receiver and the poll look these up in the module at each call: wrapped here, they count.
        # A pass inside a finished session's call is counted once, in the outer call's CPU.
        def wrapper(**kwargs):
            depth = getattr(local, "depth", 0)
            local.depth = depth + 1
            started = time.thread_time()
            try:
                return original(**kwargs)
            finally:
                local.depth = depth
                with lock:
                    if not depth:
                        dispatch_cpu[0] += time.thread_time() - started
                        dispatch_cpu[1] += 1
                    dispatch_cpu[counts] += 1 if counts else 0
        return wrapper

    dispatch.run_dispatch = timed(dispatch.run_dispatch, counts=2)
    dispatch.run_session_finished = timed(dispatch.run_session_finished, counts=0)

    main_thread = threading.main_thread().native_id  # Celery's consumer: receives, hands out and acks messages

    def sample() -> None:
        with open(stats_file, "a") as out:
            while True:
                usage = resource.getrusage(resource.RUSAGE_SELF)
                with lock:
                    line = {"t": time.time(), "cpu_s": usage.ru_utime + usage.ru_stime,
                            "dispatch_cpu_s": dispatch_cpu[0], "dispatches": dispatch_cpu[1], "passes": dispatch_cpu[2],
                            "skipped": dispatch_cpu[3], "rss_mb": _rss_mb(), "consumer_cpu_s": _thread_cpu_s(main_thread)}
                out.write(json.dumps(line) + "\n")
                out.flush()
                time.sleep(1)

    threading.Thread(target=sample, daemon=True, name="bench-sampler").start()
    if os.environ.get("T2S_BENCH_TRACE"):
        from benchmarks.runs import trace

        trace.install(Path(os.environ["T2S_BENCH_TRACE"]))
    from celery.__main__ import main as celery_main

    sys.argv = ["celery", *celery_args]
    celery_main()


if __name__ == "__main__":
    main()
