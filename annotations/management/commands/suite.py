from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agent.management.acting import on_behalf_of
from annotations import policies
from annotations.experiments import selectors, services
from annotations.experiments.forms import parse_indexes
from annotations.experiments.models import Suite
from annotations.runs.models import Dataset


class Command(BaseCommand):
    help = ("Build a suite of questions (or its next version) from a seeded sample, a run's failures with given "
            "labels, questions by index and other suites, united in that order; --show lists a version.")

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--dataset", help="The dataset of a new suite.")
        parser.add_argument("--sample", type=int, metavar="N", help="A random sample of N questions.")
        parser.add_argument("--seed", type=int, help="Seed of the sample (drawn and stored when omitted).")
        parser.add_argument("--db", action="append", default=[], help="The sample only from this db_id (repeatable).")
        parser.add_argument("--failures", action="append", default=[], metavar="RUN[:CATEGORY,...]",
                            help='The failures of a run, optionally only those labelled so, e.g. 12:"Selected '
                                 'Column" (repeatable).')
        parser.add_argument("--questions", metavar="INDEXES", help="Questions by index, e.g. 3,5-8,12.")
        parser.add_argument("--union", action="append", default=[], metavar="SUITE[:V]",
                            help="Every question of another suite's version (repeatable).")
        parser.add_argument("--note", default="")
        parser.add_argument("--description", default="")
        parser.add_argument("--show", action="store_true", help="Print the newest version's questions and origins.")
        parser.add_argument("--user", metavar="USERNAME",
                            help="Act as this account (a Curator who sees the dataset and runs); without it: a "
                                 "trusted operator command.")

    def handle(self, *args, **o):
        with on_behalf_of(o.get("user")) as account:
            suites = policies.visible_suites(account) if account is not None else Suite.objects.all()
            if o["show"]:
                return self._show(suites, o["name"])
            sources = self._sources(o)
            suite = suites.filter(name=o["name"]).first()
            try:
                if suite is None:
                    if not o["dataset"]:
                        raise CommandError(f"No suite {o['name']!r}: give --dataset to create it.")
                    datasets = policies.visible_datasets(account) if account is not None else Dataset.objects.all()
                    dataset = datasets.filter(name=o["dataset"]).first()
                    if dataset is None:
                        raise CommandError(f"No dataset named {o['dataset']!r}.")
                    suite = services.suite_create(name=o["name"], dataset=dataset, user=account,
                                                  description=o["description"], sources=sources, note=o["note"])
                    version = suite.latest_version()
                else:
                    version = services.suite_version_create(suite=suite, sources=sources, user=account,
                                                            note=o["note"])
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"Suite {suite.name} v{version.number}: {version.question_count} questions of "
                          f"{suite.dataset.name}.")

    def _sources(self, o) -> list[dict]:
        sources = []
        if o["sample"]:
            sources.append({"kind": "sample", "size": o["sample"], "seed": o["seed"], "db_ids": o["db"]})
        for spec in o["failures"]:
            run, _, categories = spec.partition(":")
            if not run.isdigit():
                raise CommandError(f"--failures {spec!r}: give a run id, e.g. 12 or 12:\"Selected Column\".")
            sources.append({"kind": "failures", "run": int(run),
                            "categories": [c.strip() for c in categories.split(",") if c.strip()]})
        if o["questions"]:
            try:
                sources.append({"kind": "picked", "questions": parse_indexes(o["questions"])})
            except Exception as exc:  # a form error: its message says what is wrong
                raise CommandError(" ".join(getattr(exc, "messages", [str(exc)]))) from None
        for spec in o["union"]:
            name, _, version = spec.partition(":")
            sources.append({"kind": "suite", "suite": name, "version": version.lstrip("v") or None})
        if not sources:
            raise CommandError("Give a source: --sample, --failures, --questions or --union.")
        return sources

    def _show(self, suites, name: str) -> None:
        version = selectors.suite_version_from_spec(suites, name)
        if version is None:
            raise CommandError(f"No suite version {name!r}.")
        self.stdout.write(f"{version} ({version.question_count} questions of {version.suite.dataset.name})")
        for entry in selectors.suite_entries(version):
            origins = "; ".join(selectors.origin_text(o) for o in entry.origins)
            self.stdout.write(f"  #{entry.question.index} {entry.question.db_id}: {entry.question.question[:70]}"
                              f"  [{origins}]")
