"""In the browser: comparing two runs of more than 500 questions shows every one of them, page by page."""

import pytest

from tests.annotations.runs.test_compare import scored_run
from tests.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_compare_pages_through_all_520_questions_and_filters_flips(page, live_server, user, built_dataset):
    dataset = built_dataset(520)
    a = scored_run(dataset, "baseline", wrong={510})
    b = scored_run(dataset, "candidate", wrong={3})
    log_in(page, live_server, "ana", "pw-ana-123")
    page.goto(f"{live_server.url}/runs/compare/")
    page.select_option("select[name=a]", str(a.pk))
    page.select_option("select[name=b]", str(b.pk))
    page.click("button:has-text('Compare')")
    counts = page.inner_text("#compare-counts")
    assert "520 questions in either run; 520 in both: 1 wrong → right · 1 right → wrong · 518 both right" in counts
    assert page.locator("tr.pair-row").count() == 100
    assert "page 1 of 6" in page.inner_text("#compare-pages")
    for _ in range(5):
        page.click("#compare-pages a[rel=next]")
    assert "page 6 of 6 (501–520 of 520" in page.inner_text("#compare-pages")
    assert page.locator("tr.pair-row").count() == 20
    assert "How many items cost more than 519?" in page.inner_text("table.compare-pairs")

    page.select_option("select[name=kind]", "flips")
    page.click("button:has-text('Filter')")
    rows = page.locator("tr.pair-row")
    assert rows.count() == 2
    assert "wrong result" in rows.nth(1).inner_text() and "correct" in rows.nth(1).inner_text()
    assert "How many items cost more than 510?" in rows.nth(1).inner_text()
    assert "SELECT -1" in rows.nth(1).inner_text()  # A's wrong query, inline beside B's
    assert "CSV of these 2 questions" in page.inner_text("#compare-csv")
