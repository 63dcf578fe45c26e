from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agent import services
from agent.management.acting import on_behalf_of
from agent.models import Database


class Command(BaseCommand):
    help = "Register (or re-point) a target database: a SQLite file path or a PostgreSQL DSN, and introspect it."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("location", help="Path of a SQLite file, or postgresql://user@host:port/dbname")
        parser.add_argument("--description", default="")
        parser.add_argument("--engine", choices=[c for c, _ in Database.Engine.choices])
        parser.add_argument("--no-introspect", action="store_true", help="Queue introspection on Celery instead.")

    def handle(self, *args, name, location, description, engine, no_introspect, **options):
        with on_behalf_of(None):  # a trusted operator tool: the audit log records the command as the door
            self._register(name, location, description, engine, no_introspect)

    def _register(self, name, location, description, engine, no_introspect) -> None:
        try:
            database = services.database_register(
                name=name, location=location, description=description, engine=engine,
                refresh="async" if no_introspect else "sync",
            )
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        database.refresh_from_db()
        if database.status == Database.Status.ERROR:
            raise CommandError(f"Registered {name}, but it cannot be read: {database.status_message}")
        self.stdout.write(self.style.SUCCESS(
            f"{database.name}: {database.get_engine_display()} at {database.display_location} "
            f"({database.status}, {database.table_count} tables, {database.column_count} columns)"))
