"""Ask opens on the database and strategy the account last asked with, and never switches it silently."""

import pytest
from django.urls import reverse

from agent import services
from agent.models import AskPreference, DatabaseGrant
from tests import conftest

pytestmark = pytest.mark.django_db

SCRIPT = ['Thought: count\nAction: ExecuteSQL("SELECT 1")', "Thought: ok\nAction: Done"]


@pytest.fixture
def register(make_sqlite):
    def make(name: str, granted: bool = True):
        database = services.database_register(
            name=name, location=str(make_sqlite("CREATE TABLE t (x INTEGER);", name=f"{name}.sqlite")),
            refresh="sync")
        if granted:
            DatabaseGrant.objects.create(database=database, group=conftest.group_of_testers())
        return database

    return make


def selected(html: str) -> str:
    return html.split('id="ask-database-name">', 1)[1].split("<", 1)[0]


def ask(client, database: str, strategy: str = "interactive_t2s"):
    return client.post(reverse("ask"), {"database": database, "question": "How many?", "strategy": strategy,
                                        "tools": ["ExecuteSQL"]})


def test_a_new_account_starts_on_the_demo_not_the_first_database(user_client, demo_database, register):
    register("battle_death")  # sorts before chinook, as after importing Spider
    html = user_client.get(reverse("ask")).content.decode()
    assert selected(html) == "chinook" and "the demo database" in html
    assert 'id="ask-strategy-name">Interactive-T2S' in html


def test_the_last_database_and_strategy_are_remembered_per_account(user_client, user, demo_database, register,
                                                                   replay_llm, client, django_user_model):
    register("shop")
    replay_llm(SCRIPT)
    assert ask(user_client, "shop", "hdsp").status_code == 302
    assert AskPreference.objects.get(user=user).database.name == "shop"
    register("battle_death")  # a later import adds databases: the choice stays
    html = user_client.get(reverse("ask")).content.decode()
    assert selected(html) == "shop" and "the database you last asked about" in html
    assert '<option value="hdsp" selected>' in html and 'id="ask-strategy-name">HDSP' in html
    other = django_user_model.objects.create_user("bo", "bo@example.com", "pw-bo-12345")
    other.groups.add(conftest.group_of_testers())
    client.force_login(other)  # another account keeps its own default
    assert selected(client.get(reverse("ask")).content.decode()) == "chinook"


def test_a_database_no_longer_available_is_said_not_silently_replaced(user_client, user, demo_database, register,
                                                                      replay_llm):
    shop = register("shop")
    replay_llm(SCRIPT)
    ask(user_client, "shop")
    DatabaseGrant.objects.filter(database=shop).delete()
    html = user_client.get(reverse("ask")).content.decode()
    assert "The database you last asked about, shop, is not available now" in html
    assert selected(html) == "chinook"


def test_a_refused_question_remembers_nothing(user_client, user, demo_database, register, settings):
    register("shop")
    settings.T2S = {**settings.T2S, "LLM_MODEL": "", "LLM_BASE_URL": ""}
    ask(user_client, "shop")
    assert not AskPreference.objects.exists()
