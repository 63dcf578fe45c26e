"""Text-to-SQL strategies behind one interface; the registry maps a name to its class.

Adding a strategy is a module defining a ``Strategy`` subclass and a line in ``STRATEGIES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import (
    OnTurn,
    Outcome,
    SessionContext,
    ShouldCancel,
    Status,
    Strategy,
    Totals,
    TurnKind,
    TurnRecord,
    never_cancel,
)
from .dart_sql import DartSQL
from .exemplars import TrajectoryFormatError, parse_trajectory, render_trajectory
from .hdsp import HDSP
from .interactive_t2s import InteractiveT2S, InteractiveT2SConfig, is_probe
from .parsing import Action, ActionParseError, ParsedStep, parse_action, parse_step
from .prompt import (
    Exemplar,
    FewShot,
    Step,
    build_messages,
    estimate_message_tokens,
    estimate_tokens,
    follow_up_question,
    schema_text,
    tool_description,
)
from .scl_sql import SCLSQL

STRATEGIES: dict[str, type[Strategy]] = {
    InteractiveT2S.name: InteractiveT2S,
    DartSQL.name: DartSQL,
    HDSP.name: HDSP,
    SCLSQL.name: SCLSQL,
}


def get_strategy_class(name: str) -> type[Strategy]:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"Unknown strategy {name!r}; expected one of {', '.join(sorted(STRATEGIES))}") from None


def create_strategy(name: str, config: Mapping[str, Any] | None = None) -> Strategy:
    """A strategy instance from its registry name and a config snapshot (``config.to_dict()``)."""
    return get_strategy_class(name).from_config_dict(config)


__all__ = [
    "STRATEGIES", "Action", "ActionParseError", "Exemplar", "FewShot", "TrajectoryFormatError", "parse_trajectory",
    "render_trajectory", "InteractiveT2S", "InteractiveT2SConfig", "OnTurn",
    "Outcome", "ParsedStep", "SessionContext", "ShouldCancel", "Status", "Step", "Strategy", "Totals", "TurnKind",
    "TurnRecord", "build_messages", "create_strategy", "estimate_message_tokens", "estimate_tokens",
    "follow_up_question", "get_strategy_class", "is_probe", "never_cancel", "parse_action", "parse_step", "schema_text",
    "tool_description",
]
