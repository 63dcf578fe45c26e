"""Roles: seeded groups, each a named bundle of permissions (documented in the README's roles table).

A user's roles are their groups; what a role may do is its permissions, and every rule that reads them lives
in ``agent/policies.py`` and ``annotations/policies.py``. The permissions are plain strings here (no import of
``annotations``): the data migration, the ``post_migrate`` hook (tests flush tables) and new users all go
through :func:`ensure_roles`.
"""

from __future__ import annotations

VIEWER = "Viewer"
ASKER = "Asker"
ANNOTATOR = "Annotator"
CURATOR = "Curator"
OPERATOR = "Operator"
DATA_ADMIN = "Data admin"

# Every role reads what it is granted: a user holding only "Operator" still sees the pages it works on.
_READ = [
    "agent.view_database", "agent.view_agentsession", "agent.view_turn",
    "annotations.view_exemplar", "annotations.view_exemplarset", "annotations.view_exemplarsetversion",
    "annotations.view_dataset", "annotations.view_run", "annotations.view_label", "annotations.view_queue",
    "annotations.view_suite", "annotations.view_candidate", "annotations.view_experiment",
]

ROLE_PERMISSIONS: dict[str, list[str]] = {
    VIEWER: _READ,
    ASKER: [*_READ, "agent.add_agentsession"],
    ANNOTATOR: [*_READ, "annotations.add_label", "annotations.change_label", "annotations.delete_label",
                "annotations.add_exemplar", "annotations.change_exemplar"],
    CURATOR: [*_READ, "annotations.add_exemplar", "annotations.change_exemplar", "annotations.review_exemplar",
              "annotations.add_exemplarset", "annotations.add_exemplarsetversion",
              "annotations.adjudicate_label", "annotations.add_queue", "annotations.change_queue",
              # exemplar experiments: suites, candidate versions, experiments (which spend on every question)
              "annotations.add_suite", "annotations.add_candidate", "annotations.change_candidate",
              "annotations.add_experiment", "annotations.change_experiment"],
    OPERATOR: [*_READ, "annotations.add_run", "annotations.change_run", "annotations.add_dataset"],
    DATA_ADMIN: [*_READ, "agent.add_database", "agent.change_database", "agent.delete_database",
                 "agent.add_llmendpoint", "agent.change_llmendpoint", "agent.view_llmendpoint",
                 "agent.add_databasegrant", "agent.change_databasegrant", "agent.delete_databasegrant",
                 "agent.view_databasegrant",
                 "agent.add_userbudget", "agent.change_userbudget", "agent.delete_userbudget",
                 "agent.view_userbudget", "agent.view_auditentry"],
}

ROLES = tuple(ROLE_PERMISSIONS)


def ensure_roles(apps=None) -> None:
    """Create the role groups and give them their permissions (idempotent; ``apps`` from a migration)."""
    migrating = apps is not None
    if apps is None:
        from django.apps import apps as global_apps

        apps = global_apps
    from django.contrib.auth.management import create_permissions

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for app_label in ("agent", "annotations"):
        # Permissions normally appear after all migrations (post_migrate): create them now for the seed.
        config = apps.get_app_config(app_label)
        stub = config.models_module is None if hasattr(config, "models_module") else True
        if stub:
            config.models_module = True  # a migration's app state: create_permissions skips configs without it
        try:
            create_permissions(config, verbosity=0, apps=apps)
        finally:
            if stub:
                config.models_module = None
    for role, perms in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        wanted = []
        for perm in perms:
            app_label, codename = perm.split(".", 1)
            found = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if found is None and migrating:
                continue  # a model added by a later migration: the post_migrate pass gives it
            if found is None:
                raise LookupError(f"role {role}: no permission {perm}")
            wanted.append(found)
        group.permissions.add(*wanted)
