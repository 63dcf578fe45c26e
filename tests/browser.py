"""Headless Debian Chromium driven by Playwright (never a downloaded browser)."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = os.environ.get("T2S_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
]


@pytest.fixture(scope="session")
def browser():
    from tests.conftest import service_unavailable

    if not shutil.which(CHROMIUM):
        service_unavailable(f"Chromium at {CHROMIUM}")
    # Playwright's sync API runs an event loop in this thread; the live server's ORM calls are in other threads.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield instance
        instance.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1366, "height": 850})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def log_in(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("#login-form button[type=submit]")  # not the nav's "Log out" button of a signed-in browser
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def scripts_ready(page) -> None:
    """Wait until the page's deferred scripts (htmx, keyboard shortcuts) have run.

    A selector can match while the document is still being parsed, before `defer` scripts run, and a key
    pressed then is lost. `goto` already waits for this; a navigation by click or key does not.
    """
    page.wait_for_load_state("load")
