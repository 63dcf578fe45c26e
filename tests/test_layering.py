"""Every module of the two apps sits in a layer of the import contracts (`make lint` runs them).

A module outside every layer is checked by no layers contract: it could import views from a model, or
a service from a core, and `lint-imports` would stay green. New modules must be placed.
"""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXEMPT_PARTS = {"migrations", "commands"}  # migrations, and management commands (placed as agent.management)


def _layered_modules() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    named: set[str] = set()
    for contract in config:
        if contract["type"] == "layers":
            for layer in contract["layers"]:
                named.update(m.strip() for m in re.split(r"[:|]", layer))
    return named


def _modules(app: str) -> list[str]:
    out = []
    for path in sorted((ROOT / app).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        if EXEMPT_PARTS & set(rel.parts) or rel.name == "__init__":
            continue
        out.append(".".join(rel.parts))
    return out


def test_every_app_module_is_in_a_layer():
    named = _layered_modules()
    unplaced = [m for app in ("agent", "annotations") for m in _modules(app)
                if not any(m == n or m.startswith(n + ".") for n in named)]
    assert unplaced == [], f"place these in a layers contract of pyproject.toml: {unplaced}"
