import time

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agent import policies
from agent.management.acting import on_behalf_of
from agent.models import AgentSession, Database, Turn
from agent.services import few_shot, sessions
from agent.strategies import FewShot
from agent.tools import tool_names

NO_WORKER_HINT_S = 15


class Command(BaseCommand):
    help = "Ask the agent a question about a registered database (queued on Celery, like the web page)."

    def add_arguments(self, parser):
        parser.add_argument("database")
        parser.add_argument("question")
        parser.add_argument("--evidence", default="")
        parser.add_argument("--strategy", default="interactive_t2s")
        parser.add_argument("--max-rounds", type=int)
        parser.add_argument("--exemplars", metavar="SET[:N]",
                            help="Few-shot exemplars from a published set (its newest version, or version N). "
                                 "Default for interactive_t2s: the paper's set that fits the database.")
        parser.add_argument("--zero-shot", action="store_true", help="No exemplars at all.")
        parser.add_argument("--paper-replica", action="store_true",
                            help="The agent as the paper's authors ran it: their exemplars, their observation "
                                 "formats, their code's SQL rules and case retry (README, Fidelity to the paper).")
        parser.add_argument("--without", action="append", default=[], choices=tool_names(), metavar="TOOL",
                            help="Switch a tool off (repeatable), e.g. --without FindShortestPath")
        parser.add_argument("--wait", action="store_true", help="Follow the session and print each turn.")
        parser.add_argument("--inline", action="store_true",
                            help="Run the session in this process instead of on a worker (implies --wait).")
        parser.add_argument("--user", metavar="USERNAME",
                            help="Ask as this account: its grants and role are checked as on Ask, its daily budget "
                                 "counts the session, the session is its own. Without it: a trusted operator session.")

    def handle(self, *args, database, question, evidence, strategy, max_rounds, exemplars, without, wait, inline,
               zero_shot=False, paper_replica=False, user=None, **options):
        with on_behalf_of(user) as account:
            session = self._create(account, database, question, evidence, strategy, max_rounds, exemplars, without,
                                   inline, zero_shot, paper_replica)
        if inline:
            sessions.session_execute(session_id=session.pk)
        if not (wait or inline):
            return
        self._follow(session.pk)

    def _create(self, account, database, question, evidence, strategy, max_rounds, exemplars, without, inline,
                zero_shot, paper_replica) -> AgentSession:
        if account is not None:
            db = policies.access_database(account, database)  # not granted: "No such database."
            policies.check_can_ask(account, db)
        else:
            db = Database.objects.filter(name=database).first()
        if db is None:
            raise CommandError(f"No database named {database!r}.")
        opts = {"enabled_tools": [t for t in tool_names() if t not in without]}
        if max_rounds:
            opts["max_rounds"] = max_rounds
        if exemplars and zero_shot:
            raise CommandError("--exemplars and --zero-shot exclude each other.")
        version = self._version(exemplars, account) if exemplars else None
        try:
            session = sessions.session_create(database=db, question=question, evidence=evidence, strategy=strategy,
                                              options=opts, few_shot=version, zero_shot=zero_shot,
                                              paper_replica=paper_replica, user=account,
                                              enqueue=not inline)
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        self.stdout.write(f"Session #{session.pk} queued." if not inline else f"Session #{session.pk}.")
        return session

    def _version(self, spec: str, account) -> FewShot:
        found = few_shot.by_name(spec, account)
        if found is None:
            raise CommandError(f"No published version {spec!r} of an exemplar set.")
        return found

    def _follow(self, session_id: int) -> None:
        shown = -1
        started = time.monotonic()
        hinted = False
        while True:
            session = AgentSession.objects.get(pk=session_id)
            for turn in Turn.objects.for_session(session).filter(index__gt=shown):
                self._print_turn(turn)
                shown = turn.index
            if not session.is_active:
                break
            if session.status == AgentSession.Status.QUEUED and not hinted and \
                    time.monotonic() - started > NO_WORKER_HINT_S:
                self.stderr.write("Still queued: is a worker running (make run)? Or use --inline.")
                hinted = True
            time.sleep(0.5)
        style = self.style.SUCCESS if session.status == AgentSession.Status.ANSWERED else self.style.WARNING
        self.stdout.write(style(f"\n{session.get_status_display()} after {session.rounds} rounds, "
                                f"{session.prompt_tokens}+{session.completion_tokens} tokens."))
        if session.error:
            self.stdout.write(f"Error: {session.error}")
        if session.final_sql:
            self.stdout.write(f"Final SQL: {session.final_sql}")
            if session.result:
                result = session.result
                self.stdout.write(" | ".join(result["columns"]))
                for row in result["rows"][:20]:
                    self.stdout.write(" | ".join("NULL" if v is None else str(v) for v in row))
                if result["total_rows"] > min(20, len(result["rows"])):
                    self.stdout.write(f"... {result['total_rows']} rows in all")

    def _print_turn(self, turn: Turn) -> None:
        self.stdout.write(f"\n[{turn.index + 1}] {turn.kind}")
        if turn.thought:
            self.stdout.write(f"Thought: {turn.thought}")
        if turn.action:
            self.stdout.write(f"Action: {turn.action}")
        if turn.observation is not None:
            self.stdout.write(f"Observation: {turn.observation}")
        if turn.completion is None and turn.error:
            self.stdout.write(f"Error: {turn.error}")
