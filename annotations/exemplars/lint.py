"""Checks on an exemplar: actions parse, observations still match the tools (drift), the final SQL runs.

``lint_steps`` is plain Python over ``Step`` objects and a tool runner, so it
works on an exemplar being authored, a stored one, or a published snapshot;
``lint_exemplar`` opens the exemplar's registered database's tools around it.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent import services as agent_services
from agent.sql import Connector, QueryResult, SQLError
from agent.strategies.parsing import ActionParseError, parse_action
from agent.strategies.prompt import Step
from agent.tools import IndexMissing
from agent.tools.base import ToolRunner
from annotations.models import Exemplar

from . import selectors


@dataclass(frozen=True)
class StepCheck:
    position: int
    action: str
    parse_error: str | None = None
    drift_checked: bool = False
    drift: tuple[str, ...] = ()  # unified diff lines: stored observation -> today's observation
    today: str | None = None

    @property
    def drifted(self) -> bool:
        return bool(self.drift)


@dataclass(frozen=True)
class LintReport:
    steps: tuple[StepCheck, ...]
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    step_count: int
    token_estimate: int
    drift_checked: bool
    drift_unavailable: str | None = None  # why drift was not checked
    final_sql_ok: bool | None = None  # None: not checked
    final_sql_error: str | None = None
    final_result: QueryResult | None = field(default=None, compare=False)
    final_sql_unchecked: str | None = None  # why the final SQL was not executed, in words

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def drift_count(self) -> int:
        return sum(1 for s in self.steps if s.drifted)


def observation_diff(stored: str | None, today: str | None) -> tuple[str, ...]:
    """Empty when equal (ignoring surrounding whitespace), else a unified diff."""
    if (stored or "").strip() == (today or "").strip():
        return ()
    return tuple(difflib.unified_diff((stored or "").strip().splitlines(), (today or "").strip().splitlines(),
                                      "stored observation", "today", lineterm=""))


def lint_steps(steps: Sequence[Step], *, final_sql: str | None, runner: ToolRunner | None = None,
               connector: Connector | None = None, token_estimate: int = 0,
               drift_unavailable: str | None = None) -> LintReport:
    """Check a trajectory; with a ``runner`` re-run each tool for drift, with a ``connector`` run the final SQL."""
    checks: list[StepCheck] = []
    errors: list[str] = []
    warnings: list[str] = []
    for i, step in enumerate(steps):
        n = i + 1
        try:
            action = parse_action(step.action)
        except ActionParseError as exc:
            checks.append(StepCheck(i, step.action, parse_error=str(exc)))
            errors.append(f"Step {n}: the action does not parse: {exc}")
            continue
        if action.is_done:
            if i != len(steps) - 1:
                errors.append(f"Step {n}: Done must be the last step.")
            checks.append(StepCheck(i, step.action))
            continue
        if step.observation is None:
            errors.append(f"Step {n}: {action.name} has no observation (run it).")
        if runner is None:
            checks.append(StepCheck(i, step.action))
            continue
        today = runner.run(action.name, list(action.args), dict(action.kwargs)).observation
        diff = observation_diff(step.observation, today)
        if diff:
            warnings.append(f"Step {n}: the observation differs from what {action.name} returns today.")
        checks.append(StepCheck(i, step.action, drift_checked=True, drift=diff, today=today))
    if not steps:
        warnings.append("No steps: the prompt shows only the question.")
    elif not checks[-1].parse_error and not _is_done(steps[-1].action):
        warnings.append("The trajectory does not end with Done.")

    final_ok: bool | None = None
    final_error: str | None = None
    final_result: QueryResult | None = None
    unchecked: str | None = None
    if not (final_sql or "").strip():
        errors.append("No final SQL.")
        ends_with_done = bool(steps) and _is_done(steps[-1].action)
        unchecked = ("Not executed: there is no final SQL." if ends_with_done else
                     "Not executed: there is no final SQL yet; it is the query the trajectory's last ExecuteSQL "
                     "ran, set when a Done step ends it.")
    elif connector is None:
        unchecked = f"Not executed: {drift_unavailable.rstrip('.')}." if drift_unavailable else "Not executed."
    else:
        try:
            final_result = connector.execute(final_sql)
            final_ok = True
        except SQLError as exc:
            final_ok, final_error = False, str(exc)
            errors.append(f"The final SQL does not execute: {exc}")
    return LintReport(tuple(checks), tuple(errors), tuple(warnings), len(steps), token_estimate,
                      drift_checked=runner is not None, drift_unavailable=drift_unavailable,
                      final_sql_ok=final_ok, final_sql_error=final_error, final_result=final_result,
                      final_sql_unchecked=unchecked)


def _is_done(action_text: str) -> bool:
    try:
        return parse_action(action_text).is_done
    except ActionParseError:
        return False


def lint_exemplar(exemplar: Exemplar, *, check_drift: bool = True) -> LintReport:
    """Lint a stored exemplar against its registered database (drift and final SQL need one)."""
    steps = [Step(s.thought, s.action, s.observation) for s in selectors.exemplar_steps(exemplar)]
    tokens = selectors.exemplar_token_estimate(exemplar)
    database = exemplar.database
    if database is None:
        why = (f"{exemplar.source_database!r} is not a registered database here" if exemplar.source_database
               else "the exemplar has no database")
        return lint_steps(steps, final_sql=exemplar.final_sql, token_estimate=tokens,
                          drift_unavailable=f"Not checked against a database: {why}.")
    if not check_drift:
        try:
            connector = agent_services.open_connector(database)
        except SQLError as exc:
            return lint_steps(steps, final_sql=exemplar.final_sql, token_estimate=tokens,
                              drift_unavailable=f"{database.name} cannot be opened: {exc}")
        try:
            return lint_steps(steps, final_sql=exemplar.final_sql, connector=connector, token_estimate=tokens,
                              drift_unavailable="Drift not checked.")
        finally:
            connector.close()
    try:
        toolbox = agent_services.toolbox_for(database)
    except (IndexMissing, SQLError) as exc:
        return lint_steps(steps, final_sql=exemplar.final_sql, token_estimate=tokens,
                          drift_unavailable=f"The tools of {database.name} are not ready: {exc}")
    with toolbox:
        return lint_steps(steps, final_sql=exemplar.final_sql, runner=toolbox, connector=toolbox.connector,
                          token_estimate=tokens)
