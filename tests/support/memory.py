"""Peak memory of the test process around one step: the kernel's high-water mark, reset before the step.

``/proc/self/clear_refs`` with "5" resets VmHWM to the current RSS (Linux), so the growth is what the step
itself added at its peak, not what earlier tests left behind."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


def status_bytes(field: str, pid: int | str = "self") -> int:
    """A size field of /proc/<pid>/status (VmRSS, VmHWM...) in bytes; this process by default."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/self/status")


def reset_peak() -> int:
    """Reset VmHWM to the current RSS; returns that RSS (bytes)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return status_bytes("VmRSS")


def peak_growth(before: int) -> int:
    """Peak RSS since ``reset_peak()`` returned ``before``, minus ``before`` (bytes)."""
    return status_bytes("VmHWM") - before


@contextmanager
def measured() -> Iterator[dict[str, float]]:
    """Yields a dict filled on exit with ``rss_growth`` (peak RSS during the block minus RSS before, bytes)
    and ``seconds``."""
    before = reset_peak()
    out: dict[str, float] = {}
    started = time.monotonic()
    try:
        yield out
    finally:
        out["seconds"] = time.monotonic() - started
        out["rss_growth"] = peak_growth(before)
