from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("agent", "0007_endpoint_spend_bounds"),
    ]

    operations = [
        migrations.AddField(
            model_name="database",
            name="foreign_key_patches",
            field=models.JSONField(
                blank=True, default=list,
                help_text="Foreign keys the target does not declare, added to its schema and join graph (a dataset "
                "patch such as Spider's flight_2): [{table, columns, ref_table, ref_columns, source}].",
            ),
        ),
    ]
