"""In the browser: the launch form shows its estimate and refreshes it as the choices change."""

import pytest

from agent.roles import OPERATOR
from tests.browser import log_in
from tests.conftest import give_roles

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_estimate_follows_the_sample_choices(page, live_server, user, built_dataset, replay_llm, tmp_path):
    dataset = built_dataset(30)
    replay_llm(["Thought: x\nAction: Done"])
    give_roles(user, OPERATOR)
    log_in(page, live_server, "ana", "pw-ana-123")
    page.goto(f"{live_server.url}{dataset.get_absolute_url()}")
    page.wait_for_selector("#run-estimate >> text=Give the sample size N")  # random by default: N needed
    page.fill("input[name=launch-limit]", "7")
    page.wait_for_selector("#estimate-questions >> text=7 questions")
    assert "prompt tokens per question" in page.inner_text("#estimate-tokens")
    page.check("input[name=launch-sample][value=all]")
    page.wait_for_selector("#estimate-questions >> text=30 questions")
    page.screenshot(path=str(tmp_path / "launch.png"), full_page=True)
