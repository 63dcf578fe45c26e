from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("annotations", "0007_version_tool_description_no_findpath"),
    ]

    operations = [
        migrations.AddField(
            model_name="dataset",
            name="patches",
            field=models.JSONField(
                blank=True, default=list,
                help_text='Optional corrections applied by the import, e.g. ["flight_2"] '
                "(see annotations.runs.patches).",
            ),
        ),
    ]
