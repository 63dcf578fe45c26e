"""Read and write exemplar trajectories in the text format of the paper's release.

A trajectory file looks like this (``#`` lines and any preamble before the
first label are skipped; a field runs until the next labelled line, so observations and triple-quoted SQL can span
several lines)::

    # {"db_id": "activity_1", ...}
    Q: Which ...?
    Evidence: ...            (optional)
    Thought: ...
    Action: SearchValue("Soccer")
    Observation: [...]
    ...
    Action: Done

The schema lives in a separate file (``schema.txt``), passed in as text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .parsing import ActionParseError, parse_action
from .prompt import Exemplar, Step

_LABEL = re.compile(r"^(Q|Evidence|Thought|Action|Observation):[ \t]?(.*)$")


class TrajectoryFormatError(ValueError):
    """The text is not a trajectory; the message says which line."""


def parse_trajectory(text: str, *, schema_text: str) -> Exemplar:
    fields: dict[str, list[str]] = {}
    steps: list[dict[str, list[str]]] = []
    current: list[str] | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            continue
        match = _LABEL.match(line)
        if match is None:
            if current is not None:  # text before the first label is a preamble (e.g. "-- START --")
                current.append(line)
            continue
        label, rest = match.groups()
        if label in ("Q", "Evidence"):
            if steps:
                raise TrajectoryFormatError(f"line {lineno}: {label}: after the first step")
            current = fields.setdefault(label, [])
        elif label == "Thought" or not steps or label in steps[-1] or (
                label == "Observation" and "Action" not in steps[-1]):
            # A new step starts at a Thought, or when the current step already has this field.
            steps.append({})
            current = steps[-1].setdefault(label, [])
        else:
            current = steps[-1].setdefault(label, [])
        current.append(rest)

    question = _joined(fields.get("Q"))
    if not question:
        raise TrajectoryFormatError("no 'Q:' line")
    out: list[Step] = []
    for i, s in enumerate(steps, 1):
        action = _joined(s.get("Action"))
        if not action:
            raise TrajectoryFormatError(f"step {i} has no Action")
        observation = s.get("Observation")
        out.append(Step(_joined(s.get("Thought")), action, None if observation is None else _joined(observation)))
    if not out:
        raise TrajectoryFormatError("no steps")
    return Exemplar(schema_text=schema_text.strip(), question=question, evidence=_joined(fields.get("Evidence")) or None,
                    steps=tuple(out), final_sql=_final_sql(out))


RunTool = Callable[[str, Sequence[Any], Mapping[str, Any]], str]


def rerendered(exemplar: Exemplar, run: RunTool) -> Exemplar:
    """The exemplar with every tool step's observation produced again by ``run`` (the tool on the exemplar's
    database, in the session's observation profile), so the examples show the format the model will get."""
    return rewritten(exemplar, lambda name, args, kwargs, _stored: run(name, args, kwargs))


Rewrite = Callable[[str, Sequence[Any], Mapping[str, Any], str], str]


def rewritten(exemplar: Exemplar, rewrite: Rewrite) -> Exemplar:
    """The exemplar with every tool step's observation replaced by ``rewrite(name, args, kwargs, stored)``."""
    steps = []
    for step in exemplar.steps:
        try:
            action = parse_action(step.action)
        except ActionParseError:
            steps.append(step)
            continue
        if action.is_done or step.observation is None:
            steps.append(step)
            continue
        steps.append(Step(step.thought, step.action,
                          rewrite(action.name, action.args, dict(action.kwargs), step.observation)))
    return Exemplar(exemplar.schema_text, exemplar.question, exemplar.evidence, tuple(steps), exemplar.final_sql)


def render_trajectory(exemplar: Exemplar, *, with_evidence: bool = True) -> str:
    """The inverse of ``parse_trajectory`` (without comments or schema)."""
    lines = [f"Q: {exemplar.question}"]
    if with_evidence and exemplar.evidence:
        lines.append(f"Evidence: {exemplar.evidence}")
    for step in exemplar.steps:
        if step.thought:
            lines.append(f"Thought: {step.thought}")
        lines.append(f"Action: {step.action}")
        if step.observation is not None:
            lines.append(f"Observation: {step.observation}")
    return "\n".join(lines)


def _joined(parts: list[str] | None) -> str:
    return "\n".join(parts).strip() if parts else ""


def _final_sql(steps: list[Step]) -> str | None:
    """The last ExecuteSQL whose observation is not an error, as the agent's rule would pick it."""
    for step in reversed(steps):
        try:
            action = parse_action(step.action)
        except ActionParseError:
            continue
        if action.name != "ExecuteSQL":
            continue
        if step.observation and step.observation.lstrip().lower().startswith("error"):
            continue
        sql = action.args[0] if action.args else action.kwargs.get("sql", action.kwargs.get("query"))
        if isinstance(sql, str):
            return sql.strip()
    return None
