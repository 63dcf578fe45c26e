"""Encrypt the passwords of PostgreSQL DSNs already registered (agent/dsn_secrets.py); backwards, decrypt them."""

from django.db import migrations


def encrypt(apps, schema_editor):
    from agent.dsn_secrets import seal_dsn

    Database = apps.get_model("agent", "Database")
    for database in Database.objects.filter(engine="postgresql").only("pk", "location"):
        sealed = seal_dsn(database.location)
        if sealed != database.location:
            Database.objects.filter(pk=database.pk).update(location=sealed)


def decrypt(apps, schema_editor):
    from agent.dsn_secrets import reveal_dsn

    Database = apps.get_model("agent", "Database")
    for database in Database.objects.filter(engine="postgresql").only("pk", "location"):
        plain = reveal_dsn(database.location)
        if plain != database.location:
            Database.objects.filter(pk=database.pk).update(location=plain)


class Migration(migrations.Migration):
    dependencies = [("agent", "0015_column_backend_hybrid")]

    operations = [migrations.RunPython(encrypt, decrypt)]
