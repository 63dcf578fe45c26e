from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("annotations", "0006_run_item_eval_status_choices"),
    ]

    operations = [
        migrations.AddField(
            model_name="exemplarsetversion",
            name="tool_description_no_findpath",
            field=models.TextField(
                blank=True,
                help_text="Instruction text for the ablation without FindShortestPath (the paper's "
                "tool_desc_no_findpath.txt, Table 10). Empty: the generated text is used then.",
            ),
        ),
    ]
