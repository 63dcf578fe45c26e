import pytest

from agent.roles import ANNOTATOR
from annotations.exemplars import selectors
from annotations.models import Exemplar, ExemplarSetVersion
from tests.browser import log_in
from tests.conftest import give_roles

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def settled(pg) -> None:
    """Wait until htmx has finished swapping and settling (a click on a button not yet processed is lost).

    Page-side waits are written as functions: the CSP refuses Playwright's eval of a bare expression."""
    pg.wait_for_function("() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')")


def test_add_step_run_and_save(page, live_server, user, demo_database, tmp_path):
    give_roles(user, ANNOTATOR)
    log_in(page, live_server, "ana", "pw-ana-123")
    page.goto(f"{live_server.url}/exemplars/")
    page.fill("#new-exemplar textarea[name=question]", "How many albums has AC/DC?")
    page.click("#new-exemplar button[type=submit]")
    page.wait_for_selector("#add-step")
    # Step 1: SearchValue through its fields; the real tool fills the observation (htmx swap).
    settled(page)
    page.select_option("#add-step select[name=tool]", "SearchValue")
    page.wait_for_selector("#add-step input[name=value]")
    page.fill("#add-step textarea[name=thought]", "Find the artist.")
    page.fill("#add-step input[name=value]", "AC/DC")
    settled(page)
    page.click("#run-step")
    page.wait_for_selector("#step-0 pre.observation")
    assert "Artist.Name" in page.inner_text("#step-0 pre.observation")
    # Step 2: ExecuteSQL.
    settled(page)
    page.select_option("#add-step select[name=tool]", "ExecuteSQL")
    page.wait_for_selector("#add-step textarea[name=sql]")
    page.fill("#add-step textarea[name=sql]", "SELECT COUNT(*) FROM Album WHERE ArtistId = 1")
    settled(page)
    page.click("#run-step")
    page.wait_for_selector("#step-1 pre.observation")
    # Done: the final SQL is checked and shown.
    settled(page)
    page.select_option("#add-step select[name=tool]", "Done")
    settled(page)
    page.click("#run-step")
    page.wait_for_selector("text=executes")
    # Move step 2 up: it becomes step 1 and both are marked stale, then run again.
    settled(page)
    page.click("#step-1 button[aria-label='Move up']")
    page.wait_for_selector("#step-1 .badge.stale")
    settled(page)
    page.click("text=Run them again")
    page.wait_for_selector("#step-1 .badge.ok")
    settled(page)
    page.click("#step-1 button[aria-label='Move up']")  # back to the original order
    page.wait_for_selector("text=Run them again")
    settled(page)
    page.click("text=Run them again")
    page.wait_for_function("() => !document.querySelector('.badge.stale')")
    # Save the draft with a tag, then submit it for review.
    page.eval_on_selector("details:has(#exemplar-form)", "d => { d.open = true; }")
    page.fill("#exemplar-form input[name=tags]", "1 join, count")
    settled(page)
    page.click("#exemplar-form button[type=submit]")
    page.wait_for_selector("text=Saved")
    settled(page)
    page.click("#submit-review")
    page.wait_for_selector("#state:has-text('In review')")
    page.screenshot(path=str(tmp_path / "console.png"), full_page=True)
    exemplar = Exemplar.objects.get(database=demo_database)
    assert exemplar.state == Exemplar.State.IN_REVIEW and exemplar.tags == ["1 join", "count"]
    assert [s.action.split("(")[0] for s in exemplar.steps.order_by("position")] == [
        "SearchValue", "ExecuteSQL", "Done"]


def test_build_a_two_shot_set_publish_and_preview_in_the_browser(page, live_server, staff, demo_database,
                                                                 build_exemplar, tmp_path):
    # A one-person install: the superuser authors, self-approves (recorded as such) and publishes.
    shots = []
    for question, sql in [("How many albums has AC/DC?", "SELECT COUNT(*) FROM Album WHERE ArtistId = 1"),
                          ("How many genres are there?", "SELECT COUNT(*) FROM Genre")]:
        exemplar = build_exemplar(demo_database, staff, question=question,
                                  actions=[("Count.", f'ExecuteSQL("{sql}")'), ("Done.", "Done")])
        shots.append(exemplar)
    log_in(page, live_server, "sam", "pw-sam-123")
    for exemplar in shots:
        page.goto(f"{live_server.url}{exemplar.get_absolute_url()}")
        page.click("#submit-review")
        page.wait_for_selector("#state:has-text('In review')")
        page.click("button[value=approve]")
        page.wait_for_selector("#state:has-text('Approved')")
    page.goto(f"{live_server.url}/exemplars/sets/")
    page.fill("#new-set input[name=name]", "demo 2-shot")
    page.click("#new-set button[type=submit]")
    page.wait_for_selector("#publish-form")
    page.fill(f"input[name=position_{shots[1].pk}]", "1")
    page.fill(f"input[name=position_{shots[0].pk}]", "2")
    page.fill("#publish-form input[name=note]", "first 2-shot")
    page.click("#publish-form button[type=submit]")
    page.wait_for_selector("#version-tokens")
    assert "estimate" in page.inner_text("#version-tokens")
    page.click("text=Preview the prompt")
    page.fill("#preview-form textarea[name=question]", "Which artist has the most albums?")
    page.click("#preview-form button[type=submit]")
    page.wait_for_selector("#message-system")
    system = page.inner_text("#message-system")
    assert system.index("Q: How many genres are there?") < system.index("Q: How many albums has AC/DC?")
    assert "Q: Which artist has the most albums?" in page.inner_text("#message-user")
    assert "estimate" in page.inner_text("#prompt-tokens")
    page.screenshot(path=str(tmp_path / "preview.png"), full_page=False)
    version = ExemplarSetVersion.objects.get(exemplar_set__name="demo 2-shot")
    assert [e["exemplar_id"] for e in version.exemplars] == [shots[1].pk, shots[0].pk]
    assert selectors.exemplars_for_version(version)[0].question == "How many genres are there?"
