"""Writing one section of benchmarks/results/tools.md without touching the others."""

from __future__ import annotations

import platform
import re
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results" / "tools.md"
_HEADER = ("# Tools: quality and speed\n\n"
           "Written by `python -m benchmarks.tools.eval_quality` (quality) and "
           "`python -m benchmarks.tools.bench` (speed); each rewrites only its own section.\n")


def machine() -> str:
    import os

    mem = ""
    try:
        kb = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal")).split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}, " \
           f"SQLite {__import__('sqlite3').sqlite_version}"


def stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def write_section(name: str, body: str, path: Path = RESULTS) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else _HEADER
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{body.rstrip()}\n{end}"
    if start in text and end in text:
        text = re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _m: block, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def table(header: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)
