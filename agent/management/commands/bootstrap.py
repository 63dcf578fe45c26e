import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from agent import services
from agent.conf import agent_settings
from agent.models import Database

DEMO_NAME = "chinook"
DEMO_DESCRIPTION = "Chinook: a digital music store (artists, albums, tracks, customers, invoices). Bundled demo."


class Command(BaseCommand):
    help = "Prepare a fresh or existing install: migrate, collect static files, register the demo database, create an admin."

    def handle(self, *args, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        self._demo()
        self._admin()

    def _demo(self) -> None:
        demo = Database.objects.filter(name=DEMO_NAME).first()
        if demo is None or demo.status != Database.Status.READY:
            demo = services.database_register(
                name=DEMO_NAME, location=str(agent_settings.DEMO_DATABASE), description=DEMO_DESCRIPTION,
                is_demo=True, refresh="sync",
            )
            self.stdout.write(f"Demo database {demo.name}: {demo.status} ({demo.table_count} tables)")

    def _admin(self) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return
        password = os.environ.get("T2S_ADMIN_PASSWORD")
        generated = not password
        password = password or secrets.token_urlsafe(12)
        User.objects.create_superuser("admin", "admin@localhost", password)
        if generated:
            self.stdout.write(self.style.WARNING(
                f"Created the admin account.  user: admin  password: {password}\n"
                "This password is shown only once; change it in the admin (or set T2S_ADMIN_PASSWORD before the first run)."))
        else:
            self.stdout.write("Created the admin account 'admin' with the password from T2S_ADMIN_PASSWORD.")
