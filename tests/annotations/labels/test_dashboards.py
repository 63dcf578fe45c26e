"""Agent figures of a run (rounds, tokens, tools per round, the tool before a failure) and queue assignment."""

import pytest
from django.urls import reverse

from agent.models import AgentSession, Turn
from annotations.labels import selectors, services

pytestmark = pytest.mark.django_db


def add_session(item, tools, tokens):
    session = AgentSession.objects.create(database=item.question.database, question=item.question.question,
                                          status="done", rounds=len(tools), prompt_tokens=tokens,
                                          completion_tokens=10)
    for index, tool in enumerate(tools):
        Turn.objects.create(session=session, index=index, tool=tool, action=f"{tool}()")
    item.session = session
    item.save(update_fields=["session"])


def test_rounds_tokens_tools_per_round_and_the_tool_before_a_failure(tiny_run, staff_client):
    add_session(tiny_run.items.get(question__index=0), ["SearchColumn", "ExecuteSQL", "Done"], 90)
    add_session(tiny_run.items.get(question__index=2), ["SearchValue", "ExecuteSQL", "FindShortestPath", "Done"], 190)
    figures = selectors.agent_figures(run=tiny_run)
    assert figures["cases"] == 2 and figures["avg_rounds"] == 3.5 and figures["avg_tokens"] == 150.0
    assert figures["rounds"] == [{"key": "3", "label": "3", "count": 1}, {"key": "4", "label": "4", "count": 1}]
    assert figures["per_round"][0] == {"round": 1, "Done": 0, "ExecuteSQL": 0, "FindShortestPath": 0,
                                       "SearchColumn": 1, "SearchValue": 1}
    assert figures["before_failure"] == [{"key": "FindShortestPath", "label": "FindShortestPath", "count": 1}]
    listed = selectors.chart_items(run=tiny_run, last_tool="FindShortestPath")
    assert [i.question.index for i in listed] == [2]
    csv_text = staff_client.get(reverse("labels:chart_csv", args=[tiny_run.pk, "tools"])).content.decode()
    assert csv_text.splitlines()[0] == "round,Done,ExecuteSQL,FindShortestPath,SearchColumn,SearchValue"
    assert csv_text.splitlines()[3].startswith("3,1,0,1,0,0")  # round 3: one Done, one FindShortestPath
    page = staff_client.get(reverse("labels:dashboard", args=[tiny_run.pk])).content.decode()
    assert "Last tool call before a failed answer" in page and "Tool usage per round" in page
    assert staff_client.get(reverse("labels:chart_csv", args=[tiny_run.pk, "nope"])).status_code == 404
    review = staff_client.get(reverse("labels:review", args=[tiny_run.items.get(question__index=2).pk])).content
    assert b"trajectory (4 turns)" in review and b"FindShortestPath()" in review


def test_a_queue_with_assignees_is_only_worked_by_them(tiny_run, staff, annotators, client):
    alice, bob = annotators[:2]
    queue = services.queue_create(run=tiny_run, name="alice only", user=staff, assignees=[alice],
                                  taxonomy_version=selectors.default_taxonomy_version())
    client.force_login(bob)
    assert client.get(reverse("labels:queue_next", args=[queue.pk])).url == reverse("labels:queue_list")
    assert "alice only" not in client.get(reverse("labels:queue_list")).content.decode()
    client.force_login(alice)
    assert client.get(reverse("labels:queue_next", args=[queue.pk])).url.startswith(
        reverse("labels:review", args=[tiny_run.items.get(question__index=1).pk]))
