"""Per-account daily budgets: every LLM call of a session passes the budget first; the account page and the API
show the budget, today's use and what is left."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from agent.llm import PlannedCall
from agent.models import AgentSession, LLMEndpoint, Turn
from agent.services import budgets, sessions

pytestmark = pytest.mark.django_db

QUESTION = "How many singers do we have?"
COUNT_SQL = "SELECT count(*) FROM singer"
FIRST = {"text": 'Thought: Count them.\nAction: ExecuteSQL("SELECT count(*) FROM singer")',
         "usage": {"prompt_tokens": 5000, "completion_tokens": 5}}
DONE = "Thought: done\nAction: Done"


def start(database, user, **options):
    session = sessions.session_create(database=database, question=QUESTION, options=options, user=user,
                                      enqueue=False)
    sessions.session_execute(session_id=session.pk)
    session.refresh_from_db()
    return session


def test_a_session_under_budget_stops_at_the_call_that_would_pass_it_and_keeps_its_turns(
        spider_database, replay_llm, user):
    db = spider_database("concert_singer")
    server = replay_llm([FIRST, DONE])
    budgets.budget_set(user=user, tokens_per_day=5000, cost_per_day=None)
    session = start(db, user, max_tokens=50)

    requests = server.chat_requests()
    # The first call fitted (its prompt as counted by the tokenizer plus max_tokens), the second did not.
    first_prompt, first_max = budgets.planned_tokens(
        PlannedCall(messages=requests[0].messages, model=None, max_tokens=50))
    assert first_prompt + first_max <= 5000
    assert len(requests) == 1
    assert session.status == AgentSession.Status.LLM_ERROR
    assert session.error.startswith("Daily budget reached: 5005 of 5000 tokens used today (UTC)")
    turns = list(Turn.objects.for_session(session))
    assert len(turns) == 2 and turns[0].tool == "ExecuteSQL" and turns[0].tool_ok
    assert turns[1].completion is None and turns[1].error.startswith("Daily budget reached")
    assert session.final_sql == COUNT_SQL  # what was executed before the stop stays the prediction

    assert budgets.usage_today(user) == (5005, 0.0)
    # Spent: a new session is refused before anything is stored or queued.
    with pytest.raises(ValidationError) as refused:
        sessions.session_create(database=db, question="again", user=user, enqueue=False)
    assert "Daily budget reached" in refused.value.message_dict["budget"][0]
    assert AgentSession.objects.count() == 1


def test_the_first_call_is_refused_when_its_prompt_and_max_tokens_do_not_fit(spider_database, replay_llm, user,
                                                                            settings):
    db = spider_database("concert_singer")
    server = replay_llm([DONE])
    settings.T2S = {**settings.T2S, "DAILY_TOKEN_BUDGET": 100}  # the default, no own budget
    session = start(db, user)
    assert server.chat_requests() == []
    assert session.status == AgentSession.Status.LLM_ERROR and "of 100 tokens" in session.error
    assert Turn.objects.for_session(session).count() == 1


def test_an_own_budget_of_zero_means_no_limit_and_empty_takes_the_default(user, settings):
    settings.T2S = {**settings.T2S, "DAILY_TOKEN_BUDGET": 100, "DAILY_COST_BUDGET": 2.5}
    assert budgets.budget_for(user) == budgets.Budget(tokens=100, cost=2.5, own=False)
    budgets.budget_set(user=user, tokens_per_day=0, cost_per_day=None)
    assert budgets.budget_for(user) == budgets.Budget(tokens=None, cost=2.5, own=True)
    settings.T2S = {**settings.T2S, "DAILY_TOKEN_BUDGET": 0, "DAILY_COST_BUDGET": 0}
    budgets.budget_set(user=user, tokens_per_day=None, cost_per_day=None)
    assert budgets.budget_for(user) == budgets.Budget(tokens=None, cost=None, own=True)


def test_cost_budget_stops_the_session_at_the_call_that_would_pass_it(spider_database, replay_llm, user):
    db = spider_database("concert_singer")
    server = replay_llm([FIRST, DONE])
    LLMEndpoint.objects.create(name="priced", base_url=server.url, model="replay-model", is_default=True,
                               input_price_per_mtok=10, output_price_per_mtok=10, api_key_env="OPENAI_API_KEY")
    budgets.budget_set(user=user, tokens_per_day=None, cost_per_day=0.06)
    session = start(db, user, max_tokens=50)
    assert len(server.chat_requests()) == 1
    assert session.status == AgentSession.Status.LLM_ERROR
    assert session.error.startswith("Daily budget reached: 0.050") and "of 0.0600 spent today (UTC)" in session.error
    tokens, cost = budgets.usage_today(user)
    assert tokens == 5005 and cost == pytest.approx(0.05005)


def test_usage_counts_only_todays_turns_of_this_account(spider_database, replay_llm, user, django_user_model):
    db = spider_database("concert_singer")
    replay_llm([FIRST, DONE, FIRST, DONE])
    start(db, user)
    other = django_user_model.objects.create_user("bo", password="pw-bo-12345")
    other.groups.add(*user.groups.all())
    start(db, other)
    yesterday = budgets.utc_day_start() - dt.timedelta(minutes=1)
    Turn.objects.filter(session__created_by=other).update(created_at=yesterday)
    assert budgets.usage_today(user)[0] == 5005 + Turn.objects.filter(session__created_by=user)[1].prompt_tokens \
        + Turn.objects.filter(session__created_by=user)[1].completion_tokens
    assert budgets.usage_today(other) == (0, 0.0)
    assert budgets.usage_today(user, now=timezone.now() + dt.timedelta(days=1)) == (0, 0.0)


def test_account_page_and_api_show_budget_use_and_what_is_left(spider_database, replay_llm, user, user_client):
    db = spider_database("concert_singer")
    replay_llm([FIRST, DONE])
    budgets.budget_set(user=user, tokens_per_day=20000, cost_per_day=None)
    start(db, user, max_tokens=50)
    used = budgets.usage_today(user)[0]
    page = user_client.get("/account/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "your own budget" in html
    tokens_row = html.split('id="budget-tokens"')[1].split("</tr>")[0]
    assert "<td>20,000</td>" in tokens_row and f"<td>{used:,}</td>" in tokens_row
    assert f"<td>{20000 - used:,}</td>" in tokens_row
    assert "no limit" in html.split('id="budget-cost"')[1].split("</tr>")[0]

    data = user_client.get("/api/account/").json()
    assert data["username"] == user.username and data["roles"] == ["Asker", "Viewer"]
    budget = data["budget"]
    assert budget["tokens_per_day"] == 20000 and budget["tokens_used_today"] == used
    assert budget["tokens_left"] == 20000 - used and budget["cost_per_day"] is None and budget["own_budget"]


def test_ask_says_what_is_left_only_when_there_is_a_limit(user, user_client, settings):
    settings.T2S = {**settings.T2S, "DAILY_TOKEN_BUDGET": 0}  # no limit (a fresh install has one)
    assert 'id="budget-left"' not in user_client.get("/ask/").content.decode()
    settings.T2S = {**settings.T2S, "DAILY_TOKEN_BUDGET": 1234}
    html = user_client.get("/ask/").content.decode()
    assert 'id="budget-left"' in html and "1,234 tokens" in html.split('id="budget-left"')[1].split("</small>")[0]
