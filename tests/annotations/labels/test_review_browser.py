"""Labelling three questions with the keyboard in a real browser."""

import pytest
from django.urls import reverse

from annotations.labels.models import Label
from tests.annotations.labels.conftest import make_annotator
from tests.browser import log_in, scripts_ready

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def pressed(page, key):
    return page.locator(f'#label-buttons button[data-key="{key}"][aria-pressed="true"]')


def test_label_three_questions_with_the_keyboard(page, live_server, tiny_run, django_user_model, tmp_path):
    make_annotator(django_user_model, "alice")
    first = tiny_run.items.get(question__index=1)
    log_in(page, live_server, "alice", "pw-alice-123")
    page.goto(live_server.url + reverse("labels:review", args=[first.pk]))
    page.wait_for_selector("text=Which countries do singers come from?")
    assert page.is_visible('[data-suggestion="distinct"]')

    # A note typed first is kept (digits typed into it do not toggle labels) and goes with the label.
    page.fill("#label-note", "duplicates 2x")
    page.locator("h2").click()
    page.keyboard.press("4")
    pressed(page, "distinct").wait_for()
    assert page.input_value("#label-note") == "duplicates 2x"
    page.keyboard.press("n")

    page.wait_for_selector("text=Names of singers older than 35?")
    scripts_ready(page)
    page.keyboard.press("1")
    pressed(page, "golden_wrong").wait_for()
    page.keyboard.press("u")  # undo: golden wrong is taken back
    page.wait_for_selector('#label-buttons button[data-key="golden_wrong"][aria-pressed="false"]')
    page.keyboard.press("7")
    pressed(page, "selected_column").wait_for()
    # A note typed and left at once (before its debounce fires) is still saved on the way out.
    page.fill("#label-note", "country, not name")
    page.click("#next-link")

    page.wait_for_selector("text=Singers with a concert in 2014?")
    scripts_ready(page)
    page.keyboard.press("9")
    pressed(page, "reasoning").wait_for()
    page.screenshot(path=str(tmp_path / "review.png"), full_page=False)
    page.goto(live_server.url + reverse("labels:dashboard", args=[tiny_run.pk]))
    page.wait_for_selector("canvas[data-chart=categories]")
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)

    labels = {(lab.item.question.index, lab.category.key, lab.note) for lab in Label.objects.select_related(
        "item__question", "category")}
    assert labels == {(1, "distinct", "duplicates 2x"), (2, "selected_column", "country, not name"), (3, "reasoning", "")}
