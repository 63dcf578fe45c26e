from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from agent.management.acting import on_behalf_of
from annotations import policies
from annotations.experiments import selectors, services
from annotations.experiments.models import Candidate
from annotations.models import Exemplar, ExemplarSet


class Command(BaseCommand):
    help = ("Compose a candidate version of an exemplar set (a draft of its next version: the published one plus "
            "added, removed or edited exemplars, drafts allowed), print it, or publish it.")

    def add_arguments(self, parser):
        parser.add_argument("--set", required=True, dest="set_name", metavar="NAME")
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--new", action="store_true", help="Start a candidate from the latest published version.")
        target.add_argument("--number", type=int, help="An existing candidate of the set.")
        parser.add_argument("--title", default=None)
        parser.add_argument("--add", type=int, action="append", default=[], metavar="EXEMPLAR_ID")
        parser.add_argument("--remove", type=int, action="append", default=[], metavar="EXEMPLAR_ID")
        parser.add_argument("--current", type=int, action="append", default=[], metavar="EXEMPLAR_ID",
                            help="Send this exemplar's current content instead of its published copy.")
        parser.add_argument("--publish", action="store_true", help="Publish it as the set's next version.")
        parser.add_argument("--confirm-regression", action="store_true",
                            help="Publish even though the latest experiment of exactly this content regressed.")
        parser.add_argument("--note", default="")
        parser.add_argument("--discard", action="store_true")
        parser.add_argument("--user", metavar="USERNAME",
                            help="Act as this account (a Curator); without it: a trusted operator command.")

    def handle(self, *args, **o):
        with on_behalf_of(o.get("user")) as account, transaction.atomic():  # all the edits or none
            sets = policies.visible_sets(account) if account is not None else ExemplarSet.objects.all()
            exemplar_set = sets.filter(name=o["set_name"]).first()
            if exemplar_set is None:
                raise CommandError(f"No exemplar set {o['set_name']!r}.")
            exemplars = policies.visible_exemplars(account) if account is not None else Exemplar.objects.all()
            try:
                if o["new"]:
                    candidate = services.candidate_create(exemplar_set=exemplar_set, user=account,
                                                          title=o["title"] or "")
                else:
                    candidates = (policies.visible_candidates(account) if account is not None
                                  else Candidate.objects.all())
                    candidate = candidates.filter(exemplar_set=exemplar_set, number=o["number"]).first()
                    if candidate is None:
                        raise CommandError(f"No candidate {o['number']} of {exemplar_set.name}.")
                    if o["title"] is not None:
                        services.candidate_update(candidate=candidate, user=account, title=o["title"])
                self._edit(candidate, exemplars, account, o)
                if o["discard"]:
                    services.candidate_discard(candidate=candidate, user=account)
                if o["publish"]:
                    version = services.candidate_publish(candidate=candidate, user=account, note=o["note"],
                                                         confirm_regression=o["confirm_regression"])
                    self.stdout.write(f"Published {candidate} as {exemplar_set.name} v{version.number}.")
                    return
            except ValidationError as exc:
                raise CommandError(" ".join(exc.messages)) from None
        self._print(candidate)

    def _edit(self, candidate, exemplars, account, o) -> None:
        for pk in o["add"]:
            exemplar = exemplars.filter(pk=pk).first()
            if exemplar is None:
                raise CommandError(f"No exemplar #{pk}.")
            services.candidate_add(candidate=candidate, exemplar=exemplar, user=account)
        for pk in o["remove"] + o["current"]:
            item = candidate.items.filter(exemplar_id=pk).first()
            if item is None:
                raise CommandError(f"Exemplar #{pk} is not in {candidate}.")
            if pk in o["remove"]:
                services.candidate_remove(candidate=candidate, item=item, user=account)
            else:
                services.candidate_use_current(candidate=candidate, item=item, user=account)

    def _print(self, candidate) -> None:
        candidate.refresh_from_db()
        rows = selectors.candidate_rows(candidate)
        content = selectors.candidate_content(candidate, [r["item"] for r in rows])
        changes = selectors.candidate_changes(candidate, content)
        self.stdout.write(f"{candidate} ({candidate.get_state_display().lower()}): {len(rows)} exemplars, "
                          f"{selectors.candidate_token_count(content)} tokens in the system message; added "
                          f"{changes['added'] or 'none'}, removed {changes['removed'] or 'none'}, edited "
                          f"{changes['edited'] or 'none'}")
        for i, r in enumerate(rows, 1):
            self.stdout.write(f"  {i}. #{r['item'].exemplar_id or '-'} {r['status']}, {r['state'].lower()}: "
                              f"{(r['content'].get('question') or '')[:70]}")
