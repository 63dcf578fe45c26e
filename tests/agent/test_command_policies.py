"""Commands that act for a named account (--user) apply that account's rules, as the pages do; without --user they
are trusted operator tools. Either way the audit log names the command as the door."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from agent.models import AgentSession, AuditEntry
from agent.roles import CURATOR, VIEWER
from agent.services import budgets
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db

DONE = ['Thought: count\nAction: ExecuteSQL("SELECT count(*) FROM singer")', "Thought: done\nAction: Done"]


def ask(*args):
    out = StringIO()
    call_command("ask", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_ask_as_an_account_not_granted_the_database_reads_not_found(spider_database, django_user_model):
    spider_database("concert_singer")
    give_roles(django_user_model.objects.create_user("eve", password="pw-eve-12345"), VIEWER)  # no grant
    with pytest.raises(CommandError, match="No such database"):
        ask("concert_singer", "How many singers?", "--user", "eve")
    assert AgentSession.objects.count() == 0


def test_ask_as_an_account_without_the_asker_role_is_refused(spider_database, django_user_model, user):
    spider_database("concert_singer")
    user.groups.remove(*user.groups.filter(name="Asker"))
    with pytest.raises(CommandError, match="ana may not do this: Asking questions needs the Asker role"):
        ask("concert_singer", "How many singers?", "--user", "ana")
    assert AgentSession.objects.count() == 0


def test_ask_as_an_asker_makes_the_session_theirs_and_their_budget_applies(spider_database, replay_llm, user):
    spider_database("concert_singer")
    replay_llm(DONE)
    out = ask("concert_singer", "How many singers?", "--user", "ana", "--inline")
    session = AgentSession.objects.get()
    assert session.created_by == user and session.status == AgentSession.Status.ANSWERED, out
    budgets.budget_set(user=user, tokens_per_day=1, cost_per_day=None)
    with pytest.raises(CommandError, match="Daily budget reached"):
        ask("concert_singer", "And now?", "--user", "ana")


def test_without_user_the_command_is_a_trusted_operator_tool(spider_database, replay_llm):
    spider_database("concert_singer")
    replay_llm(DONE)
    ask("concert_singer", "How many singers?", "--inline")
    assert AgentSession.objects.get().created_by is None


def test_an_unknown_or_inactive_user_is_refused(spider_database, user):
    spider_database("concert_singer")
    with pytest.raises(CommandError, match="No active user 'nobody'"):
        ask("concert_singer", "q", "--user", "nobody")
    user.is_active = False
    user.save()
    with pytest.raises(CommandError, match="No active user 'ana'"):
        ask("concert_singer", "q", "--user", "ana")


def test_import_exemplars_as_a_non_curator_is_refused_before_reading(tmp_path, user, django_user_model):
    from annotations.models import ExemplarSet

    before = ExemplarSet.objects.count()  # the paper's sets, published at migrate
    with pytest.raises(CommandError, match="ana may not do this: Importing exemplar sets needs the Curator role"):
        call_command("import_exemplars", str(tmp_path / "missing.json"), "--format", "json", "--user", "ana")
    assert ExemplarSet.objects.count() == before
    give_roles(user, CURATOR)
    with pytest.raises(CommandError, match="not found"):  # allowed now: it gets as far as reading the file
        call_command("import_exemplars", str(tmp_path / "missing.json"), "--format", "json", "--user", "ana")


def test_register_database_is_audited_as_the_command(chinook_copy):
    call_command("register_database", "shop", str(chinook_copy), "--no-introspect", stdout=StringIO())
    entry = AuditEntry.objects.get(action=AuditEntry.Action.DATABASE_REGISTER, target="shop")
    assert entry.via == "command" and entry.actor is None
