"""Bounds on anything that spends LLM money, from the endpoint's record and the settings, never from a request.

A session's options may choose a model the endpoint allows, fewer output tokens than the endpoint's ceiling,
fewer rounds than the configured ceiling, and add stop sequences (never remove the strategy's own). A run's
concurrency never exceeds the endpoint's ``max_concurrency``. An endpoint's key comes only from an environment
variable whose name the settings allow (default: names ending in ``_API_KEY``), so a record cannot make the app
send, say, the admin password as a bearer token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError

from agent.conf import agent_settings
from agent.models import api_key_env_allowed, check_api_key_env

__all__ = ["api_key_env_allowed", "bounded_options", "check_api_key_env", "run_concurrency"]


def bounded_options(options: Mapping[str, Any], *, endpoint, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` checked against the endpoint's record and the settings; ValidationError naming each excess.

    ``defaults``: the strategy's own config (its stop sequences are kept whatever the request says)."""
    options = dict(options)
    errors: list[str] = []
    model = options.get("model")
    if model not in (None, ""):
        allowed = {endpoint.model, *(getattr(endpoint, "allowed_models", None) or [])}
        if model not in allowed:
            errors.append(f"model {model!r} is not offered by endpoint {endpoint.name} "
                          f"(allowed: {', '.join(sorted(allowed))}).")
    ceiling = getattr(endpoint, "max_tokens", None) or agent_settings.MAX_TOKENS_CEILING
    if "max_tokens" in options and not _int_within(options["max_tokens"], 1, ceiling):
        errors.append(f"max_tokens must be a whole number from 1 to {ceiling} (endpoint {endpoint.name}).")
    rounds = agent_settings.MAX_ROUNDS_CEILING
    if "max_rounds" in options and not _int_within(options["max_rounds"], 1, rounds):
        errors.append(f"max_rounds must be a whole number from 1 to {rounds} (the paper uses 12).")
    if "stop" in options:
        stop = options["stop"]
        own = list(defaults.get("stop") or [])
        if not isinstance(stop, list | tuple) or not all(isinstance(s, str) and s for s in stop):
            errors.append("stop is a list of non-empty strings.")
        elif len(stop) > 8:
            errors.append("At most 8 stop sequences.")
        else:
            options["stop"] = [*own, *(s for s in stop if s not in own)]  # added to, never removed from
    if errors:
        raise ValidationError({"options": errors})
    return options


def run_concurrency(requested: int | None, *, endpoint) -> int:
    """A run's concurrency: what was asked, never more than the endpoint allows."""
    ceiling = max(1, endpoint.max_concurrency or 1)
    if requested is not None and requested > ceiling:
        raise ValidationError({"max_concurrency": [
            f"At most {ceiling} concurrent sessions on endpoint {endpoint.name} (its max_concurrency)."]})
    return requested or ceiling


def _int_within(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
