import pytest

from tests.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_log_in_and_browse_the_demo_schema(page, live_server, staff, demo_database, tmp_path):
    log_in(page, live_server, "sam", "pw-sam-123")
    page.click("nav >> text=Databases")
    page.click("table >> a:has-text('chinook')")
    page.wait_for_selector("h2:has-text('chinook')")
    # The first table opens with its rows loaded by htmx.
    page.wait_for_selector("text=First rows of Album (347 in all)")
    # Opening another table loads its rows on demand.
    page.click("summary:has-text('Genre')")
    page.wait_for_selector("text=First rows of Genre (25 in all)")
    assert page.is_visible("text=Rock")
    page.screenshot(path=str(tmp_path / "schema.png"), full_page=False)
