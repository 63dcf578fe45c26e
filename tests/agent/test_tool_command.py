import pytest
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


def test_tool_command_prints_the_observation(demo_database, capsys):
    call_command("tool", "chinook", 'SearchValue("AC/DC")')
    assert "Artist.Name = 'AC/DC'" in capsys.readouterr().out
    call_command("tool", "chinook", 'FindShortestPath(start="Artist.Name", end="Track.Name")')
    assert "Artist.ArtistId = Album.ArtistId" in capsys.readouterr().out


def test_tool_command_reports_unknown_database_and_bad_action(demo_database):
    with pytest.raises(CommandError, match="No database named"):
        call_command("tool", "nope", 'SearchValue("x")')
    with pytest.raises(CommandError):
        call_command("tool", "chinook", "SearchValue(")


def test_tool_command_exits_non_zero_on_a_tool_error(demo_database, capsys):
    with pytest.raises(SystemExit) as caught:
        call_command("tool", "chinook", 'ExecuteSQL("SELECT nope FROM Artist")')
    assert caught.value.code == 1
    assert "no such column" in capsys.readouterr().out
