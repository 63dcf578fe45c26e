from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from agent import policies
from agent.management.acting import on_behalf_of
from agent.models import Database, Workspace, WorkspaceMembership
from agent.services import workspaces as services


class Command(BaseCommand):
    help = ("Create a workspace, add or remove its members (accounts or groups, as member or admin) and put "
            "databases in it; without options, list its members and databases.")

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--create", action="store_true", help="Create the workspace first.")
        parser.add_argument("--title", default="", help="Its title (with --create).")
        parser.add_argument("--add", action="append", default=[], metavar="USER[:ROLE]",
                            help="Add an account (ROLE member or admin; default member). Repeatable.")
        parser.add_argument("--add-group", action="append", default=[], metavar="GROUP[:ROLE]")
        parser.add_argument("--remove", action="append", default=[], metavar="USER")
        parser.add_argument("--remove-group", action="append", default=[], metavar="GROUP")
        parser.add_argument("--database", action="append", default=[], metavar="NAME",
                            help="Put a registered database in the workspace. Repeatable.")
        parser.add_argument("--user", help="Act as this account, with its rules (a workspace admin, or a Data "
                                           "admin to create one); without it, a trusted operator command.")

    def handle(self, *args, slug, create, title, add, add_group, remove, remove_group, database, user, **options):
        with on_behalf_of(user) as actor:
            try:
                self._handle(actor, slug, create, title, add, add_group, remove, remove_group, database)
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from None

    def _handle(self, actor, slug, create, title, add, add_group, remove, remove_group, database) -> None:
        if create:
            if actor is not None:
                policies.check_can_create_workspace(actor)
            workspace = services.workspace_create(slug=slug, name=title, user=actor)
            self.stdout.write(f"Created workspace {workspace.slug}.")
        elif actor is not None:
            workspace = policies.access_workspace(actor, slug)
        else:
            workspace = Workspace.objects.filter(slug=slug).first()
            if workspace is None:
                raise CommandError(f"No workspace {slug!r} (use --create).")
        if actor is not None and (add or add_group or remove or remove_group or database):
            policies.check_can_manage_workspace(actor, workspace)
        for spec in add:
            name, role = _split(spec)
            services.workspace_member_add(workspace=workspace, user=_user(name), role=role, by=actor)
        for spec in add_group:
            name, role = _split(spec)
            services.workspace_member_add(workspace=workspace, group=_group(name), role=role, by=actor)
        for name in remove:
            services.workspace_member_remove(workspace=workspace, user=_user(name))
        for name in remove_group:
            services.workspace_member_remove(workspace=workspace, group=_group(name))
        if database and actor is not None and not policies.can_grant(actor):
            # Moving a database shares it with every member: the same right as granting it.
            raise PermissionDenied("Putting databases in a workspace needs the Data admin role.")
        if database:
            visible = policies.visible_databases(actor) if actor is not None else Database.objects.all()
            found = list(visible.filter(name__in=database))
            missing = sorted(set(database) - {d.name for d in found})
            if missing:
                raise CommandError(f"No such database: {', '.join(missing)}")
            services.workspace_databases_set(workspace=workspace, databases=found)
        for m in workspace.memberships.select_related("user", "group"):
            who = f"user {m.user.username}" if m.user_id else f"group {m.group.name}"
            self.stdout.write(f"{who}: {m.role}")
        names = list(workspace.databases.values_list("name", flat=True))
        self.stdout.write(f"databases ({len(names)}): {', '.join(names) or '-'}")


def _split(spec: str) -> tuple[str, str]:
    name, _, role = spec.partition(":")
    role = role or WorkspaceMembership.Role.MEMBER
    if role not in WorkspaceMembership.Role.values:
        raise CommandError(f"{spec}: the role is one of {', '.join(WorkspaceMembership.Role.values)}")
    return name, role


def _user(name: str) -> User:
    user = User.objects.filter(username=name, is_active=True).first()
    if user is None:
        raise CommandError(f"No active user {name!r}.")
    return user


def _group(name: str) -> Group:
    group = Group.objects.filter(name=name).first()
    if group is None:
        raise CommandError(f"No group {name!r}.")
    return group
