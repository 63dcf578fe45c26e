"""Launching and resuming a run are audited with who did it (the audit log, agent/services/audit.py)."""

from __future__ import annotations

import pytest

from agent.models import AuditEntry
from agent.roles import OPERATOR, VIEWER
from agent.services import audit
from annotations.runs import services
from tests.conftest import give_roles
from tests.conftest import group_of_testers as team_group

pytestmark = pytest.mark.django_db


def test_launch_and_resume_are_recorded_with_who_did_it(client, django_user_model, built_dataset, replay_llm):
    dataset = built_dataset(3)
    replay_llm([])
    operator = give_roles(django_user_model.objects.create_user("olga", password="pw-olga-123"), VIEWER, OPERATOR)
    operator.groups.add(team_group())
    client.force_login(operator)
    with audit.acting_as(None, via="web"):  # the page's launch calls this service with the signed-in account
        run = services.run_create_agent(dataset=dataset, name="nightly", strategy="hdsp", user=operator,
                                        max_concurrency=1)
    [launch] = AuditEntry.objects.filter(action=AuditEntry.Action.RUN_LAUNCH)
    assert launch.actor == operator and launch.via == "web" and launch.target == "nightly"
    assert launch.details["dataset"] == dataset.name and launch.details["questions"] == 3
    assert launch.details["strategy"] == "hdsp" and launch.details["max_concurrency"] == 1

    client.post(f"/runs/{run.pk}/resume/")
    [resume] = AuditEntry.objects.filter(action=AuditEntry.Action.RUN_RESUME)
    assert resume.actor == operator and resume.target_id == str(run.pk)
