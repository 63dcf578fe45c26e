"""Writes of exemplars and exemplar sets (views, commands and the importer call these).

Permission and state rules live here, not in the pages:
- anyone logged in authors exemplars; the author or a reviewer edits one;
- reviewers are staff users or holders of ``annotations.review_exemplar``;
- nobody approves their own exemplar, except a superuser, and that self-approval
  is recorded as such in the review comment (so a one-person install can still
  publish, and it shows);
- editing the content of an exemplar that is in review, approved or rejected
  returns it to draft (published versions keep their frozen copy);
- only approved exemplars are published into a set version; versions are
  immutable and numbered 1, 2, ... per set.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agent import services as agent_services
from agent.models import NAME_UNAVAILABLE, AgentSession, Database, Turn, Workspace
from agent.sql import SQLError
from agent.strategies.parsing import ActionParseError, parse_action
from agent.tools import IndexMissing
from annotations import policies
from annotations.models import Exemplar, ExemplarSet, ExemplarSetVersion, ExemplarStep

from . import selectors
from .lint import lint_exemplar

MAX_TAGS = 20


# --- permissions ------------------------------------------------------------------------------


# The rules live in annotations.policies; these names stay for the services' callers.
can_review = policies.can_review_exemplars
can_edit = policies.can_edit_exemplar
check_can_edit = policies.check_can_edit_exemplar
check_can_approve = policies.check_can_review_exemplar


# --- exemplar content -------------------------------------------------------------------------


def parse_tags(text: str | Sequence[str]) -> list[str]:
    items = text.split(",") if isinstance(text, str) else list(text)
    tags: list[str] = []
    for t in items:
        t = " ".join(str(t).split())[:50]
        if t and t not in tags:
            tags.append(t)
    return tags[:MAX_TAGS]


def _content_changed(exemplar: Exemplar) -> None:
    """An edit invalidates a review: back to draft."""
    if exemplar.state != Exemplar.State.DRAFT:
        exemplar.state = Exemplar.State.DRAFT
        exemplar.submitted_at = None
        exemplar.reviewer = None
        exemplar.reviewed_at = None
        exemplar.review_comment = ""
    exemplar.save()


def exemplar_create(*, user, database: Database | None, question: str, evidence: str = "", notes: str = "",
                    tags: Sequence[str] | str = (), source: str = "") -> Exemplar:
    question = (question or "").strip()
    if not question:
        raise ValidationError({"question": "Write the question."})
    if database is not None and database.status != Database.Status.READY:
        raise ValidationError({"database": f"{database.name} is not ready ({database.get_status_display()})."})
    return Exemplar.objects.create(
        database=database, question=question, evidence=(evidence or "").strip(), notes=notes or "",
        tags=parse_tags(tags), source=source, author=user if user is not None and user.is_authenticated else None)


def exemplar_update(*, exemplar: Exemplar, user, question: str, evidence: str, notes: str,
                    tags: Sequence[str] | str, final_sql: str | None = None) -> Exemplar:
    """Change the exemplar's own fields (``final_sql`` None: unchanged)."""
    check_can_edit(user, exemplar)
    question = (question or "").strip()
    if not question:
        raise ValidationError({"question": "Write the question."})
    new = {"question": question, "evidence": (evidence or "").strip(), "notes": notes or "", "tags": parse_tags(tags)}
    if final_sql is not None:
        new["final_sql"] = final_sql.strip()
    if all(getattr(exemplar, k) == v for k, v in new.items()):
        return exemplar
    for k, v in new.items():
        setattr(exemplar, k, v)
    _content_changed(exemplar)
    return exemplar


def exemplar_set_final_sql(*, exemplar: Exemplar, user, sql: str) -> Exemplar:
    check_can_edit(user, exemplar)
    sql = (sql or "").strip()
    if sql != exemplar.final_sql:
        exemplar.final_sql = sql
        _content_changed(exemplar)
    return exemplar


def _check_action(text: str) -> str:
    text = (text or "").strip()
    try:
        parse_action(text)
    except ActionParseError as exc:
        raise ValidationError({"action": str(exc)}) from None
    return text


def _mark_later_stale(exemplar: Exemplar, position: int) -> None:
    for step in exemplar.steps.filter(position__gt=position):
        if not step.is_done and step.observation is not None:
            step.stale = True
            step.save(update_fields=["stale"])


def step_add(*, exemplar: Exemplar, user, thought: str, action: str, run: bool = True) -> ExemplarStep:
    """Append a step; with ``run`` its tool runs now on the exemplar's database and fills the observation."""
    check_can_edit(user, exemplar)
    action = _check_action(action)
    if run and exemplar.database is None:
        raise ValidationError("This exemplar has no registered database, so its tools cannot run.")
    with transaction.atomic():
        last = exemplar.steps.aggregate(m=Max("position"))["m"]
        if last is not None and exemplar.steps.get(position=last).is_done:
            raise ValidationError({"action": "The trajectory already ends with Done; delete that step first."})
        step = ExemplarStep.objects.create(exemplar=exemplar, position=0 if last is None else last + 1,
                                           thought=(thought or "").strip(), action=action)
        _content_changed(exemplar)
    if step.is_done:
        _fill_final_sql(exemplar)
    elif run:
        step_run(step=step, user=user)
    return step


def step_update(*, step: ExemplarStep, user, thought: str, action: str) -> ExemplarStep:
    """Change a step; a changed action clears its observation (run it again) and makes later ones stale."""
    exemplar = step.exemplar
    check_can_edit(user, exemplar)
    action = _check_action(action)
    thought = (thought or "").strip()
    if thought == step.thought and action == step.action:
        return step
    with transaction.atomic():
        if action != step.action:
            step.observation, step.ok, step.ran_at, step.stale = None, None, None, False
            _mark_later_stale(exemplar, step.position)
        step.thought, step.action = thought, action
        step.save()
        _content_changed(exemplar)
    return step


def step_run(*, step: ExemplarStep, user, toolbox=None) -> ExemplarStep:
    """Run the step's tool on the exemplar's database (the real tools) and store the observation."""
    exemplar = step.exemplar
    check_can_edit(user, exemplar)
    if exemplar.database is None:
        raise ValidationError("This exemplar has no registered database, so its tools cannot run.")
    action = parse_action(step.action)
    if action.is_done:
        return step
    if toolbox is None:
        try:
            owned = agent_services.toolbox_for(exemplar.database)
        except (IndexMissing, SQLError) as exc:
            raise ValidationError(f"The tools of {exemplar.database.name} are not ready: {exc}") from None
        with owned:
            outcome = owned.run(action.name, list(action.args), dict(action.kwargs))
    else:
        outcome = toolbox.run(action.name, list(action.args), dict(action.kwargs))
    with transaction.atomic():
        changed = (step.observation or "").strip() != outcome.observation.strip()
        step.observation, step.ok, step.stale, step.ran_at = outcome.observation, outcome.ok, False, timezone.now()
        step.save()
        if changed:
            _mark_later_stale(exemplar, step.position)
        _content_changed(exemplar)
    return step


def exemplar_rerun_stale(*, exemplar: Exemplar, user) -> int:
    """Run again every stale or never-run step, in order; returns how many ran."""
    check_can_edit(user, exemplar)
    pending = [s for s in selectors.exemplar_steps(exemplar) if not s.is_done and (s.stale or s.observation is None)]
    if not pending:
        return 0
    if exemplar.database is None:
        raise ValidationError("This exemplar has no registered database, so its tools cannot run.")
    try:
        toolbox = agent_services.toolbox_for(exemplar.database)
    except (IndexMissing, SQLError) as exc:
        raise ValidationError(f"The tools are not ready: {exc}") from None
    with toolbox:
        for step in pending:
            step.refresh_from_db()
            step_run(step=step, user=user, toolbox=toolbox)
    return len(pending)


def swap_positions(row, other) -> None:
    """Swap two rows' ``position`` under a unique (parent, position) constraint (in the caller's transaction)."""
    a, b = row.position, other.position
    row.position = 10**6  # out of the way of the unique (parent, position)
    row.save(update_fields=["position"])
    other.position = a
    other.save(update_fields=["position"])
    row.position = b
    row.save(update_fields=["position"])


def step_move(*, step: ExemplarStep, user, offset: int) -> None:
    """Swap a step with its neighbour (offset -1: up, +1: down); later observations become stale."""
    exemplar = step.exemplar
    check_can_edit(user, exemplar)
    with transaction.atomic():
        other = exemplar.steps.filter(position=step.position + offset).first()
        if other is None:
            return
        if step.is_done or other.is_done:
            raise ValidationError("Done stays the last step.")
        a, b = step.position, other.position
        swap_positions(step, other)
        _mark_later_stale(exemplar, max(min(a, b), 1) - 1)  # both moved steps have a new context
        _content_changed(exemplar)


def step_delete(*, step: ExemplarStep, user) -> None:
    exemplar = step.exemplar
    check_can_edit(user, exemplar)
    with transaction.atomic():
        position = step.position
        step.delete()
        for later in exemplar.steps.filter(position__gt=position).order_by("position"):
            later.position -= 1
            later.save(update_fields=["position"])
        _mark_later_stale(exemplar, position - 1)
        _content_changed(exemplar)


def _fill_final_sql(exemplar: Exemplar) -> None:
    if not exemplar.final_sql.strip():
        sql = selectors.last_executed_sql(selectors.exemplar_steps(exemplar))
        if sql:
            exemplar.final_sql = sql.strip()
            exemplar.save(update_fields=["final_sql", "updated_at"])


# --- review -------------------------------------------------------------------------------------


def exemplar_submit(*, exemplar: Exemplar, user) -> Exemplar:
    """Draft (or rejected) -> in review, once the trajectory is complete and the final SQL executes."""
    check_can_edit(user, exemplar)
    if exemplar.state not in (Exemplar.State.DRAFT, Exemplar.State.REJECTED):
        raise ValidationError(f"Only drafts are submitted; this one is {exemplar.get_state_display().lower()}.")
    problems = submit_problems(exemplar)
    if problems:
        raise ValidationError(problems)
    exemplar.state = Exemplar.State.IN_REVIEW
    exemplar.submitted_at = timezone.now()
    exemplar.reviewer, exemplar.reviewed_at, exemplar.review_comment = None, None, ""
    exemplar.save()
    return exemplar


def submit_problems(exemplar: Exemplar) -> list[str]:
    problems: list[str] = []
    if exemplar.database is None:
        problems.append("Pick a registered database: the steps must run on real tools.")
    steps = selectors.exemplar_steps(exemplar)
    if not steps or not steps[-1].is_done:
        problems.append("End the trajectory with Done.")
    if any(s.stale for s in steps):
        problems.append("Some observations are stale: run those steps again.")
    report = lint_exemplar(exemplar, check_drift=False) if exemplar.database is not None else None
    if report is not None:
        problems += [e for e in report.errors if e not in problems]
    return problems


def exemplar_review(*, exemplar: Exemplar, user, approve: bool, comment: str = "") -> Exemplar:
    """In review -> approved or rejected, by a reviewer who is not the author (superusers excepted)."""
    check_can_approve(user, exemplar)
    if exemplar.state != Exemplar.State.IN_REVIEW:
        raise ValidationError("Only exemplars in review can be approved or rejected.")
    comment = (comment or "").strip()
    if not approve and not comment:
        raise ValidationError({"comment": "Say why it is rejected."})
    if approve and exemplar.author_id == user.pk:
        comment = ("[self-approved by a superuser] " + comment).strip()
    exemplar.state = Exemplar.State.APPROVED if approve else Exemplar.State.REJECTED
    exemplar.reviewer, exemplar.reviewed_at, exemplar.review_comment = user, timezone.now(), comment
    exemplar.save()
    return exemplar


def exemplar_mark_approved_on_import(*, exemplar: Exemplar, user, source: str) -> None:
    """Imported exemplars are someone's published prompt: the person importing them is their reviewer."""
    exemplar.state = Exemplar.State.APPROVED
    exemplar.reviewer = user if user is not None and user.is_authenticated else None
    exemplar.reviewed_at = timezone.now()
    exemplar.review_comment = f"Approved on import from {source} (published by its authors)."
    exemplar.save()


# --- promote a session -------------------------------------------------------------------------


def exemplar_promote_session(*, session: AgentSession, user, final_sql: str | None = None, source: str = "",
                             notes: str = "") -> Exemplar:
    """A new draft from an agent session: its turns become editable steps, observations as recorded.
    ``final_sql`` (None: the session's), ``source`` and ``notes`` replace what the session gives."""
    turns = [t for t in Turn.objects.for_session(session) if (t.action or "").strip()]
    with transaction.atomic():
        exemplar = Exemplar.objects.create(
            database=session.database, question=session.question, evidence=session.evidence or "",
            final_sql=session.final_sql or "" if final_sql is None else final_sql,
            source=source or f"session #{session.pk}",
            notes=notes or f"Promoted from agent session #{session.pk} ({session.get_status_display()}).",
            author=user if user is not None and user.is_authenticated else None)
        for i, turn in enumerate(turns):
            ExemplarStep.objects.create(exemplar=exemplar, position=i, thought=turn.thought or "",
                                        action=turn.action.strip(), observation=turn.observation,
                                        ok=turn.tool_ok, ran_at=turn.created_at)
    return exemplar


# --- sets and versions --------------------------------------------------------------------------


WORKSPACE_UNAVAILABLE = "This workspace is not available; choose another."


def set_workspace(*, user, slug: str | None) -> Workspace | None:
    """The workspace a new set goes to: ``slug`` among the creator's workspaces ("" for none; None for the
    default, their only workspace). A missing one and one they are not in are refused in the same words."""
    if slug is None:
        return policies.default_set_workspace(user)
    if not slug:
        return None
    workspace = policies.set_workspace_choices(user).filter(slug=slug).first()
    if workspace is None:
        raise ValidationError({"workspace": [WORKSPACE_UNAVAILABLE]})
    return workspace


def set_create(*, name: str, user, description: str = "", workspace: str | None = None) -> ExemplarSet:
    """A new, empty set; ``workspace`` a slug as ``set_workspace`` takes it (its members see the set)."""
    name = " ".join((name or "").split())
    if not name:
        raise ValidationError({"name": "Name the set."})
    if user is not None and not user.is_authenticated:
        user = None
    chosen = set_workspace(user=user, slug=workspace)
    if ExemplarSet.objects.filter(name=name).exists():
        raise ValidationError({"name": [NAME_UNAVAILABLE]})  # the same words whether or not the reader sees it
    return ExemplarSet.objects.create(name=name, description=description or "", workspace=chosen, created_by=user)


def set_publish(*, exemplar_set: ExemplarSet, exemplars: Sequence[Exemplar], user, tool_description: str = "",
                note: str = "", source: str = "", tool_description_no_findpath: str = "",
                confirm_regression: bool = False) -> ExemplarSetVersion:
    """A new immutable version of the set holding a frozen copy of these approved exemplars, in this order."""
    if user is not None and user.is_authenticated:
        policies.check_can_publish_set(user, exemplar_set)
    ids = [e.pk for e in exemplars]
    if len(set(ids)) != len(ids):
        raise ValidationError("An exemplar appears twice in the set.")
    with transaction.atomic():
        ExemplarSet.objects.select_for_update().get(pk=exemplar_set.pk)
        fresh = {e.pk: e for e in Exemplar.objects.select_related("database").filter(pk__in=ids)}
        not_approved = [f"#{i}" for i in ids if i not in fresh or fresh[i].state != Exemplar.State.APPROVED]
        if not_approved:
            raise ValidationError(f"Only approved exemplars are published; not approved: {', '.join(not_approved)}.")
        return set_publish_items(
            exemplar_set=exemplar_set, items=[selectors.exemplar_snapshot(fresh[i]) for i in ids], user=user,
            tool_description=tool_description, tool_description_no_findpath=tool_description_no_findpath,
            note=note, source=source, confirm_regression=confirm_regression)


class Regressed(ValidationError):
    """Publishing content whose latest experiment regressed, without confirming it."""


def set_publish_items(*, exemplar_set: ExemplarSet, items: Sequence[dict], user, tool_description: str = "",
                      tool_description_no_findpath: str = "", note: str = "", source: str = "",
                      confirm_regression: bool = False) -> ExemplarSetVersion:
    """The next version from exemplar snapshots (approved exemplars' or a candidate's, checked by the caller).

    When the latest finished experiment that tested exactly this content regressed (its mean EX below its
    baseline's), only with ``confirm_regression``: otherwise ``Regressed`` says which experiment and how."""
    from annotations.experiments.selectors import regression_for_content

    if user is not None and user.is_authenticated:
        policies.check_can_publish_set(user, exemplar_set)
    with transaction.atomic():
        ExemplarSet.objects.select_for_update().get(pk=exemplar_set.pk)
        items = [dict(item) for item in items]
        tool_description = (tool_description or "").strip()
        no_findpath = (tool_description_no_findpath or "").strip()
        digest = selectors.content_hash(tool_description=tool_description, exemplars=items,
                                        tool_description_no_findpath=no_findpath)
        latest = exemplar_set.versions.order_by("-number").first()
        if latest is not None and latest.content_hash == digest:
            raise ValidationError(f"Nothing changed since version {latest.number}.")
        regression = regression_for_content(exemplar_set=exemplar_set, content_hash=digest)
        if regression is not None and not confirm_regression:
            experiment = regression["experiment"]
            raise Regressed(f"Experiment #{experiment.pk} tested exactly this content and it regressed: "
                            f"{regression['verdict'].text} Confirm to publish it anyway.", code="regressed")
        return ExemplarSetVersion.objects.create(
            exemplar_set=exemplar_set, number=(latest.number + 1) if latest else 1,
            tool_description=tool_description, tool_description_no_findpath=no_findpath, exemplars=items,
            content_hash=digest, note=(note or "").strip(),
            source=source, created_by=user if user is not None and user.is_authenticated else None)
