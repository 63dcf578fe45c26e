"""Seed the role groups (Viewer, Asker, Annotator, Curator, Operator, Data admin) with their permissions.

The earlier "Annotators" group (labels) becomes the Annotator role: its members move over.
"""

from django.db import migrations


def seed_roles(apps, schema_editor):
    from agent.roles import ANNOTATOR, ensure_roles

    ensure_roles(apps)
    Group = apps.get_model("auth", "Group")
    old = Group.objects.filter(name="Annotators").first()
    if old is not None:
        Group.objects.get(name=ANNOTATOR).user_set.add(*old.user_set.all())
        old.delete()


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0005_database_grants"),
        ("annotations", "0005_seed_error_taxonomy"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(seed_roles, migrations.RunPython.noop)]
