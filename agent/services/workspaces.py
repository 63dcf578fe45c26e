"""Workspaces: create one, add or remove its members, put databases in it (audited like database grants).

Who may call these is decided by ``agent.policies`` (``check_can_create_workspace``,
``check_can_manage_workspace``); these functions only write, and keep the invariants: a workspace always keeps
at least one admin when it had one, and a member is a user or a group, never both.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import transaction

from agent.models import Database, Workspace, WorkspaceMembership

from . import audit


def default_workspace() -> Workspace:
    """The workspace of databases registered without one (created by the migration; again after a flush)."""
    workspace, _ = Workspace.objects.get_or_create(slug=Workspace.DEFAULT, defaults={"name": "Default"})
    return workspace


def workspace_create(*, slug: str, name: str = "", description: str = "", user=None) -> Workspace:
    """A new workspace; its creator (when an account) becomes its first admin."""
    if Workspace.objects.filter(slug=slug).exists():
        raise ValidationError({"slug": ["A workspace with this name exists already."]})
    workspace = Workspace(slug=slug, name=name or slug, description=description,
                          created_by=user if getattr(user, "pk", None) else None)
    workspace.full_clean()
    with transaction.atomic():
        workspace.save()
        if workspace.created_by is not None:
            workspace_member_add(workspace=workspace, user=user, role=WorkspaceMembership.Role.ADMIN, by=user)
    return workspace


def workspace_member_add(*, workspace: Workspace, user: User | None = None, group: Group | None = None,
                         role: str = WorkspaceMembership.Role.MEMBER, by=None) -> WorkspaceMembership:
    """Add a user or a group (or change its role): one action shares every database of the workspace."""
    if (user is None) == (group is None):
        raise ValidationError("Add either an account or a group.")
    if role not in WorkspaceMembership.Role.values:
        raise ValidationError({"role": [f"Choose one of {', '.join(WorkspaceMembership.Role.values)}."]})
    key = {"user": user} if user is not None else {"group": group}
    with transaction.atomic():
        membership, created = WorkspaceMembership.objects.select_for_update().get_or_create(
            workspace=workspace, **key, defaults={"role": role, "added_by": by if getattr(by, "pk", None) else None})
        if not created and membership.role != role:
            _keep_an_admin(workspace, leaving=membership, new_role=role)
            membership.role = role
            membership.save(update_fields=["role"])
    return membership  # recorded in the audit log by its signal, as grants are


def workspace_member_remove(*, workspace: Workspace, user: User | None = None, group: Group | None = None,
                            ) -> None:
    key = {"user": user} if user is not None else {"group": group}
    with transaction.atomic():
        membership = WorkspaceMembership.objects.select_for_update().filter(workspace=workspace, **key).first()
        if membership is None:
            raise ValidationError("Not a member of this workspace.")
        _keep_an_admin(workspace, leaving=membership, new_role=None)
        membership.delete()


def _keep_an_admin(workspace: Workspace, *, leaving: WorkspaceMembership, new_role: str | None) -> None:
    """A workspace that has an admin keeps one: otherwise nobody but a Data admin could manage it again."""
    if leaving.role != WorkspaceMembership.Role.ADMIN or new_role == WorkspaceMembership.Role.ADMIN:
        return
    others = workspace.memberships.filter(role=WorkspaceMembership.Role.ADMIN).exclude(pk=leaving.pk)
    if not others.exists():
        raise ValidationError("This is the workspace's last admin: make someone else admin first.")


def workspace_databases_set(*, workspace: Workspace, databases: Iterable[Database]) -> int:
    """Put databases in ``workspace`` (a database is in one workspace); returns how many moved."""
    moved = 0
    with transaction.atomic():
        for database in Database.objects.select_for_update(of=("self",)).filter(
                pk__in=[d.pk for d in databases]).exclude(workspace=workspace).select_related("workspace"):
            before = database.workspace.slug if database.workspace_id else None
            Database.objects.filter(pk=database.pk).update(workspace=workspace)
            audit.record(action=audit.Action.DATABASE_CHANGE, target_type="database", target=database.name,
                         target_id=database.pk, details={"workspace": [before, workspace.slug]})
            moved += 1
    return moved
