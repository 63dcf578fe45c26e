"""Every option of every strategy is declared once (type, default, bounds or choices, help), refused out of bounds
on every path that starts work (API, pages, commands, runs; an experiment launches its runs through the same
check) with nothing stored, listed by the API
and shown in the forms; and a fresh install has a daily token budget per account."""

from __future__ import annotations

import dataclasses

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse

from agent.models import AgentSession
from agent.strategies import STRATEGIES, create_strategy
from agent.strategies.options import option_errors, option_specs

pytestmark = pytest.mark.django_db

SCRIPT = ['Thought: count\nAction: ExecuteSQL("SELECT count(*) FROM Artist")', "Thought: ok\nAction: Done"]
# The payloads: each one was accepted and stored (self_consistency 300 made 1,204 LLM calls).
UNBOUNDED = [({"self_consistency": 300}, "self_consistency must be from 1 to"),
             ({"max_refinements": 1000}, "max_refinements must be from 0 to"),
             ({"temperature": 100}, "temperature must be from 0 to 2"),
             ({"temperature": -5}, "temperature must be from 0 to 2")]
FREE_TEXT = {"model", "gold_sql"}  # checked elsewhere: the endpoint's allowed models; a benchmark's gold query


def _asked_alone(options: dict) -> str | None:
    """A strategy a single question may start (it needs no example pool) whose config declares these options."""
    return next((name for name, cls in sorted(STRATEGIES.items()) if not cls.needs_pool
                 and set(options) <= {f.name for f in dataclasses.fields(cls.config_class)}), None)


# The payloads a single session can carry: the others (self_consistency, max_refinements) belong to DART-SQL,
# which needs an example pool and so is refused on its own whatever its options; runs check those below.
ASKED_ALONE = [(options, message) for options, message in UNBOUNDED if _asked_alone(options)]
assert ASKED_ALONE  # temperature: the Interactive-T2S agent's too


def _outside(spec: dict) -> list:
    """Values just outside a declared option's bounds or choices."""
    values = []
    if spec["min"] is not None:
        values.append(spec["min"] - (1 if spec["type"] == "a whole number" else 0.01))
    if spec["max"] is not None:
        values.append(spec["max"] + (1 if spec["type"] == "a whole number" else 0.01))
    if spec["choices"] is not None:
        values.append("not-a-choice")
    return values


def _inside(spec: dict) -> list:
    return [v for v in (spec["min"], spec["max"], *(spec["choices"] or ())) if v is not None]


def _typed(spec: dict, value):
    return int(value) if spec["type"] == "a whole number" else value


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_option_is_declared_with_help_and_every_number_is_bounded(strategy):
    config_class = STRATEGIES[strategy].config_class
    specs = option_specs(config_class)
    assert [s["name"] for s in specs] == [f.name for f in dataclasses.fields(config_class)]
    for spec in specs:
        assert spec["help"], f"{strategy}.{spec['name']} has no help"
        if "number" in spec["type"]:
            assert spec["min"] is not None and spec["max"] is not None, f"{strategy}.{spec['name']} is unbounded"
        if spec["type"] == "a string" and spec["name"] not in FREE_TEXT:
            assert spec["choices"], f"{strategy}.{spec['name']} takes any string"


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_values_outside_each_declared_bound_are_refused_and_the_bounds_themselves_accepted(strategy):
    config_class = STRATEGIES[strategy].config_class
    for spec in option_specs(config_class):
        for value in _outside(spec):
            options = {spec["name"]: _typed(spec, value)}
            assert any(spec["name"] in e for e in option_errors(config_class, options)), options
            with pytest.raises(ValueError, match=spec["name"]):
                create_strategy(strategy, options)
        for value in _inside(spec):
            options = {spec["name"]: _typed(spec, value)}
            assert option_errors(config_class, options) == [], options
            create_strategy(strategy, options)


@pytest.mark.parametrize(("options", "message"), ASKED_ALONE)
def test_the_api_refuses_unbounded_options_and_stores_nothing(user_client, demo_database, replay_llm, options,
                                                              message):
    server = replay_llm(SCRIPT)
    response = user_client.post("/api/sessions/", {"database": "chinook", "question": "How many artists?",
                                                   "strategy": _asked_alone(options), "options": options},
                                content_type="application/json")
    assert response.status_code == 400 and message in str(response.json()["options"])
    assert not AgentSession.objects.exists()
    assert server.chat_requests() == []


def test_the_ask_page_refuses_them_and_shows_every_declared_option(user_client, demo_database, replay_llm):
    replay_llm(SCRIPT)
    page = user_client.get(reverse("ask")).content.decode()
    assert 'id="strategy-options"' in page and "self_consistency" in page and "sc_temperature" in page
    response = user_client.post(reverse("ask"), {"database": demo_database.pk, "question": "How many artists?",
                                                 "strategy": "interactive_t2s", "temperature": "100",
                                                 "tools": ["ExecuteSQL"]})
    assert response.status_code == 200 and not AgentSession.objects.exists()


def test_runs_and_commands_refuse_them_with_nothing_stored(demo_database, replay_llm,
                                                                       django_user_model):
    from annotations.runs import services as run_services
    from annotations.runs.models import Dataset, DatasetQuestion, Run

    replay_llm(SCRIPT)
    dataset = Dataset.objects.create(name="mini", kind="spider", source_path="/nowhere", question_count=1)
    DatasetQuestion.objects.create(dataset=dataset, index=0, db_id="chinook", database=demo_database,
                                   question="How many artists?", gold_sql="SELECT count(*) FROM Artist")
    for options, message in UNBOUNDED:
        with pytest.raises(ValidationError, match=message.split(" must")[0]):
            run_services.run_create_agent(dataset=dataset, name="flood", strategy="dart_sql", options=options)
    assert not Run.objects.exists()
    with pytest.raises(CommandError, match="max_rounds must be"):
        call_command("ask", "chinook", "How many artists?", "--max-rounds", "1000")
    assert not AgentSession.objects.exists()


def test_the_api_lists_every_strategy_with_its_options(user_client):
    listed = {s["name"]: {o["name"]: o for o in s["options"]}
              for s in user_client.get(reverse("api_strategies")).json()}
    assert set(listed) == set(STRATEGIES)
    sc = listed["dart_sql"]["self_consistency"]
    assert (sc["type"], sc["default"], sc["min"], sc["max"]) == ("a whole number", 1, 1, 10) and sc["help"]
    assert listed["interactive_t2s"]["observation_profile"]["choices"] == ["default", "paper"]


def test_a_fresh_install_has_a_daily_token_budget_per_account(user_client):
    budget = user_client.get(reverse("api_account")).json()["budget"]
    assert budget["tokens_per_day"] == 2_000_000 and budget["own_budget"] is False
