import sqlite3

import pytest

from agent import services as agent_services
from agent.strategies.prompt import Step
from annotations.exemplars import services
from annotations.exemplars.importer import import_interactive_t2s
from annotations.exemplars.lint import lint_exemplar, lint_steps
from annotations.models import Exemplar
from tests.conftest import SHARED_DIR

pytestmark = pytest.mark.django_db

QUESTION_SQL = "SELECT Name FROM Artist WHERE ArtistId = 1"


def test_lint_of_a_fresh_exemplar_is_clean(demo_database, author, build_exemplar):
    report = lint_exemplar(build_exemplar(demo_database, author))
    assert report.ok and report.drift_checked and report.drift_count == 0
    assert report.final_sql_ok and report.final_result.rows == [(2,)]
    assert report.step_count == 3 and report.token_estimate > 20


def test_drift_shows_when_the_database_changes_under_an_exemplar(chinook_copy, author, build_exemplar):
    database = agent_services.database_register(name="chinook-copy", location=str(chinook_copy), refresh="sync")
    exemplar = build_exemplar(database, author, question="Who is artist 1?", actions=[
        ("Look.", f'ExecuteSQL("{QUESTION_SQL}")'), ("Done.", "Done")])
    assert lint_exemplar(exemplar).drift_count == 0
    with sqlite3.connect(chinook_copy) as conn:
        conn.execute("UPDATE Artist SET Name = 'AC-DC' WHERE ArtistId = 1")
    conn.close()
    report = lint_exemplar(exemplar)
    assert report.drift_count == 1
    drift = report.steps[0].drift
    assert any(line.startswith("-") and "AC/DC" in line for line in drift)
    assert any(line.startswith("+") and "AC-DC" in line for line in drift)
    assert report.ok  # drift is a warning: the exemplar still parses and runs
    assert any("differs" in w for w in report.warnings)


def test_final_sql_that_no_longer_runs_is_an_error(chinook_copy, author, build_exemplar):
    database = agent_services.database_register(name="chinook-copy", location=str(chinook_copy), refresh="sync")
    exemplar = build_exemplar(database, author)
    with sqlite3.connect(chinook_copy) as conn:
        conn.execute("ALTER TABLE Album RENAME TO Record")
    conn.close()
    report = lint_exemplar(exemplar)
    assert report.final_sql_ok is False and not report.ok
    assert any("final SQL does not execute" in e for e in report.errors)


def test_unparseable_actions_and_missing_done_are_reported():
    report = lint_steps([Step("t", 'SearchColumn("a"'), Step("t", "Done"), Step("t", 'ExecuteSQL("SELECT 1")', "1")],
                        final_sql="")
    assert any("does not parse" in e for e in report.errors)
    assert any("Done must be the last step" in e for e in report.errors)
    assert "No final SQL." in report.errors
    assert "The trajectory does not end with Done." in report.warnings


@pytest.mark.shared_data
def test_imported_exemplars_without_a_registered_database_say_so():
    import_interactive_t2s(SHARED_DIR / "reference" / "interactive_t2s_prompts" / "bird-with_evidence")
    report = lint_exemplar(Exemplar.objects.first())
    assert not report.drift_checked and "not a registered database" in report.drift_unavailable
    assert report.ok and report.final_sql_ok is None


def test_submit_refuses_a_trajectory_without_done(demo_database, author):
    exemplar = services.exemplar_create(user=author, database=demo_database, question="q")
    services.step_add(exemplar=exemplar, user=author, thought="", action='ExecuteSQL("SELECT 1")')
    with pytest.raises(Exception, match="End the trajectory with Done"):
        services.exemplar_submit(exemplar=exemplar, user=author)
