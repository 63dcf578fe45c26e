"""Who may do what in the agent app: every rule in one place (Zulip's ``access_*``, Wagtail's policies).

Views, the API, admin actions and management commands call these. Two kinds of answer:

- ``access_*`` fetch an object the user may see, or raise ``Http404``: a database (or a session on it) the
  user was not granted looks exactly like one that does not exist.
- ``check_*`` raise ``PermissionDenied`` (403) when the user sees the object but may not act on it;
  ``can_*`` are the same rules as booleans for templates.

Roles are groups (``agent/roles.py``); what they may do is their permissions. Superusers may do everything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from agent.models import AgentSession, Database, ExamplePool, ImportJob, Workspace, WorkspaceMembership

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


# A session's stored prompt (its turns' messages, and the exemplars its config snapshots) holds its exemplars'
# text, and a retrieving strategy's pool examples: questions, SQL and observations with rows of the databases
# they came from, which need not be the session's. The prompt is shown only to a viewer who sees every one of
# those databases, judged now (a grant revoked since the session ran hides it again); when they cannot be told,
# it is hidden. The session's own steps (completions, actions, observations) are on its database and stay.

PROMPT_HIDDEN_NOTE = ("The prompt is hidden: it holds exemplars from a database you are not granted, or whose "
                      "source can no longer be told. The steps shown are this session's own.")


def session_prompt_rule(user) -> Callable[[AgentSession], bool]:
    """Whether ``user`` may read a session's prompt, as a function of the session that reads what it needs of the
    grants once (a list of sessions asks it once per row)."""
    from agent.services import few_shot

    if not can_view(user):
        return lambda session: False
    hidden_names: set[str] = set(hidden_databases(user).values_list("name", flat=True))
    if not hidden_names:
        # Whoever sees every registered database (a superuser, a fully granted account) may read any prompt: a
        # name no database here carries restricts nothing, so not knowing the source hides nothing from them.
        return lambda session: True
    sources: dict[str, bool] = {}

    def source_visible(source) -> bool:
        key = repr(sorted(source.items())) if isinstance(source, dict) else repr(source)
        if key not in sources:
            sources[key] = few_shot.source_visible(source, user)
        return sources[key]

    def rule(session: AgentSession) -> bool:
        config = session.config
        if not isinstance(config, dict) or "few_shot" not in config:
            return False  # no snapshot of what the prompt was built from
        databases = _prompt_databases(config, source_visible)
        return databases is not None and not (databases & hidden_names)

    return rule


def can_see_session_prompt(user, session: AgentSession) -> bool:
    """Whether ``user`` may read ``session``'s prompt (``session_prompt_rule``)."""
    return session_prompt_rule(user)(session)


def _prompt_databases(config: dict, source_visible: Callable[[Any], bool]) -> set[str] | None:
    """Names of the databases a session's prompt draws on beyond its own; None when they cannot be told, or when
    the exemplar set version (or candidate) they came from is not visible (``FewShotSource.source_visible``)."""
    names: set[str] = set()
    shots = config.get("few_shot")
    if shots:
        if not isinstance(shots, dict) or not isinstance(shots.get("exemplars") or [], list):
            return None
        exemplars, databases = shots.get("exemplars") or [], list(shots.get("databases") or [])
        if exemplars:
            source = config.get("exemplar_set_version")
            if source:
                if not source_visible(source):
                    return None
            elif len(databases) != len(exemplars) or not all(databases):
                return None  # exemplars known only as text: where they came from cannot be told
            names.update(str(name) for name in databases if name)
    pool = config.get("example_pool")
    if pool:
        pool_names = _pool_databases(pool)
        if pool_names is None:
            return None
        names |= pool_names
    return names


def _pool_databases(snapshot) -> set[str] | None:
    """The databases an example pool's examples came from (their ``db_id``); None for a pool that is gone or an
    example of no known database."""
    if not isinstance(snapshot, dict):
        return None
    try:
        key = (int(snapshot["id"]), str(snapshot["digest"]))
    except (KeyError, TypeError, ValueError):
        return None
    if key not in _POOL_DATABASES:
        found = _pool_database_names(*key)
        if found is None:
            return None
        if len(_POOL_DATABASES) >= 32:
            _POOL_DATABASES.clear()
        _POOL_DATABASES[key] = found
    return set(_POOL_DATABASES[key])


# Pools are immutable and content-addressed (the digest guards a reused id): their databases are read once per
# process, as agent.services.sessions reads their examples.
_POOL_DATABASES: dict[tuple[int, str], frozenset[str]] = {}


def _pool_database_names(pool_id: int, digest: str) -> frozenset[str] | None:
    return _example_database_names(
        ExamplePool.objects.filter(pk=pool_id, digest=digest).values_list("examples", flat=True).first())


def _example_database_names(examples) -> frozenset[str] | None:
    """The ``db_id`` of every example of a pool; None when one has none (or the examples are no list)."""
    if not isinstance(examples, list):
        return None
    names = [e.get("db_id") if isinstance(e, dict) else None for e in examples]
    return frozenset(str(n) for n in names) if all(names) else None


def visible_pools(user) -> QuerySet[ExamplePool]:
    """Example pools whose examples all come from databases ``user`` sees, judged by their ``db_id`` as a session's
    prompt judges its pool (``session_prompt_rule``): a pool with an example of no known database is hidden."""
    if not can_view(user):
        return ExamplePool.objects.none()
    if user.is_superuser:
        return ExamplePool.objects.all()
    hidden_names = set(hidden_databases(user).values_list("name", flat=True))
    blocked = []
    for pk, examples in ExamplePool.objects.values_list("pk", "examples"):
        names = _example_database_names(examples)
        if names is None or names & hidden_names:
            blocked.append(pk)
    return ExamplePool.objects.exclude(pk__in=blocked)


def session_config_for(user, session: AgentSession, *, rule: Callable[[AgentSession], bool] | None = None) -> dict:
    """The session's config snapshot as ``user`` may read it: without the exemplars' text (and the warnings
    that name their databases) when its prompt is hidden from them, saying so."""
    config = session.config if isinstance(session.config, dict) else {}
    if (rule or session_prompt_rule(user))(session):
        return config
    return {**config, "few_shot": None, "exemplar_warnings": [], "prompt_hidden": PROMPT_HIDDEN_NOTE}


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


def visible_import_jobs(user) -> QuerySet[ImportJob]:
    """Import jobs: their uploader's (and every one for superusers)."""
    return ImportJob.objects.all() if can_view(user) and user.is_superuser else \
        ImportJob.objects.filter(created_by=user) if can_view(user) else ImportJob.objects.none()


def access_import_job(user, pk: int) -> ImportJob:
    """An upload's import job: its uploader's (and superusers'); anyone else gets 404."""
    job = visible_import_jobs(user).filter(pk=pk).first()
    if job is None:
        raise Http404("No such import.")
    return job


# URL names any signed-in account may use, with or without a role (the admin has its own staff check).
OPEN_URL_NAMES = frozenset({"login", "logout", "api_token", "favicon"})
OPEN_NAMESPACES = frozenset({"admin"})


def url_needs_role(url_name: str | None, namespaces: list[str]) -> bool:
    """Whether a signed-in account needs a role to open this URL (every page but login, logout, token, admin)."""
    return not (url_name in OPEN_URL_NAMES or OPEN_NAMESPACES.intersection(namespaces))
