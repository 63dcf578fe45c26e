"""Load the official evaluation scripts as oracles, unmodified, with run-time shims only.

- Spider test-suite: its parser calls ``nltk.word_tokenize``, which needs the
  punkt data (not available offline); we substitute nltk's
  ``TreebankWordTokenizer`` before the scripts are imported.
- BIRD mini-dev: ``evaluation_utils`` imports psycopg2 and pymysql for its
  PostgreSQL/MySQL modes; on SQLite they are never called, so empty stand-in
  modules are registered if the real ones are not installed.

The files under /work/shared are read-only references and are never edited.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

SHARED = Path(os.environ.get("T2S_SHARED_DIR", "/work/shared"))
OFFICIAL_DIR = SHARED / "reference" / "official_eval"
SPIDER_EVAL_DIR = OFFICIAL_DIR / "test-suite-sql-eval"
BIRD_EVAL_DIR = OFFICIAL_DIR / "bird-mini-dev"
SPIDER_DATA = SHARED / "data" / "spider_dev"

_SHIM = (
    "import nltk\n"
    "from nltk.tokenize import TreebankWordTokenizer\n"
    "nltk.word_tokenize = TreebankWordTokenizer().tokenize\n"
)


def shim_nltk() -> None:
    import nltk
    from nltk.tokenize import TreebankWordTokenizer

    nltk.word_tokenize = TreebankWordTokenizer().tokenize


def _import_from(directory: Path, *names: str) -> list[types.ModuleType]:
    path = str(directory)
    if path not in sys.path:
        sys.path.insert(0, path)
    return [importlib.import_module(n) for n in names]


def spider_modules() -> tuple[types.ModuleType, types.ModuleType, types.ModuleType]:
    """(evaluation, exec_eval, process_sql) of the test-suite evaluation, tokenizer shimmed."""
    shim_nltk()
    evaluation, exec_eval, process_sql = _import_from(SPIDER_EVAL_DIR, "evaluation", "exec_eval", "process_sql")
    return evaluation, exec_eval, process_sql


def bird_modules() -> tuple[types.ModuleType, types.ModuleType, types.ModuleType]:
    """(evaluation_ex, evaluation_f1, evaluation_ves) of BIRD mini-dev."""
    for name in ("psycopg2", "pymysql"):
        try:
            importlib.import_module(name)
        except ImportError:
            sys.modules[name] = types.ModuleType(name)
    ex, f1, ves = _import_from(BIRD_EVAL_DIR, "evaluation_ex", "evaluation_f1", "evaluation_ves")
    return ex, f1, ves


def private_database_copy(source: Path = SPIDER_DATA / "database") -> Path:
    """A throwaway copy of the Spider databases: the official code opens files read-write
    (and sqlite3.connect creates a missing file), so it never touches the shared copy."""
    target = Path(tempfile.mkdtemp(prefix="t2s-official-db-"))
    for db_dir in sorted(source.iterdir()):
        if db_dir.is_dir():
            (target / db_dir.name).mkdir()
            for f in db_dir.iterdir():
                if f.suffix == ".sqlite":
                    shutil.copy2(f, target / db_dir.name / f.name)
    return target


def run_spider_script(gold: Path, pred: Path, db_dir: Path) -> tuple[str, float]:
    """Run ``evaluation.py --etype exec`` as its authors do, in a subprocess; (stdout, seconds)."""
    code = _SHIM + (
        "import runpy, sys\n"
        f"sys.path.insert(0, {str(SPIDER_EVAL_DIR)!r})\n"
        f"sys.argv = ['evaluation.py', '--gold', {str(gold)!r}, '--pred', {str(pred)!r},"
        f" '--db', {str(db_dir)!r}, '--etype', 'exec']\n"
        f"runpy.run_path({str(SPIDER_EVAL_DIR / 'evaluation.py')!r}, run_name='__main__')\n"
    )
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tempfile.gettempdir(),
                          check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"official evaluation.py failed:\n{proc.stderr[-3000:]}")
    return proc.stdout, elapsed


def parse_script_scores(stdout: str) -> dict[str, tuple[int, float]]:
    """{level: (count, execution accuracy)} from the script's printed table."""
    levels: list[str] = []
    counts: list[int] = []
    accs: list[float] = []
    for line in stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "easy" and not levels:
            levels = parts
        elif parts[0] == "count" and not counts:
            counts = [int(x) for x in parts[1:]]
        elif parts[0] == "execution" and not accs:
            accs = [float(x) for x in parts[1:]]
    return {lv: (c, a) for lv, c, a in zip(levels, counts, accs, strict=False)}
