"""The app's settings come from one place (agent/conf.py, annotations/conf.py); the environment variables the
README names override them, read by t2s_site/settings.py in a process started as a deployment starts one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READ = """
import json, django
django.setup()
from django.conf import settings
from agent.conf import agent_settings as a
from annotations.conf import annotations_settings as n
print(json.dumps({"T2S": sorted(settings.T2S), "LLM_BASE_URL": a.LLM_BASE_URL, "LLM_MODEL": a.LLM_MODEL,
                  "LLM_MAX_CONCURRENCY": a.LLM_MAX_CONCURRENCY, "LLM_OUTAGE_BUDGET_S": a.LLM_OUTAGE_BUDGET_S,
                  "UPLOAD_MAX_DATABASE_BYTES": a.UPLOAD_MAX_DATABASE_BYTES, "DEFAULT_ROLES": a.DEFAULT_ROLES,
                  "DATA_DIRS": [str(p) for p in a.DATA_DIRS], "INDEX_DIR": str(a.INDEX_DIR),
                  "DSN_KEY_FILE": str(a.DSN_KEY_FILE), "GOLD_CACHE_DIR": str(n.GOLD_CACHE_DIR),
                  "DAILY_TOKEN_BUDGET": a.DAILY_TOKEN_BUDGET}))
"""


def read_settings(tmp_path: Path, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith("T2S_") and k not in ("OPENAI_BASE_URL",)}
    done = subprocess.run([sys.executable, "-c", READ], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**base, "DJANGO_SETTINGS_MODULE": "t2s_site.settings", "T2S_VAR_DIR": str(tmp_path),
                               **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_environment_variables_reach_the_apps_settings(tmp_path: Path) -> None:
    got = read_settings(tmp_path, OPENAI_BASE_URL="http://llm:8000/v1", T2S_LLM_MODEL="qwen",
                        T2S_LLM_MAX_CONCURRENCY="24", T2S_LLM_OUTAGE_BUDGET_S="45", T2S_UPLOAD_MAX_DATABASE_MB="3",
                        T2S_DEFAULT_ROLES="Viewer, Annotator", T2S_DATA_DIRS=f"/srv/a{os.pathsep}/srv/b",
                        T2S_DAILY_TOKEN_BUDGET="")
    assert (got["LLM_BASE_URL"], got["LLM_MODEL"], got["LLM_MAX_CONCURRENCY"]) == ("http://llm:8000/v1", "qwen", 24)
    assert got["LLM_OUTAGE_BUDGET_S"] == 45.0
    assert got["UPLOAD_MAX_DATABASE_BYTES"] == 3 * 1024 * 1024
    assert got["DEFAULT_ROLES"] == ["Viewer", "Annotator"]
    assert got["DATA_DIRS"] == ["/srv/a", "/srv/b"]
    assert got["DAILY_TOKEN_BUDGET"] == 2_000_000  # empty: the default, a bounded one


def test_without_variables_the_apps_defaults_apply_under_the_var_dir(tmp_path: Path) -> None:
    got = read_settings(tmp_path)
    assert got["T2S"] == []  # settings.py holds only what the environment overrides
    assert (got["LLM_BASE_URL"], got["LLM_MODEL"], got["LLM_MAX_CONCURRENCY"]) == ("", "", 64)
    assert got["LLM_OUTAGE_BUDGET_S"] == 300.0
    assert got["DEFAULT_ROLES"] == ["Viewer", "Asker"]
    assert got["INDEX_DIR"] == str(tmp_path / "indexes")
    assert got["DATA_DIRS"] == [str(tmp_path / "uploads")]
    assert got["DSN_KEY_FILE"] == str(tmp_path / "dsn_key")
    assert got["GOLD_CACHE_DIR"] == str(tmp_path / "gold-cache")
