"""A strategy that retrieves its examples from an example pool (it declares ``needs_pool``) is refused wherever a
single session starts without a pool: the Ask page, the sessions API, the ``ask`` command, a follow-up from the
page or the API, the service itself. Refused means a clear reason and nothing stored: no session, no turn, no
token counted, no LLM call. Strategies that need no pool still start on every one of those paths, and the
picker, the strategies API and the session page say which strategies need a pool.

The cases are generated from the registry's declarations and the table of entry points below, so a strategy or
an entry point added later is covered without a new test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse

from agent.models import AgentSession, AskPreference, Turn
from agent.services import budgets, sessions
from agent.strategies import STRATEGIES, create_strategy

pytestmark = pytest.mark.django_db

POOL = sorted(name for name, cls in STRATEGIES.items() if cls.needs_pool)
NO_POOL = sorted(name for name, cls in STRATEGIES.items() if not cls.needs_pool)
QUESTION = "How many artists are there?"


@dataclass
class World:
    client: object
    user: object
    database: object

    def parent(self, strategy: str) -> AgentSession:
        """A finished session of ``strategy``, as a run over a dataset (which has a pool) leaves one."""
        return AgentSession.objects.create(
            database=self.database, question="How many albums?", strategy=strategy, created_by=self.user,
            status=AgentSession.Status.ANSWERED, final_sql="SELECT count(*) FROM Album",
            result={"columns": ["count(*)"], "rows": [[347]], "total_rows": 1})


# Each entry point starts one session of a strategy and returns (started, what the person reads).
def _ask_page(world: World, strategy: str) -> tuple[bool, str]:
    response = world.client.post(reverse("ask"), {"database": world.database.name, "question": QUESTION,
                                                  "strategy": strategy, "tools": ["ExecuteSQL"]})
    return response.status_code == 302, response.content.decode()


def _api_create(world: World, strategy: str) -> tuple[bool, str]:
    response = world.client.post("/api/sessions/", {"database": world.database.name, "question": QUESTION,
                                                    "strategy": strategy}, content_type="application/json")
    assert response.status_code in (201, 400), response.content
    return response.status_code == 201, " ".join(response.json().get("strategy", [])) if response.status_code == 400 \
        else ""


def _ask_command(world: World, strategy: str) -> tuple[bool, str]:
    try:
        call_command("ask", world.database.name, QUESTION, "--strategy", strategy, "--user", world.user.username,
                     stdout=_Null(), stderr=_Null())
    except CommandError as exc:
        return False, str(exc)
    return True, ""


def _follow_up_page(world: World, strategy: str, parent: AgentSession) -> tuple[bool, str]:
    response = world.client.post(reverse("session_follow_up", args=[parent.pk]), {"question": "And the tracks?"},
                                 follow=True)
    return response.redirect_chain[-1][0] != parent.get_absolute_url(), response.content.decode()


def _follow_up_api(world: World, strategy: str, parent: AgentSession) -> tuple[bool, str]:
    response = world.client.post(f"/api/sessions/{parent.pk}/follow-up/", {"question": "And the tracks?"},
                                 content_type="application/json")
    assert response.status_code in (201, 400), response.content
    return response.status_code == 201, str(response.json()) if response.status_code == 400 else ""


def _service(world: World, strategy: str) -> tuple[bool, str]:
    try:
        sessions.session_create(database=world.database, question=QUESTION, strategy=strategy, user=world.user)
    except ValidationError as exc:
        return False, " ".join(exc.message_dict.get("strategy", []))
    return True, ""


class _Null:
    def write(self, *_args, **_kwargs) -> None:
        pass

    def flush(self) -> None:
        pass


# Entry points that start a session from nothing, and those that continue a session (its strategy).
STARTS: dict[str, Callable] = {"ask page": _ask_page, "sessions API": _api_create, "ask command": _ask_command,
                               "session_create": _service}
FOLLOW_UPS: dict[str, Callable] = {"follow-up page": _follow_up_page, "follow-up API": _follow_up_api}


@pytest.fixture
def world(user_client, user, demo_database, replay_llm):
    server = replay_llm([])  # an endpoint to snapshot; a started session is only queued here
    yield World(user_client, user, demo_database)
    assert server.chat_requests() == []  # neither a refused nor a queued session called the LLM


def _stored(user) -> tuple[int, int, tuple[int, float]]:
    return AgentSession.objects.count(), Turn.objects.count(), budgets.usage_today(user)


def _assert_refused_with_reason(started: bool, text: str, strategy: str) -> None:
    assert not started
    name = STRATEGIES[strategy].display_name()
    assert f"{name} needs a retrieval pool" in text, text
    assert "run it over a dataset" in text and "example pool" in text, text


def test_the_strategies_that_retrieve_examples_declare_it_as_runs_refuse_them():
    assert {"dart_sql", "scl_sql"} <= set(POOL) and "interactive_t2s" in NO_POOL
    # The declaration agrees with a run's launcher: a default configuration that needs a pool declares it.
    for name, cls in STRATEGIES.items():
        assert (create_strategy(name, {}).pool_needed() is not None) == cls.needs_pool, name


@pytest.mark.parametrize("strategy", POOL)
@pytest.mark.parametrize("entry", sorted(STARTS))
def test_a_single_question_refuses_a_strategy_that_needs_a_pool_and_stores_nothing(world, entry, strategy):
    before = _stored(world.user)
    started, text = STARTS[entry](world, strategy)
    _assert_refused_with_reason(started, text, strategy)
    assert _stored(world.user) == before


@pytest.mark.parametrize("strategy", POOL)
@pytest.mark.parametrize("entry", sorted(FOLLOW_UPS))
def test_a_follow_up_of_a_session_that_had_a_pool_is_refused_and_stores_nothing(world, entry, strategy):
    parent = world.parent(strategy)
    before = _stored(world.user)
    started, text = FOLLOW_UPS[entry](world, strategy, parent)
    _assert_refused_with_reason(started, text, strategy)
    assert _stored(world.user) == before
    assert not parent.follow_ups.exists()


@pytest.mark.parametrize("strategy", NO_POOL)
@pytest.mark.parametrize("entry", sorted(STARTS))
def test_a_strategy_that_needs_no_pool_still_starts(world, entry, strategy):
    before = AgentSession.objects.count()
    started, text = STARTS[entry](world, strategy)
    assert started, text
    assert AgentSession.objects.count() == before + 1
    assert AgentSession.objects.latest("pk").strategy == strategy


@pytest.mark.parametrize("strategy", NO_POOL)
@pytest.mark.parametrize("entry", sorted(FOLLOW_UPS))
def test_a_follow_up_of_a_strategy_that_needs_no_pool_still_starts(world, entry, strategy):
    parent = world.parent(strategy)
    started, text = FOLLOW_UPS[entry](world, strategy, parent)
    assert started, text
    assert parent.follow_ups.get().strategy == strategy


def test_a_session_given_a_pool_is_not_refused(world):
    pool = sessions.example_pool_store(source="test", examples=[])
    for strategy in POOL:
        session = sessions.session_create(database=world.database, question=QUESTION, strategy=strategy,
                                          user=world.user, example_pool=pool, enqueue=False)
        assert session.config["example_pool"]["id"] == pool.pk


def test_the_picker_shows_them_disabled_with_the_reason_and_opens_on_one_that_runs(world):
    page = world.client.get(reverse("ask")).content.decode()
    for strategy in POOL:
        label = f"{STRATEGIES[strategy].display_name()} — needs a retrieval pool: run it over a dataset"
        assert f'<option value="{strategy}" disabled>{label}</option>' in page
        assert f'id="needs-pool-{strategy}"' in page
    for strategy in NO_POOL:
        option = page.split(f'<option value="{strategy}"', 1)[1].split(">", 1)[0]
        assert "disabled" not in option
    assert 'id="ask-strategy-notice"' not in page


def test_a_remembered_strategy_that_needs_a_pool_is_said_not_silently_replaced(world):
    for strategy in POOL:
        AskPreference.objects.update_or_create(user=world.user, defaults={"database": world.database,
                                                                          "strategy": strategy})
        page = world.client.get(reverse("ask")).content.decode()
        name = STRATEGIES[strategy].display_name()
        assert f"The strategy you last asked with, {name}, needs a retrieval pool" in page
        first_offered = next(n for n, cls in STRATEGIES.items() if not cls.needs_pool)
        assert f'<option value="{first_offered}" selected>' in page
        assert f'<option value="{strategy}" disabled selected>' not in page


def test_the_strategies_api_lists_the_declaration(world):
    listed = {s["name"]: s for s in world.client.get(reverse("api_strategies")).json()}
    assert {name: s["needs_pool"] for name, s in listed.items()} == {n: c.needs_pool for n, c in STRATEGIES.items()}
    assert listed["dart_sql"]["title"] == "DART-SQL"


def test_the_session_page_of_a_run_session_offers_no_follow_up_and_says_why(world):
    for strategy in POOL:
        page = world.client.get(world.parent(strategy).get_absolute_url()).content.decode()
        assert 'id="follow-up-form"' not in page and 'id="follow-up-unavailable"' in page
        assert f"{STRATEGIES[strategy].display_name()} needs a retrieval pool" in page
    page = world.client.get(world.parent(NO_POOL[0]).get_absolute_url()).content.decode()
    assert 'id="follow-up-form"' in page and 'id="follow-up-unavailable"' not in page


def test_the_admin_adds_no_session_by_hand(client, staff, world):
    client.force_login(staff)
    before = _stored(world.user)
    assert client.get("/admin/agent/agentsession/add/").status_code == 403
    response = client.post("/admin/agent/agentsession/add/", {"database": world.database.pk, "question": QUESTION,
                                                              "strategy": POOL[0], "status": "queued"})
    assert response.status_code == 403 and _stored(world.user) == before


def test_the_fidelity_page_says_which_strategies_need_a_pool(world):
    page = world.client.get(reverse("fidelity")).content.decode()
    for name, cls in STRATEGIES.items():
        section = page.split(f'id="fidelity-{name}"', 1)[1].split("</article>", 1)[0]
        assert (f'id="needs-pool-{name}"' in section) == cls.needs_pool, name
