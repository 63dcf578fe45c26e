"""Seed the paper's error taxonomy (Interactive-T2S, Table 11) as version 1 of "Interactive-T2S errors"."""

from django.db import migrations

TAXONOMY = "Interactive-T2S errors"
MISMATCH = "Mismatch"  # the prediction may be right
ERROR = "Error"  # the prediction is wrong
CATEGORIES = [
    ("golden_wrong", "Golden Wrong", MISMATCH, "The gold SQL does not match what the question asks.", True),
    ("golden_empty", "Golden Empty", MISMATCH, "The gold SQL returns no rows.", True),
    ("ambiguous", "Ambiguous", MISMATCH,
     "Several SQL queries answer the question; the prediction is valid but differs from the single gold one.", False),
    ("distinct", "Distinct", MISMATCH,
     "Prediction and gold differ only by a DISTINCT the question does not ask for.", False),
    ("format", "Format", MISMATCH,
     "A correct query whose result differs in format (NULL handling, time fields, columns).", False),
    ("lacking_info", "Lacking Info", MISMATCH,
     "Missing oracle knowledge (BIRD evidence) makes the question impossible to answer exactly.", False),
    ("selected_column", "Selected Column", ERROR, "The prediction selects the wrong column(s).", False),
    ("filtered_column", "Filtered Column", ERROR, "The prediction filters on the wrong column(s).", False),
    ("reasoning", "Reasoning", ERROR, "The SQL structure is wrong, beyond column choice.", False),
]


def seed(apps, schema_editor):
    Taxonomy = apps.get_model("annotations", "Taxonomy")
    TaxonomyVersion = apps.get_model("annotations", "TaxonomyVersion")
    Category = apps.get_model("annotations", "Category")
    taxonomy, _ = Taxonomy.objects.get_or_create(
        name=TAXONOMY, defaults={"description": "Error analysis of Interactive-T2S (paper, Table 11)."})
    if taxonomy.versions.exists():
        return
    version = TaxonomyVersion.objects.create(taxonomy=taxonomy, number=1, note="Seeded from the paper, Table 11.")
    for position, (key, name, group, definition, corrected) in enumerate(CATEGORIES):
        Category.objects.create(version=version, position=position, key=key, name=name, group=group,
                                definition=definition, shortcut=position + 1, accepts_corrected_gold=corrected)


ANNOTATOR_PERMISSIONS = [("label", "add_label", "Can add label"), ("label", "change_label", "Can change label"),
                         ("label", "delete_label", "Can delete label"), ("label", "view_label", "Can view label")]


def annotators_group(apps, schema_editor):
    """An "Annotators" group holding the label permissions (created here, before post_migrate would)."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    group, _ = Group.objects.get_or_create(name="Annotators")
    for model, codename, name in ANNOTATOR_PERMISSIONS:
        content_type, _ = ContentType.objects.get_or_create(app_label="annotations", model=model)
        permission, _ = Permission.objects.get_or_create(content_type=content_type, codename=codename,
                                                         defaults={"name": name})
        group.permissions.add(permission)


def unseed(apps, schema_editor):
    Taxonomy = apps.get_model("annotations", "Taxonomy")
    for taxonomy in Taxonomy.objects.filter(name=TAXONOMY):
        if not taxonomy.versions.filter(labels__isnull=False).exists():
            apps.get_model("annotations", "Category").objects.filter(version__taxonomy=taxonomy).delete()
            taxonomy.versions.all().delete()
            taxonomy.delete()


class Migration(migrations.Migration):
    dependencies = [("annotations", "0004_labels"), ("auth", "0012_alter_user_first_name_max_length"),
                    ("contenttypes", "0002_remove_content_type_name")]
    operations = [migrations.RunPython(seed, unseed), migrations.RunPython(annotators_group, migrations.RunPython.noop)]
