import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from agent.models import Database

pytestmark = pytest.mark.django_db


def test_register_database_introspects_and_is_idempotent(chinook_copy, capsys):
    call_command("register_database", "music", str(chinook_copy))
    call_command("register_database", "music", str(chinook_copy))
    out = capsys.readouterr().out
    assert "music: SQLite file" in out and "11 tables" in out
    assert Database.objects.filter(name="music").count() == 1


def test_register_database_reports_a_missing_file(tmp_path):
    with pytest.raises(CommandError, match="No such file"):
        call_command("register_database", "ghost", str(tmp_path / "ghost.sqlite"))


def test_register_database_reports_an_unreachable_postgres():
    with pytest.raises(CommandError, match="cannot be read"):
        call_command("register_database", "pgdown", "postgresql://nobody@127.0.0.1:1/none")
    assert Database.objects.get(name="pgdown").status == Database.Status.ERROR


def test_bootstrap_registers_demo_and_admin_once(monkeypatch, capsys):
    monkeypatch.setenv("T2S_ADMIN_PASSWORD", "from-env-123")
    call_command("bootstrap")
    call_command("bootstrap")
    assert Database.objects.get(name="chinook").status == Database.Status.READY
    admins = get_user_model().objects.filter(is_superuser=True)
    assert admins.count() == 1 and admins[0].check_password("from-env-123")
