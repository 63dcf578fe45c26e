"""The Content-Security-Policy: scripts only from our origin, none inline, and the main pages break no rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from agent.roles import ANNOTATOR, CURATOR
from agent.services import sessions
from annotations.exemplars import services as exemplar_services
from tests.annotations.labels.conftest import seeded, tiny_run  # noqa: F401  (fixtures)
from tests.browser import log_in
from tests.conftest import give_roles

TEMPLATES = Path(settings.BASE_DIR) / "templates"
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
HANDLER_ATTRIBUTE = re.compile(r"<[^>]*\son[a-z]+\s*=", re.IGNORECASE)


def test_every_response_carries_a_policy_without_inline_scripts(client, user):
    client.force_login(user)
    for url in (reverse("login"), reverse("ask"), "/api/", "/static/css/studio.css"):
        policy = client.get(url)["Content-Security-Policy"]
        directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
        assert directives["script-src"] == "'self'", url
        assert "unsafe" not in directives["default-src"] and directives["object-src"] == "'none'"


def test_templates_hold_no_inline_script_and_no_handler_attribute():
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        for pattern in (INLINE_SCRIPT, HANDLER_ATTRIBUTE):
            offenders += [f"{path.relative_to(TEMPLATES)}: {m.group(0)[:80]}" for m in pattern.finditer(text)
                          if 'type="application/json"' not in m.group(0)]
    assert offenders == [], "move these into static/js/*.js:\n" + "\n".join(offenders)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_main_pages_log_no_csp_violation(page, live_server, staff, demo_database, replay_llm, tiny_run):  # noqa: F811
    give_roles(staff, ANNOTATOR, CURATOR)
    replay_llm([
        'Thought: Count the albums.\nAction: ExecuteSQL("SELECT count(*) FROM Album")',
        "Thought: That is the answer.\nAction: Done",
    ])
    session = sessions.session_create(database=demo_database, question="How many albums?", user=staff,
                                      enqueue=False)
    sessions.session_execute(session_id=session.pk)
    exemplar = exemplar_services.exemplar_create(user=staff, database=demo_database, question="How many albums?")
    exemplar_services.step_add(exemplar=exemplar, user=staff, thought="Count.",
                               action='ExecuteSQL("SELECT count(*) FROM Album")')
    item = tiny_run.items.get(question__index=1)

    violations: list[str] = []
    page.on("console", lambda msg: violations.append(f"{page.url}: {msg.text}")
            if "Content Security Policy" in msg.text else None)
    log_in(page, live_server, "sam", "pw-sam-123")
    pages = [
        (reverse("ask"), "textarea[name=question]"),
        (reverse("database_detail", args=["chinook"]), "text=First rows of Album"),  # rows loaded by htmx
        (reverse("session_detail", args=[session.pk]), "#final-sql"),
        (reverse("exemplars:exemplar_detail", args=[exemplar.pk]), "#step-0 pre.observation"),
        (reverse("exemplars:exemplar_list"), "select[name=state]"),
        (reverse("labels:overview"), "h2"),
        (reverse("labels:review", args=[item.pk]), "#label-buttons"),
        (reverse("labels:dashboard", args=[tiny_run.pk]), "canvas[data-chart=categories]"),
        (reverse("tool_console"), "#tool-form"),
        (reverse("api_docs"), ".swagger-ui .info"),  # Swagger UI built by its own script file
        (reverse("admin:auth_user_change", args=[staff.pk]), "#user_form"),
        ("/api/databases/", ".response-info"),  # DRF's browsable API
    ]
    for url, ready in pages:
        page.goto(live_server.url + url)
        page.wait_for_selector(ready)
        page.wait_for_load_state("networkidle")
    # htmx still works with its indicator style shipped in CSS: a label toggles through an hx-post.
    page.goto(live_server.url + reverse("labels:review", args=[item.pk]))
    page.wait_for_selector("#label-buttons")
    page.locator("h2").click()
    page.keyboard.press("4")
    page.wait_for_selector('#label-buttons button[data-key="distinct"][aria-pressed="true"]')
    # The tool console's selects submit on change from studio.js (no inline onchange=).
    page.goto(live_server.url + reverse("tool_console"))
    page.select_option("select[name=tool]", "ExecuteSQL")
    page.wait_for_url("**tool=ExecuteSQL**")
    assert violations == []
