from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotations.runs import services


class Command(BaseCommand):
    help = ("Import a benchmark (spider: a folder with dev.json and database/; bird: dev.json with dev_databases/; "
            "jsonl: a JSONL or CSV file of question, gold SQL, database). Databases are registered under their "
            "db_id. Re-importing updates in place.")

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=["spider", "bird", "jsonl"])
        parser.add_argument("path")
        parser.add_argument("--name", required=True)
        parser.add_argument("--no-indexes", action="store_true",
                            help="Register databases without building their tool indexes now (a worker builds them).")
        parser.add_argument("--patch", action="append", default=[], metavar="NAME",
                            help="Apply an optional correction of the databases (repeatable), e.g. --patch flight_2: "
                                 "the foreign key airlines.uid = flights.Airline the paper's authors added to Spider.")

    def handle(self, *args, kind, path, name, no_indexes, patch=(), **options):
        try:
            dataset = services.dataset_import(kind=kind, path=path, name=name, build_indexes=not no_indexes,
                                              patches=patch)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        missing = sorted(set(dataset.questions.filter(database__isnull=True).values_list("db_id", flat=True)))
        self.stdout.write(self.style.SUCCESS(
            f"{dataset.name}: {dataset.question_count} questions, {dataset.executable_count} executable"))
        if missing:
            self.stdout.write(f"No database file for: {', '.join(missing)} (their questions are not executable).")
