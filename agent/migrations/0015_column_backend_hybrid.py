"""SearchColumn's default becomes hybrid (MiniLM in numpy fused with BM25; BENCHMARKS.md).

Databases still on the old default move to it; their indexes are rebuilt at the next build (the manifest
names the backend it was built with, and a mismatch rebuilds). Reversing restores bm25.
"""

from django.db import migrations, models


def to_hybrid(apps, schema_editor):
    apps.get_model("agent", "Database").objects.filter(column_backend="bm25").update(column_backend="hybrid")


def to_bm25(apps, schema_editor):
    apps.get_model("agent", "Database").objects.filter(column_backend="hybrid").update(column_backend="bm25")


class Migration(migrations.Migration):

    dependencies = [("agent", "0014_llm_call_leases")]

    operations = [
        migrations.AlterField(
            model_name="database",
            name="column_backend",
            field=models.CharField(
                default="hybrid",
                help_text="Ranking used by SearchColumn: hybrid (MiniLM embeddings fused with BM25, the default), "
                          "minilm, bm25 (no model) or openai (an embeddings endpoint).",
                max_length=40),
        ),
        migrations.RunPython(to_hybrid, to_bm25),
    ]
