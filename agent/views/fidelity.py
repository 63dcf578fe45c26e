from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agent.forms import STRATEGY_LABELS
from agent.strategies import STRATEGIES

PAPERS = {
    "interactive_t2s": "papers/interactive-t2s.txt",
    "dart_sql": "papers/dart-sql-rewriting-refinement.txt",
    "scl_sql": "papers/scl-sql-self-contrastive-loop.txt",
    "hdsp": "papers/hdsp-sql-quality-measurement.txt",
}


def fidelity(request: HttpRequest) -> HttpResponse:
    """Per strategy: what follows its paper and what differs (each strategy module's FIDELITY)."""
    strategies = []
    for name, cls in STRATEGIES.items():
        lists = getattr(cls, "fidelity", None) or {}
        strategies.append({
            "name": name, "label": STRATEGY_LABELS.get(name, name), "paper": PAPERS.get(name, ""),
            "as_in_paper": lists.get("as_in_paper", ()), "differs": lists.get("differs", ()),
            "substitutions": getattr(cls, "substitutions", "") if not lists else "",
            "defaults": cls.config_class().to_dict(), "needs_pool": cls.needs_pool,
        })
    return render(request, "agent/fidelity.html", {"strategies": strategies, "section": "fidelity"})
