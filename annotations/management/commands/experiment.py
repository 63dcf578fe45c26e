import json
import time

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from agent.management.acting import on_behalf_of
from annotations import policies
from annotations.experiments import selectors, services
from annotations.experiments.models import Candidate, Experiment, Suite
from annotations.models import Exemplar, ExemplarSet
from annotations.runs.models import Run


class Command(BaseCommand):
    help = ("Run an experiment: a candidate version of an exemplar set against a baseline (the latest published "
            "version unless --baseline) on a suite, --trials runs each on the workers; --wait follows it and prints "
            "both EX figures with the flips and the spread.")

    def add_arguments(self, parser):
        parser.add_argument("--set", required=True, dest="set_name", metavar="NAME")
        parser.add_argument("--candidate", required=True, metavar="N|new",
                            help="The candidate's number in the set, or 'new' (the latest published version plus "
                                 "--add, minus --remove).")
        parser.add_argument("--add", type=int, action="append", default=[], metavar="EXEMPLAR_ID",
                            help="With --candidate new: an exemplar to add (drafts too; repeatable).")
        parser.add_argument("--remove", type=int, action="append", default=[], metavar="EXEMPLAR_ID",
                            help="With --candidate new: a published exemplar to leave out (repeatable).")
        suite = parser.add_mutually_exclusive_group(required=True)
        suite.add_argument("--suite", metavar="NAME[:V]", help="The suite (its newest version unless :V).")
        suite.add_argument("--default-suite", action="store_true",
                           help="The failures, with the same labels, of the run an exemplar of the candidate was "
                                "written from.")
        parser.add_argument("--baseline", metavar="vN|cN", help="A published version (v3) or another candidate (c2).")
        parser.add_argument("--strategy", default="interactive_t2s")
        parser.add_argument("--options", default="{}", help='Strategy options as JSON, e.g. \'{"max_rounds": 8}\'.')
        parser.add_argument("--trials", type=int, default=1, help=f"Runs of each version (1-{Experiment.MAX_TRIALS}).")
        parser.add_argument("--concurrency", type=int, help="Sessions at once over all the runs.")
        parser.add_argument("--spend-cap", type=float, help="For the whole experiment, shared between its runs.")
        parser.add_argument("--name", default="")
        parser.add_argument("--wait", action="store_true")
        parser.add_argument("--json", action="store_true", help="With --wait: the report as JSON.")
        parser.add_argument("--poll", type=float, default=2.0, help="Seconds between progress lines with --wait.")
        parser.add_argument("--user", metavar="USERNAME",
                            help="Launch as this account (a Curator who sees the suite; the runs count to its daily "
                                 "budget); without it: a trusted operator command.")

    def handle(self, *args, **o):
        with on_behalf_of(o.get("user")) as account, transaction.atomic():  # refused: no candidate left behind
            experiment = self._start(account, o)
        runs = experiment.runs.count()
        self.stdout.write(f"Experiment #{experiment.pk} started: {experiment.candidate} against "
                          f"{experiment.baseline_label} on {experiment.suite_version} "
                          f"({experiment.suite_version.question_count} questions), {runs} runs.")
        if o["wait"]:
            self._wait(experiment, o)

    def _start(self, account, o) -> Experiment:
        sets = policies.visible_sets(account) if account is not None else ExemplarSet.objects.all()
        exemplar_set = sets.filter(name=o["set_name"]).first()
        if exemplar_set is None:
            raise CommandError(f"No exemplar set {o['set_name']!r}.")
        candidates = policies.visible_candidates(account) if account is not None else Candidate.objects.all()
        try:
            options = json.loads(o["options"])
        except ValueError:
            raise CommandError("--options is not JSON.") from None
        if not isinstance(options, dict):
            raise CommandError("--options is a JSON object, e.g. '{\"max_rounds\": 8}'.")
        try:
            candidate = self._candidate(exemplar_set, candidates, account, o)
            launch = {"candidate": candidate, "user": account, "strategy": o["strategy"], "options": options,
                      "trials": o["trials"], "max_concurrency": o["concurrency"], "spend_cap": o["spend_cap"],
                      "name": o["name"], **self._baseline(exemplar_set, candidates, o["baseline"])}
            if o["default_suite"]:
                default = selectors.default_suite_source(candidate)
                if default is None:
                    raise CommandError(f"{candidate} has no exemplar written from a labelled failure: give --suite.")
                run = policies.access_run(account, default["run"]) if account is not None else \
                    Run.objects.get(pk=default["run"])
                if account is not None:
                    policies.check_can_create_suite(account, run.dataset)
                return services.experiment_create_on_failures(run=run, categories=default["categories"], **launch)
            suites = policies.visible_suites(account) if account is not None else Suite.objects.all()
            suite_version = selectors.suite_version_from_spec(suites, o["suite"])
            if suite_version is None:
                raise CommandError(f"No suite version {o['suite']!r}.")
            if account is not None:
                policies.check_can_run_experiment(account, suite_version)
            return services.experiment_create(suite_version=suite_version, **launch)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None

    def _candidate(self, exemplar_set, candidates, account, o) -> Candidate:
        if o["candidate"] == "new":
            exemplars = policies.visible_exemplars(account) if account is not None else Exemplar.objects.all()
            added = []
            for pk in o["add"]:
                exemplar = exemplars.filter(pk=pk).first()
                if exemplar is None:
                    raise CommandError(f"No exemplar #{pk}.")
                added.append(exemplar)
            candidate = services.candidate_create(exemplar_set=exemplar_set, user=account, exemplars=added)
            for pk in o["remove"]:
                item = candidate.items.filter(exemplar_id=pk).first()
                if item is None:
                    raise CommandError(f"Exemplar #{pk} is not in {exemplar_set.name}'s published version.")
                services.candidate_remove(candidate=candidate, item=item, user=account)
            return candidate
        if o["add"] or o["remove"]:
            raise CommandError("--add and --remove go with --candidate new (or use the candidate command).")
        number = o["candidate"].lstrip("c")
        found = candidates.filter(exemplar_set=exemplar_set, number=int(number)).first() if number.isdigit() else None
        if found is None:
            raise CommandError(f"No candidate {o['candidate']} of {exemplar_set.name}.")
        return found

    def _baseline(self, exemplar_set, candidates, spec: str | None) -> dict:
        if not spec:
            return {}
        kind, number = spec[:1], spec[1:]
        if kind == "v" and number.isdigit():
            version = exemplar_set.versions.filter(number=int(number)).first()
            if version is not None:
                return {"baseline_version": version}
        if kind == "c" and number.isdigit():
            candidate = candidates.filter(exemplar_set=exemplar_set, number=int(number)).first()
            if candidate is not None:
                return {"baseline_candidate": candidate}
        raise CommandError(f"No baseline {spec!r} in {exemplar_set.name}: give vN (a version) or cN (a candidate).")

    def _wait(self, experiment: Experiment, o) -> None:
        while True:
            state = selectors.experiment_state(experiment)
            progress = selectors.experiment_progress(experiment)
            self.stdout.write(f"\r{progress['finished']}/{progress['total']} questions done over all runs, "
                              f"{progress['active']} running", ending="")
            self.stdout.flush()
            if state not in ("running", "cancelling"):
                break
            time.sleep(o["poll"])
        self.stdout.write("")
        report = selectors.experiment_report(experiment=experiment)
        if o["json"]:
            self.stdout.write(json.dumps(selectors.report_as_dict(report), indent=2, default=str))
        else:
            self.stdout.write(selectors.render_report(report))
