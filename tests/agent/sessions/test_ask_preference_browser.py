"""In the browser: Ask shows the chosen database in large type and opens on it again after another import."""

import pytest

from agent import services
from agent.models import DatabaseGrant
from tests import conftest
from tests.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_ask_remembers_the_database_after_a_dataset_import(page, live_server, user, demo_database, make_sqlite,
                                                           replay_llm):
    def register(name: str):
        database = services.database_register(
            name=name, location=str(make_sqlite("CREATE TABLE t (x INTEGER);", name=f"{name}.sqlite")),
            refresh="sync")
        DatabaseGrant.objects.create(database=database, group=conftest.group_of_testers())

    register("shop")
    replay_llm(['Thought: t\nAction: ExecuteSQL("SELECT 1")', "Thought: ok\nAction: Done"])
    log_in(page, live_server, "ana", "pw-ana-123")
    page.goto(f"{live_server.url}/ask/")
    assert page.inner_text("#ask-database-name") == "chinook"
    page.select_option("select[name=database]", "shop")
    assert page.inner_text("#ask-database-name") == "shop"  # the large name follows the select at once
    page.fill("textarea[name=question]", "How many rows?")
    page.click("button:has-text('Ask')")
    page.wait_for_url("**/sessions/*/")

    register("battle_death")  # what importing Spider does: a database that sorts first
    page.goto(f"{live_server.url}/ask/")
    assert page.inner_text("#ask-database-name") == "shop"
    assert page.input_value("select[name=database]") == "shop"
    assert "the database you last asked about" in page.inner_text("#ask-database")
