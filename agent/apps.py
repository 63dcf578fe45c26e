import contextlib

from django.apps import AppConfig
from django.db.models.signals import post_migrate, post_save


def _seed_roles(sender, app_config=None, using="default", apps=None, **kwargs) -> None:
    """Re-seed the role groups after every migrate or flush (tests flush tables between transactional tests)."""
    if getattr(app_config, "label", None) != "annotations":
        return  # once, after the last of the two apps whose permissions the roles hold
    from agent.roles import ensure_roles
    from agent.services import audit

    # Migrated back to before the audit log (``migrate agent 0015``): the roles are seeded, nothing recorded.
    with audit.suspended() if not audit.table_exists(using) else contextlib.nullcontext():
        ensure_roles()


def _say_signed_out(sender, request=None, user=None, **kwargs) -> None:
    """The login page a sign-out lands on says what happened (the cookie keeps the message past the session)."""
    if request is not None and user is not None:
        from django.contrib import messages

        messages.info(request, f"{user.get_username()} signed out. Sign in again, or as someone else.",
                      fail_silently=True)


def _default_roles(sender, instance, created: bool, raw: bool = False, **kwargs) -> None:
    """A new account gets the roles the settings name (default: Viewer and Asker)."""
    if not created or raw:
        return
    from django.contrib.auth.models import Group

    from agent.conf import agent_settings

    names = list(agent_settings.DEFAULT_ROLES)
    if not names:
        return
    groups = list(Group.objects.filter(name__in=names))
    if len(groups) < len(set(names)):
        from agent.roles import ensure_roles

        ensure_roles()
        groups = list(Group.objects.filter(name__in=names))
    instance.groups.add(*groups)


class AgentConfig(AppConfig):
    name = "agent"
    verbose_name = "Agent"

    def ready(self) -> None:
        from django.conf import settings
        from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
        from django.db.models.signals import pre_save

        from agent import tasks  # noqa: F401  registers the Celery tasks services enqueue by name

        from .hygiene import clean_before_save
        from .services import login_throttle

        pre_save.connect(clean_before_save, dispatch_uid="t2s-text-hygiene")
        from agent.services import audit

        audit.connect()
        post_migrate.connect(_seed_roles, dispatch_uid="agent.seed_roles")
        post_save.connect(_default_roles, sender=settings.AUTH_USER_MODEL, dispatch_uid="agent.default_roles")
        user_login_failed.connect(login_throttle.on_login_failed, dispatch_uid="agent.login_failed")
        user_logged_in.connect(login_throttle.on_logged_in, dispatch_uid="agent.logged_in")
        user_logged_out.connect(_say_signed_out, dispatch_uid="agent.logged_out")
