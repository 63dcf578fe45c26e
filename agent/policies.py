"""Who may do what in the agent app: every rule in one place (Zulip's ``access_*``, Wagtail's policies).

Views, the API, admin actions and management commands call these. Two kinds of answer:

- ``access_*`` fetch an object the user may see, or raise ``Http404``: a database (or a session on it) the
  user was not granted looks exactly like one that does not exist.
- ``check_*`` raise ``PermissionDenied`` (403) when the user sees the object but may not act on it;
  ``can_*`` are the same rules as booleans for templates.

Roles are groups (``agent/roles.py``); what they may do is their permissions. Superusers may do everything.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from agent.models import AgentSession, Database, ImportJob, Workspace, WorkspaceMembership

NOT_FOUND = "No such database."


def _active(user) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active)


def can_view(user) -> bool:
    """Read pages at all (every role includes it)."""
    return _active(user) and user.has_perm("agent.view_database")


def can_ask(user) -> bool:
    """Start agent sessions (they spend LLM tokens) and use the tool console."""
    return _active(user) and user.has_perm("agent.add_agentsession")


def can_register_databases(user) -> bool:
    """Register, re-point and refresh target databases (Data admin)."""
    return _active(user) and user.has_perm("agent.add_database")


def can_manage_endpoints(user) -> bool:
    """Register and change LLM endpoints (Data admin)."""
    return _active(user) and user.has_perm("agent.add_llmendpoint")


def can_grant(user) -> bool:
    """Grant and revoke access to databases (Data admin)."""
    return _active(user) and user.has_perm("agent.add_databasegrant")


def can_view_audit(user) -> bool:
    """Read the audit log (who changed databases, endpoints, access, budgets, roles; who launched runs)."""
    return _active(user) and user.has_perm("agent.view_auditentry")


def check_can_view_audit(user) -> None:
    if not can_view_audit(user):
        raise PermissionDenied("The audit log is for Data admins.")


def _memberships(user) -> QuerySet[WorkspaceMembership]:
    return WorkspaceMembership.objects.of(user)


def member_workspaces(user) -> QuerySet[Workspace]:
    """The workspaces this user belongs to (directly or through a group); every workspace for superusers."""
    if not can_view(user):
        return Workspace.objects.none()
    if user.is_superuser:
        return Workspace.objects.all()
    return Workspace.objects.filter(pk__in=_memberships(user).values("workspace_id"))


def visible_databases(user) -> QuerySet[Database]:
    """The one place that decides who sees a database: granted (directly or through a group), in a workspace the
    user belongs to, or the demo database (``Database.objects.granted_to``, which the session runner applies
    too). Everything built on databases (sessions, datasets, runs, labels, queues, exemplars) follows from it."""
    return Database.objects.granted_to(user)


def access_workspace(user, slug: str) -> Workspace:
    """A workspace this user belongs to; any other looks missing (404)."""
    workspace = member_workspaces(user).filter(slug=slug).first()
    if workspace is None:
        raise Http404("No such workspace.")
    return workspace


def can_create_workspaces(user) -> bool:
    """Creating a workspace is creating a sharing boundary: Data admins (who grant databases)."""
    return can_grant(user)


def check_can_create_workspace(user) -> None:
    if not can_create_workspaces(user):
        raise PermissionDenied("Creating workspaces needs the Data admin role.")


def can_manage_workspace(user, workspace: Workspace) -> bool:
    """Add and remove members: the workspace's admins, and Data admins who belong to it (superusers too)."""
    if not member_workspaces(user).filter(pk=workspace.pk).exists():
        return False
    return user.is_superuser or can_grant(user) or _memberships(user).filter(
        workspace=workspace, role=WorkspaceMembership.Role.ADMIN).exists()


def check_can_manage_workspace(user, workspace: Workspace) -> None:
    if not member_workspaces(user).filter(pk=workspace.pk).exists():
        raise Http404("No such workspace.")
    if not can_manage_workspace(user, workspace):
        raise PermissionDenied("Only the workspace's admins (or a Data admin in it) manage its members.")


def hidden_databases(user) -> QuerySet[Database]:
    """Every database this user may not see (used to hide objects that span several databases)."""
    return Database.objects.exclude(pk__in=visible_databases(user).values("pk"))


def access_database(user, name: str) -> Database:
    """The database called ``name`` if this user may see it; otherwise 404, exactly as for an unknown name."""
    database = visible_databases(user).filter(name=name).first()
    if database is None:
        raise Http404(NOT_FOUND)
    return database


def access_database_by_id(user, pk: int) -> Database:
    database = visible_databases(user).filter(pk=pk).first()
    if database is None:
        raise Http404(NOT_FOUND)
    return database


def check_can_ask(user, database: Database | None = None) -> None:
    """Asking runs the agent (LLM spend) on ``database``: an Asker granted the database."""
    if database is not None and not visible_databases(user).filter(pk=database.pk).exists():
        raise Http404(NOT_FOUND)
    if not can_ask(user):
        raise PermissionDenied("Asking questions needs the Asker role.")


def check_can_use_tools(user, database: Database | None = None) -> None:
    """The tool console runs queries on the target: the same rule as asking."""
    if database is not None and not visible_databases(user).filter(pk=database.pk).exists():
        raise Http404(NOT_FOUND)
    if not can_ask(user):
        raise PermissionDenied("The tool console needs the Asker role.")


def check_can_register_database(user) -> None:
    if not can_register_databases(user):
        raise PermissionDenied("Registering databases needs the Data admin role.")


def check_can_change_database(user, database: Database) -> None:
    if not visible_databases(user).filter(pk=database.pk).exists():
        raise Http404(NOT_FOUND)
    if not (_active(user) and user.has_perm("agent.change_database")):
        raise PermissionDenied("Changing databases needs the Data admin role.")


def visible_sessions(user) -> QuerySet[AgentSession]:
    """Sessions on databases this user may see."""
    return AgentSession.objects.filter(database__in=visible_databases(user).values("pk"))


def access_session(user, pk: int) -> AgentSession:
    session = visible_sessions(user).select_related("database", "created_by").filter(pk=pk).first()
    if session is None:
        raise Http404("No such session.")
    return session


def can_cancel_session(user, session: AgentSession) -> bool:
    """The person who asked, or whoever may change any session (superusers)."""
    return _active(user) and ((session.created_by_id == user.pk and can_ask(user))
                              or user.has_perm("agent.change_agentsession"))


def check_can_cancel_session(user, session: AgentSession) -> None:
    if not can_cancel_session(user, session):
        raise PermissionDenied("Only the person who asked can cancel this session.")


def can_give_feedback(user, session: AgentSession) -> bool:
    """Say whether an answer is right: the person who asked, and those who label answers (Annotators)."""
    return _active(user) and (session.created_by_id == user.pk or user.has_perm("annotations.add_label")
                              or user.has_perm("agent.change_agentsession"))


def check_can_give_feedback(user, session: AgentSession) -> None:
    if not can_give_feedback(user, session):
        raise PermissionDenied("Only the person who asked, or an Annotator, can mark this answer right or wrong.")


def check_can_follow_up(user, session: AgentSession) -> None:
    """A follow-up is a new question (it spends LLM tokens): the Asker role, on a session one can see."""
    if not can_ask(user):
        raise PermissionDenied("Asking a follow-up question needs the Asker role.")


def access_import_job(user, pk: int) -> ImportJob:
    """An upload's import job: its uploader's (and superusers'); anyone else gets 404."""
    jobs = ImportJob.objects.all() if can_view(user) and user.is_superuser else \
        ImportJob.objects.filter(created_by=user) if can_view(user) else ImportJob.objects.none()
    job = jobs.filter(pk=pk).first()
    if job is None:
        raise Http404("No such import.")
    return job


# URL names any signed-in account may use, with or without a role (the admin has its own staff check).
OPEN_URL_NAMES = frozenset({"login", "logout", "api_token", "favicon"})
OPEN_NAMESPACES = frozenset({"admin"})


def url_needs_role(url_name: str | None, namespaces: list[str]) -> bool:
    """Whether a signed-in account needs a role to open this URL (every page but login, logout, token, admin)."""
    return not (url_name in OPEN_URL_NAMES or OPEN_NAMESPACES.intersection(namespaces))
