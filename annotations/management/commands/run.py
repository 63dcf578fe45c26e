import time

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agent.management.acting import on_behalf_of
from agent.tools import tool_names
from annotations import policies
from annotations.exemplars.selectors import version_from_spec
from annotations.runs import selectors, services
from annotations.runs.models import Dataset, Run
from annotations.runs.pools import POOL_HELP


class Command(BaseCommand):
    help = "Run a strategy over (a sample of) a dataset on the Celery workers; --wait follows it to the figures."

    def add_arguments(self, parser):
        parser.add_argument("--dataset", required=True)
        parser.add_argument("--strategy", default="interactive_t2s")
        parser.add_argument("--name")
        parser.add_argument("--limit", type=int, help="Only N questions: the first N, or a random N with --sample random.")
        parser.add_argument("--sample", choices=["first", "random", "join-buckets"], default="first",
                            help="With --limit: the first N questions (default) or a random N drawn with --seed; "
                                 "join-buckets: a random N (default 50) per tables-joined bucket 2, 3 and 4+, "
                                 "drawn with --seed (the paper's Table 10).")
        parser.add_argument("--seed", type=int, help="Seed of a random sample (drawn and stored when omitted).")
        parser.add_argument("--executable-only", action="store_true",
                            help="Only questions whose database is available here (the others cannot run).")
        parser.add_argument("--db", action="append", default=[], help="Restrict to a db_id (repeatable).")
        parser.add_argument("--exemplars", metavar="SET[:N]",
                            help="Exemplar set (default for interactive_t2s: the paper's set for the dataset).")
        parser.add_argument("--zero-shot", action="store_true", help="No exemplars at all.")
        parser.add_argument("--paper-replica", action="store_true",
                            help="Interactive-T2S as the paper's authors ran it (README, Fidelity to the paper).")
        parser.add_argument("--concurrency", type=int)
        parser.add_argument("--spend-cap", type=float)
        parser.add_argument("--pool", metavar="SPEC", help=POOL_HELP)
        parser.add_argument("--without", action="append", default=[], choices=tool_names(), metavar="TOOL",
                            help="Switch a tool off for every question (repeatable), e.g. --without FindShortestPath "
                                 "(the paper's Table 10 ablation).")
        parser.add_argument("--resume", type=int, metavar="RUN_ID",
                            help="Resume a run: questions never run, and those whose session failed, was "
                                 "cancelled or ended in an LLM error.")
        parser.add_argument("--wait", action="store_true")
        parser.add_argument("--user", metavar="USERNAME",
                            help="Launch or resume as this account: it must be an Operator who sees the dataset (as "
                                 "on the pages), the run is its own and counts to its daily budget. Without it: a "
                                 "trusted operator run.")

    def handle(self, *args, **o):
        with on_behalf_of(o.get("user")) as account:
            run = self._start(account, o)
        self._report(run, o)

    def _start(self, account, o) -> Run:
        if o["resume"]:
            if account is not None:
                run = policies.access_run(account, o["resume"])
                policies.check_can_control_run(account, run)
            else:
                run = Run.objects.filter(pk=o["resume"]).first()
            if run is None:
                raise CommandError(f"No run #{o['resume']}.")
            return services.run_resume(run=run)
        if account is not None:
            dataset = policies.access_dataset(account, o["dataset"])
            policies.check_can_launch_run(account, dataset)
        else:
            dataset = Dataset.objects.filter(name=o["dataset"]).first()
        if dataset is None:
            raise CommandError(f"No dataset named {o['dataset']!r}.")
        version = None
        if o["exemplars"] and o["zero_shot"]:
            raise CommandError("--exemplars and --zero-shot exclude each other.")
        if o["exemplars"]:
            version = version_from_spec(o["exemplars"])
            if version is None:
                raise CommandError(f"No published version {o['exemplars']!r} of an exemplar set.")
        try:
            return services.run_create_agent(
                dataset=dataset, name=o["name"] or f"{o['strategy']} on {dataset.name}", strategy=o["strategy"],
                exemplar_set_version=version, zero_shot=o["zero_shot"], paper_replica=o["paper_replica"],
                db_ids=o["db"], limit=o["limit"], sample=o["sample"], seed=o["seed"],
                executable_only=o["executable_only"],
                max_concurrency=o["concurrency"], spend_cap=o["spend_cap"], pool=o["pool"], without=o["without"],
                user=account)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None

    def _report(self, run: Run, o) -> None:
        sample = run.config.get("sample") or {}
        kind = "per tables-joined bucket sample" if sample.get("mode") == "join-buckets" else "random sample"
        self.stdout.write(f"Run #{run.pk} started: {run.items.count()} questions"
                          + (f" ({kind}, seed {sample['seed']})." if sample.get("seed") is not None else "."))
        pool = run.config.get("example_pool")
        if pool:
            self.stdout.write(f"Example pool: {pool['source']}, {pool['size']} question-SQL pairs; rule "
                              f"{pool.get('rule')}: {pool.get('rule_text')}.")
        if run.config.get("without"):
            self.stdout.write(f"Without: {', '.join(run.config['without'])}.")
        if not o["wait"]:
            return
        while True:
            run.refresh_from_db()
            progress = services.run_progress(run=run)
            state = (f", stalled for {progress['stalled_s']:.0f} s" if progress["stalled_s"] else
                     f", about {progress['eta_s']:.0f} s left" if progress["eta_s"] else "")
            self.stdout.write(f"\r{progress['finished']}/{progress['total']} done, {progress['active']} running{state}",
                              ending="")
            self.stdout.flush()
            if run.status not in (Run.Status.RUNNING, Run.Status.EVALUATING, Run.Status.PENDING):
                break
            time.sleep(2)
        self.stdout.write("")
        self.stdout.write(selectors.render_summary(selectors.run_summary(run=run)))
