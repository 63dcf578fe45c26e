"""`run --user` launches and resumes as that account: an Operator who sees the dataset, as on the pages."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from agent.models import AgentSession, AuditEntry
from agent.roles import OPERATOR, VIEWER
from annotations.runs import services
from annotations.runs.models import Run
from tests.conftest import give_roles
from tests.conftest import group_of_testers as team_group

pytestmark = pytest.mark.django_db


def test_run_as_a_named_account_follows_its_rules(built_dataset, replay_llm, django_user_model, user):
    dataset = built_dataset(2)
    replay_llm([])
    with pytest.raises(CommandError, match="ana may not do this: Launching runs needs the Operator role"):
        call_command("run", "--dataset", dataset.name, "--user", "ana", stdout=StringIO())
    outsider = give_roles(django_user_model.objects.create_user("otto", password="pw-otto-123"), VIEWER, OPERATOR)
    with pytest.raises(CommandError, match="No such dataset"):  # not granted its database
        call_command("run", "--dataset", dataset.name, "--user", "otto", stdout=StringIO())
    assert Run.objects.count() == 0

    outsider.groups.add(team_group())
    call_command("run", "--dataset", dataset.name, "--user", "otto", "--concurrency", "1", stdout=StringIO())
    run = Run.objects.get()
    assert run.created_by == outsider
    services.run_dispatch(run=run)
    sessions = list(AgentSession.objects.filter(run_items__run=run))
    # Its sessions count to the launcher's budget, but nobody asked them by hand (Ask's recent list stays clean).
    assert sessions and all(s.billed_to == outsider and s.created_by is None for s in sessions)
    launch = AuditEntry.objects.get(action=AuditEntry.Action.RUN_LAUNCH)
    assert launch.actor == outsider and launch.via == "command"
    with pytest.raises(CommandError, match="ana may not do this"):
        call_command("run", "--dataset", dataset.name, "--resume", str(run.pk), "--user", "ana", stdout=StringIO())
