"""The audit log: who registered or changed a database or an LLM endpoint, granted or revoked access, changed a
budget, a role or group membership, or launched a run (``AuditEntry``).

Changes are caught where they happen to the data, whatever the door (pages, API, admin, commands, workers):
model signals for databases, endpoints, grants, budgets and accounts, ``m2m_changed`` for group membership and
group permissions. Runs are recorded by the run services, which know who launched them. The actor is whoever
the current request belongs to (``AuditContextMiddleware`` puts the request in a context variable; a token
request's user is read once the API has authenticated it), or the account a service acts for
(``acting_as``); with neither it is the system (a management command or a worker). Passwords in DSNs are masked.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.contrib.auth.models import Group, Permission, User
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save

from agent.models import (
    AuditEntry,
    Database,
    DatabaseGrant,
    LLMEndpoint,
    UserBudget,
    WorkspaceMembership,
    mask_dsn,
)
from agent.textclean import clean_text

Action = AuditEntry.Action

# (request or account, via): set per request by the middleware, or by acting_as
_context: contextvars.ContextVar[tuple[Any, str] | None] = contextvars.ContextVar("t2s_audit_actor", default=None)

DATABASE_FIELDS = ("name", "engine", "location", "description", "is_demo", "column_descriptions",
                   "foreign_key_patches", "column_backend", "workspace_id")
ACCOUNT_FLAGS = ("is_staff", "is_superuser", "is_active")
_SECRET_FIELDS = {"location"}
_IGNORED_ENDPOINT_FIELDS = {"id", "created_at", "updated_at"}


@contextmanager
def acting_as(actor, *, via: str | None = None) -> Iterator[None]:
    """Record what happens inside the block as done by ``actor`` (an account, or a request)."""
    current = _context.get()
    token = _context.set((actor, via or (current[1] if current else "system")))
    try:
        yield
    finally:
        _context.reset(token)


_suspended: contextvars.ContextVar[bool] = contextvars.ContextVar("t2s_audit_suspended", default=False)


@contextmanager
def suspended() -> Iterator[None]:
    """Record nothing inside the block: only for a database migrated back to before the audit table."""
    token = _suspended.set(True)
    try:
        yield
    finally:
        _suspended.reset(token)


def table_exists(using: str = "default") -> bool:
    from django.db import connections

    return AuditEntry._meta.db_table in connections[using].introspection.table_names()


def current_actor() -> tuple[User | None, str]:
    context = _context.get()
    if context is None:
        return None, "system"
    holder, via = context
    user = getattr(holder, "user", holder)  # a request, or an account
    if user is None or not getattr(user, "is_authenticated", False):
        return None, via
    return user, via


def record(*, action: str, target_type: str, target: Any, target_id: Any = "", details: Mapping | None = None,
           actor=None) -> AuditEntry | None:
    """Store one entry; ``actor`` defaults to the current one."""
    if _suspended.get():
        return None
    via = current_actor()[1]
    if actor is None or not getattr(actor, "is_authenticated", False):
        actor = current_actor()[0]
    name = actor.get_username() if actor is not None else ""
    if actor is not None and actor.pk is None:
        actor = None  # an account object not stored (a caller's stand-in): its name is kept
    return AuditEntry.objects.create(
        actor=actor, actor_name=name, via=via, action=action,
        target_type=target_type, target_id=str(target_id or ""), target=clean_text(str(target))[:300],
        details=dict(details or {}))


# --- what changed ---------------------------------------------------------------------------------------------


def _value(instance, field: str) -> Any:
    value = getattr(instance, field)
    if field in _SECRET_FIELDS and isinstance(value, str):
        return mask_dsn(value)
    if hasattr(value, "quantize"):  # Decimal
        return str(value)
    return value


def _endpoint_fields() -> list[str]:
    return [f.attname for f in LLMEndpoint._meta.concrete_fields if f.attname not in _IGNORED_ENDPOINT_FIELDS]


def _stash_old(sender, instance, fields, update_fields=None, **kwargs) -> None:
    instance._audit_old = None
    if instance.pk is None or (update_fields is not None and not set(update_fields) & set(fields)):
        return
    old = sender.objects.filter(pk=instance.pk).values(*fields).first()
    instance._audit_old = old


def _changes(instance, fields) -> dict[str, list[Any]]:
    old = getattr(instance, "_audit_old", None)
    if not old:
        return {}
    changed = {}
    for field in fields:
        before, after = old[field], getattr(instance, field)
        if before != after:
            if field in _SECRET_FIELDS:
                before, after = mask_dsn(str(before)), mask_dsn(str(after))
            changed[field] = [_json(before), _json(after)]
    return changed


def _json(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str | list | dict):
        return value
    return str(value)


# --- receivers ------------------------------------------------------------------------------------------------


def _database_pre_save(sender, instance, update_fields=None, raw=False, **kwargs) -> None:
    if not raw:
        _stash_old(sender, instance, DATABASE_FIELDS, update_fields)


def _database_saved(sender, instance: Database, created: bool, raw: bool = False, **kwargs) -> None:
    if raw:
        return
    if created:
        record(action=Action.DATABASE_REGISTER, target_type="database", target=instance.name, target_id=instance.pk,
               details={"engine": instance.engine, "location": _value(instance, "location"),
                        "is_demo": instance.is_demo})
        return
    changed = _changes(instance, DATABASE_FIELDS)
    if changed:
        record(action=Action.DATABASE_CHANGE, target_type="database", target=instance.name, target_id=instance.pk,
               details={"changed": changed})


def _database_deleted(sender, instance: Database, **kwargs) -> None:
    record(action=Action.DATABASE_DELETE, target_type="database", target=instance.name, target_id=instance.pk,
           details={"location": _value(instance, "location")})


def _endpoint_pre_save(sender, instance, update_fields=None, raw=False, **kwargs) -> None:
    if not raw:
        _stash_old(sender, instance, _endpoint_fields(), update_fields)


def _endpoint_saved(sender, instance: LLMEndpoint, created: bool, raw: bool = False, **kwargs) -> None:
    if raw:
        return
    if created:
        record(action=Action.ENDPOINT_CREATE, target_type="endpoint", target=instance.name, target_id=instance.pk,
               details={f: _json(_value(instance, f)) for f in _endpoint_fields() if f != "name"})
        return
    changed = _changes(instance, _endpoint_fields())
    if changed:
        record(action=Action.ENDPOINT_CHANGE, target_type="endpoint", target=instance.name, target_id=instance.pk,
               details={"changed": changed})


def _endpoint_deleted(sender, instance: LLMEndpoint, **kwargs) -> None:
    record(action=Action.ENDPOINT_DELETE, target_type="endpoint", target=instance.name, target_id=instance.pk)


def _grant_details(grant: DatabaseGrant) -> dict[str, Any]:
    if grant.user_id:
        name = User.objects.filter(pk=grant.user_id).values_list("username", flat=True).first()
        return {"user": name or grant.user_id}
    name = Group.objects.filter(pk=grant.group_id).values_list("name", flat=True).first()
    return {"group": name or grant.group_id}


def _grant_saved(sender, instance: DatabaseGrant, created: bool, raw: bool = False, **kwargs) -> None:
    if created and not raw:
        record(action=Action.GRANT, target_type="database", target=instance.database.name,
               target_id=instance.database_id, details=_grant_details(instance))


def _grant_deleted(sender, instance: DatabaseGrant, **kwargs) -> None:
    database = Database.objects.filter(pk=instance.database_id).values_list("name", flat=True).first()
    record(action=Action.REVOKE, target_type="database", target=database or f"database #{instance.database_id}",
           target_id=instance.database_id, details=_grant_details(instance))


def _workspace_member_details(membership: WorkspaceMembership) -> dict[str, Any]:
    return {**_grant_details(membership), "role": membership.role}  # the same user-or-group pair as a grant


def _workspace_member_saved(sender, instance: WorkspaceMembership, raw: bool = False, **kwargs) -> None:
    """A membership shares every database of its workspace: recorded like a grant (added, or its role changed)."""
    if not raw:
        record(action=Action.GRANT, target_type="workspace", target=instance.workspace.slug,
               target_id=instance.workspace_id, details=_workspace_member_details(instance))


def _workspace_member_deleted(sender, instance: WorkspaceMembership, **kwargs) -> None:
    from agent.models import Workspace

    slug = Workspace.objects.filter(pk=instance.workspace_id).values_list("slug", flat=True).first()
    record(action=Action.REVOKE, target_type="workspace", target=slug or f"workspace #{instance.workspace_id}",
           target_id=instance.workspace_id, details=_workspace_member_details(instance))


def _budget_saved(sender, instance: UserBudget, raw: bool = False, **kwargs) -> None:
    if not raw:
        record(action=Action.BUDGET_CHANGE, target_type="user", target=instance.user.get_username(),
               target_id=instance.user_id,
               details={"tokens_per_day": instance.tokens_per_day,
                        "cost_per_day": None if instance.cost_per_day is None else str(instance.cost_per_day)})


def _user_pre_save(sender, instance, update_fields=None, raw=False, **kwargs) -> None:
    if not raw:
        _stash_old(sender, instance, ACCOUNT_FLAGS, update_fields)


def _user_saved(sender, instance: User, created: bool, raw: bool = False, **kwargs) -> None:
    if created or raw:
        return
    changed = _changes(instance, ACCOUNT_FLAGS)
    if changed:
        record(action=Action.ACCOUNT_FLAGS, target_type="user", target=instance.get_username(),
               target_id=instance.pk, details={"changed": changed})


def _membership_changed(sender, instance, action: str, reverse: bool, model, pk_set, **kwargs) -> None:
    """User.groups and Group.user_set are one relation: record one entry per (account, group) pair."""
    if action == "pre_clear":
        # clear() names nothing: remember who is about to leave, so post_clear can say it
        field = "groups" if not reverse else "user_set"
        instance._audit_cleared = set(getattr(instance, field).values_list("pk", flat=True))
        return
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if action == "post_clear":
        pk_set = getattr(instance, "_audit_cleared", set())
    if not pk_set:
        return
    kind = Action.ROLE_ADD if action == "post_add" else Action.ROLE_REMOVE
    others = {o.pk: o for o in model.objects.filter(pk__in=pk_set)}
    for pk in sorted(pk_set):
        other = others.get(pk)
        user, group = (other, instance) if reverse else (instance, other)
        if user is None or group is None:
            continue
        record(action=kind, target_type="user", target=user.get_username(), target_id=user.pk,
               details={"group": group.name})


def _group_permissions_changed(sender, instance, action: str, reverse: bool, model, pk_set, **kwargs) -> None:
    if action not in ("post_add", "post_remove") or not pk_set:
        return
    if reverse:  # permission.group_set.add(...): one entry per group
        groups = list(Group.objects.filter(pk__in=pk_set))
        perms = [instance]
    else:
        groups = [instance]
        perms = list(Permission.objects.filter(pk__in=pk_set).select_related("content_type"))
    names = sorted(f"{p.content_type.app_label}.{p.codename}" for p in perms)
    for group in groups:
        record(action=Action.ROLE_PERMISSIONS, target_type="group", target=group.name, target_id=group.pk,
               details={"added" if action == "post_add" else "removed": names})


def connect() -> None:
    """Called once from ``AgentConfig.ready``."""
    uid = "t2s-audit-"
    pre_save.connect(_database_pre_save, sender=Database, dispatch_uid=uid + "db-pre")
    post_save.connect(_database_saved, sender=Database, dispatch_uid=uid + "db")
    post_delete.connect(_database_deleted, sender=Database, dispatch_uid=uid + "db-del")
    pre_save.connect(_endpoint_pre_save, sender=LLMEndpoint, dispatch_uid=uid + "ep-pre")
    post_save.connect(_endpoint_saved, sender=LLMEndpoint, dispatch_uid=uid + "ep")
    post_delete.connect(_endpoint_deleted, sender=LLMEndpoint, dispatch_uid=uid + "ep-del")
    post_save.connect(_grant_saved, sender=DatabaseGrant, dispatch_uid=uid + "grant")
    post_delete.connect(_grant_deleted, sender=DatabaseGrant, dispatch_uid=uid + "revoke")
    post_save.connect(_workspace_member_saved, sender=WorkspaceMembership, dispatch_uid=uid + "ws-member")
    post_delete.connect(_workspace_member_deleted, sender=WorkspaceMembership, dispatch_uid=uid + "ws-member-del")
    post_save.connect(_budget_saved, sender=UserBudget, dispatch_uid=uid + "budget")
    pre_save.connect(_user_pre_save, sender=User, dispatch_uid=uid + "user-pre")
    post_save.connect(_user_saved, sender=User, dispatch_uid=uid + "user")
    m2m_changed.connect(_membership_changed, sender=User.groups.through, dispatch_uid=uid + "groups")
    m2m_changed.connect(_group_permissions_changed, sender=Group.permissions.through, dispatch_uid=uid + "perms")
