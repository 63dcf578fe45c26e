import sys

from django.core.management.base import BaseCommand, CommandError

from agent import services
from agent.models import Database
from agent.sql import SQLError
from agent.strategies.parsing import ActionParseError, parse_action
from agent.tools import IndexMissing


class Command(BaseCommand):
    help = "Call one agent tool on a registered database and print exactly the observation the agent would get."

    def add_arguments(self, parser):
        parser.add_argument("database", help="Registered name, e.g. chinook or a Spider db_id")
        parser.add_argument("action", help="""A call as the agent writes it, e.g. 'SearchValue("France")'""")

    def handle(self, *args, database, action, **options):
        db = Database.objects.filter(name=database).first()
        if db is None:
            names = ", ".join(Database.objects.values_list("name", flat=True)[:20])
            raise CommandError(f"No database named {database!r}. Registered: {names or 'none'}.")
        try:
            call = parse_action(action)
        except ActionParseError as exc:
            raise CommandError(str(exc)) from None
        if db.index_status != Database.IndexStatus.READY:
            self.stderr.write(f"Building the tool indexes of {db.name} first…")
            db = services.database_refresh(database=db)
        try:
            toolbox = services.toolbox_for(db)
        except (IndexMissing, SQLError) as exc:
            raise CommandError(f"The tools are not ready on {db.name}: {exc}") from None
        with toolbox:
            outcome = toolbox.run(call.name, call.args, call.kwargs)
        self.stdout.write(outcome.observation)
        if not outcome.ok:
            sys.exit(1)
