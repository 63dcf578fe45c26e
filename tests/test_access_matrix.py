"""Every URL pattern and API route, for every role, against a declared expectation table.

The URLs are read from the URLconf, so a new URL without a row in ``EXPECTATIONS`` fails this test with the row
to add. A row says, per HTTP method, which roles may use the URL (the others get 403, or 404 where the object
itself is hidden), how to fill its arguments from the ``world`` (objects on a database granted to the role
users' team), and whether the URL shows an object of that database (``scoped``): then a user holding every role
but not granted the database gets 404 on it, exactly as for an object that does not exist.

How a response is judged:
- allowed: any status below 400, or 400/409 (a request refused on its content, e.g. an empty form on the API);
- denied: 403 or 404 for a signed-in user; a redirect to the login page (or 401/403 on the API) for anonymous.
Every request runs in a savepoint that is rolled back, so one request's side effects never change the next.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from agent.roles import ANNOTATOR, ASKER, CURATOR, DATA_ADMIN, OPERATOR, ROLES

NO_ROLE = "(no role)"
OUTSIDER = "(every role, not granted)"
ALL = frozenset(ROLES)                 # every role (an account with no role gets 403 on every page)
ANYONE = ALL | {NO_ROLE}               # any signed-in account


def only(*roles: str) -> frozenset[str]:
    return frozenset(roles)


@dataclass(frozen=True)
class Rule:
    methods: dict[str, frozenset[str]]          # method -> roles allowed
    kwargs: Callable[[Any], dict] = lambda w: {}  # URL arguments from the world
    query: str | Callable[[Any], str] = ""       # query string appended to the URL (or from the world)
    data: Callable[[Any], dict] = lambda w: {}   # body of non-GET requests
    scoped: bool = False                         # shows an object of the granted database
    public: bool = False                         # anonymous users may use it too (login, token)
    api: bool = False                            # JSON API (anonymous gets 401/403, bodies are JSON)


@dataclass(frozen=True)
class NamespaceRule:
    """Every URL of a namespace (the admin): no role may use it; anonymous users are sent to its login."""

    login_prefix: str


# --- the table: one row per URL name. Add yours here. ------------------------------------------------------
EXPECTATIONS: dict[str, Rule] = {
    # accounts and API plumbing
    "login": Rule({"GET": ANYONE}, public=True),
    "favicon": Rule({"GET": ANYONE}, public=True),
    "logout": Rule({"POST": ANYONE}),
    "api_token": Rule({"POST": ANYONE}, public=True, api=True),
    "api_schema": Rule({"GET": ALL}, api=True),
    "api_docs": Rule({"GET": ALL}, api=True),
    "api-root": Rule({"GET": ALL}, api=True),
    "api_account": Rule({"GET": ALL}, api=True),
    "api_tools": Rule({"GET": ALL}, api=True),
    "api_strategies": Rule({"GET": ALL}, api=True),
    # agent pages
    "home": Rule({"GET": ALL}),
    "fidelity": Rule({"GET": ALL}),
    "account": Rule({"GET": ALL}),
    "audit_list": Rule({"GET": only(DATA_ADMIN)}),
    "ask": Rule({"GET": ALL, "POST": only(ASKER)}),
    "session_list": Rule({"GET": ALL}),
    "session_detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.session.pk}, scoped=True),
    "session_cancel": Rule({"POST": only(ASKER)}, kwargs=lambda w: {"pk": w.session.pk}, scoped=True),
    # the person who asked (the world's Asker) or an Annotator judges an answer; anyone who sees it takes its rows
    "session_feedback": Rule({"POST": only(ASKER, ANNOTATOR)}, kwargs=lambda w: {"pk": w.session.pk},
                             data=lambda w: {"verdict": "right"}, scoped=True),
    "session_result_csv": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.session.pk}, scoped=True),
    "session_follow_up": Rule({"POST": only(ASKER)}, kwargs=lambda w: {"pk": w.session.pk},
                              data=lambda w: {"question": "And from France?"}, scoped=True),
    "tool_console": Rule({"GET": only(ASKER), "POST": only(ASKER)}),
    "database_list": Rule({"GET": ALL}),
    "database_register": Rule({"GET": only(DATA_ADMIN), "POST": only(DATA_ADMIN)}),
    "database_upload": Rule({"GET": only(DATA_ADMIN), "POST": only(DATA_ADMIN)}),
    "import_job": Rule({"GET": only(OPERATOR)}, kwargs=lambda w: {"pk": w.import_job.pk}, scoped=True),  # its uploader
    "database_detail": Rule({"GET": ALL}, kwargs=lambda w: {"name": w.database.name}, scoped=True),
    "database_refresh": Rule({"POST": only(DATA_ADMIN)}, kwargs=lambda w: {"name": w.database.name}, scoped=True),
    # workspaces: members see them; Data admins in them (and the workspace's admins) manage members
    "workspace_list": Rule({"GET": ALL, "POST": only(DATA_ADMIN)}, data=lambda w: {"slug": "new-ws"}),
    "workspace_detail": Rule({"GET": ALL}, kwargs=lambda w: {"slug": w.workspace.slug}, scoped=True),
    "workspace_member_add": Rule({"POST": only(DATA_ADMIN)}, kwargs=lambda w: {"slug": w.workspace.slug},
                                 scoped=True, data=lambda w: {"kind": "user", "name": "u-viewer", "role": "member"}),
    "workspace_member_remove": Rule({"POST": only(DATA_ADMIN)}, scoped=True, kwargs=lambda w: {
        "slug": w.workspace.slug, "member_id": w.workspace.memberships.get().pk}),
    "workspace-list": Rule({"GET": ALL, "POST": only(DATA_ADMIN)}, api=True, data=lambda w: {"slug": "new-ws"}),
    "workspace-detail": Rule({"GET": ALL}, kwargs=lambda w: {"slug": w.workspace.slug}, scoped=True, api=True),
    "workspace-members": Rule({"POST": only(DATA_ADMIN)}, kwargs=lambda w: {"slug": w.workspace.slug}, scoped=True,
                              api=True, data=lambda w: {"user": "u-viewer"}),
    "workspace-members-remove": Rule({"POST": only(DATA_ADMIN)}, kwargs=lambda w: {"slug": w.workspace.slug},
                                     scoped=True, api=True, data=lambda w: {"group": "team"}),
    "table_rows": Rule({"GET": ALL}, kwargs=lambda w: {"name": w.database.name, "table": "singer"}, scoped=True),
    # agent API
    "database-list": Rule({"GET": ALL, "POST": only(DATA_ADMIN)}, api=True),
    "database-detail": Rule({"GET": ALL}, kwargs=lambda w: {"name": w.database.name}, scoped=True, api=True),
    "database-schema-detail": Rule({"GET": ALL}, kwargs=lambda w: {"name": w.database.name}, scoped=True, api=True),
    "session-list": Rule({"GET": ALL, "POST": only(ASKER)}, api=True),
    "session-detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.session.pk}, scoped=True, api=True),
    "session-cancel": Rule({"POST": only(ASKER)}, kwargs=lambda w: {"pk": w.session.pk}, scoped=True, api=True),
    "session-feedback": Rule({"GET": ALL, "POST": only(ASKER, ANNOTATOR)}, kwargs=lambda w: {"pk": w.session.pk},
                             data=lambda w: {"verdict": "wrong"}, scoped=True, api=True),
    "session-answer-rows": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.session.pk}, scoped=True, api=True),
    "session-follow-up": Rule({"POST": only(ASKER)}, kwargs=lambda w: {"pk": w.session.pk},
                              data=lambda w: {"question": "And from France?"}, scoped=True, api=True),
    "database-upload": Rule({"POST": only(DATA_ADMIN)}, api=True),
    "import-detail": Rule({"GET": only(OPERATOR)}, kwargs=lambda w: {"pk": w.import_job.pk}, scoped=True, api=True),
    # exemplars API
    "exemplar-list": Rule({"GET": ALL, "POST": only(ANNOTATOR, CURATOR)}, api=True),
    "exemplar-detail": Rule({"GET": ALL, "PATCH": only(ANNOTATOR, CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk},
                            scoped=True, api=True),
    "exemplar-step": Rule({"PATCH": only(ANNOTATOR, CURATOR), "DELETE": only(ANNOTATOR, CURATOR)},
                          kwargs=lambda w: {"pk": w.exemplar.pk, "step_id": w.step.pk}, scoped=True, api=True),
    "exemplar-step-run": Rule({"POST": only(ANNOTATOR, CURATOR)},
                              kwargs=lambda w: {"pk": w.exemplar.pk, "step_id": w.step.pk}, scoped=True, api=True),
    "exemplar-step-move": Rule({"POST": only(ANNOTATOR, CURATOR)},
                               kwargs=lambda w: {"pk": w.exemplar.pk, "step_id": w.step.pk}, scoped=True, api=True),
    "exemplar-steps-rerun": Rule({"POST": only(ANNOTATOR, CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk},
                                 scoped=True, api=True),
    "exemplar-steps": Rule({"POST": only(ANNOTATOR, CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk}, scoped=True,
                           api=True),
    "exemplar-submit": Rule({"POST": only(ANNOTATOR, CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk}, scoped=True,
                            api=True),
    "exemplar-review": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk}, scoped=True, api=True),
    "exemplar-set-list": Rule({"GET": ALL, "POST": only(CURATOR)}, api=True),
    "exemplar-set-detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.exemplar_set.pk}, scoped=True, api=True),
    "exemplar-set-publish": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.exemplar_set.pk}, scoped=True,
                                 api=True),
    "exemplar-set-upload": Rule({"POST": only(CURATOR)}, api=True),
    "exemplar-set-version-list": Rule({"GET": ALL}, api=True),
    "exemplar-set-version-detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.exemplar_set.versions.get().pk},
                                        scoped=True, api=True),
    # datasets and runs API
    "dataset-list": Rule({"GET": ALL, "POST": only(OPERATOR)}, api=True),
    "dataset-detail": Rule({"GET": ALL}, kwargs=lambda w: {"name": w.dataset.name}, scoped=True, api=True),
    "dataset-questions": Rule({"GET": ALL}, kwargs=lambda w: {"name": w.dataset.name}, scoped=True, api=True),
    "dataset-predictions": Rule({"POST": only(OPERATOR)}, kwargs=lambda w: {"name": w.dataset.name}, scoped=True,
                                api=True),
    "run-list": Rule({"GET": ALL, "POST": only(OPERATOR)}, api=True),
    "run-missing": Rule({"POST": only(OPERATOR)}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True, api=True),
    "run-detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True, api=True),
    "run-items": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True, api=True),
    "run-agreement": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True, api=True),
    "run-cancel": Rule({"POST": only(OPERATOR)}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True, api=True),
    "run-resume": Rule({"POST": only(OPERATOR)}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True, api=True),
    "run-compare": Rule({"GET": ALL}, query=lambda w: f"a={w.run.pk}&b={w.run.pk}", scoped=True, api=True),
    "queue-list": Rule({"GET": ALL, "POST": only(CURATOR)}, api=True),
    "queue-detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.queue.pk}, scoped=True, api=True),
    "session-turns": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.session.pk}, scoped=True, api=True),
    # exemplars (the Annotator user wrote the world's exemplar; Curators edit and review anyone's)
    "exemplars:exemplar_list": Rule({"GET": ALL}),
    "exemplars:exemplar_new": Rule({"GET": only(ANNOTATOR, CURATOR), "POST": only(ANNOTATOR, CURATOR)}),
    "exemplars:exemplar_detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.exemplar.pk}, scoped=True),
    "exemplars:exemplar_edit": Rule({"POST": only(ANNOTATOR, CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk},
                                    scoped=True),
    "exemplars:exemplar_lint": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.exemplar.pk}, scoped=True),
    "exemplars:exemplar_submit": Rule({"POST": only(ANNOTATOR, CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk},
                                      scoped=True),
    "exemplars:exemplar_review": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk},
                                      scoped=True),
    "exemplars:step_fields": Rule({"GET": only(ANNOTATOR, CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk},
                                  scoped=True),
    "exemplars:step_add": Rule({"POST": only(ANNOTATOR, CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk},
                               scoped=True),
    "exemplars:final_sql": Rule({"POST": only(ANNOTATOR, CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk},
                                scoped=True),
    "exemplars:steps_rerun": Rule({"POST": only(ANNOTATOR, CURATOR)}, kwargs=lambda w: {"pk": w.exemplar.pk},
                                  scoped=True),
    "exemplars:step_op": Rule({"POST": only(ANNOTATOR, CURATOR)},
                              kwargs=lambda w: {"pk": w.exemplar.pk, "step_id": w.step.pk, "op": "up"}, scoped=True),
    "exemplars:promote_session": Rule({"POST": only(ANNOTATOR, CURATOR)}, kwargs=lambda w: {"session_id": w.session.pk},
                                      scoped=True),
    "exemplars:set_list": Rule({"GET": ALL}),
    "exemplars:set_new": Rule({"GET": only(CURATOR), "POST": only(CURATOR)}),
    "exemplars:set_upload": Rule({"GET": only(CURATOR), "POST": only(CURATOR)}),
    "exemplars:set_detail": Rule({"GET": ALL}, kwargs=lambda w: {"set_id": w.exemplar_set.pk}, scoped=True),
    "exemplars:set_publish": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"set_id": w.exemplar_set.pk},
                                  scoped=True),
    "exemplars:version_diff": Rule({"GET": ALL}, kwargs=lambda w: {"set_id": w.exemplar_set.pk}, query="a=1&b=1",
                                   scoped=True),
    "exemplars:version_detail": Rule({"GET": ALL}, kwargs=lambda w: {"set_id": w.exemplar_set.pk, "number": 1},
                                     scoped=True),
    "exemplars:version_preview": Rule({"GET": ALL}, kwargs=lambda w: {"set_id": w.exemplar_set.pk, "number": 1},
                                      scoped=True),
    "exemplars:version_export": Rule({"GET": ALL}, kwargs=lambda w: {"set_id": w.exemplar_set.pk, "number": 1},
                                     scoped=True),
    # datasets and runs
    "runs:dataset_list": Rule({"GET": ALL, "POST": only(OPERATOR)}),
    "runs:dataset_detail": Rule({"GET": ALL, "POST": only(OPERATOR)}, kwargs=lambda w: {"name": w.dataset.name},
                                scoped=True),
    "runs:run_launch": Rule({"POST": only(OPERATOR)}, kwargs=lambda w: {"name": w.dataset.name}, scoped=True),
    "runs:run_estimate": Rule({"GET": only(OPERATOR)}, kwargs=lambda w: {"name": w.dataset.name}, scoped=True,
                              query="launch-sample=first&launch-limit=2"),
    "runs:run_list": Rule({"GET": ALL}),
    "runs:run_compare": Rule({"GET": ALL}),
    "runs:run_detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True),
    "runs:run_reevaluate": Rule({"POST": only(OPERATOR)}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True),
    "runs:run_item": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.run.pk, "item_id": w.item.pk}, scoped=True),
    "runs:run_missing": Rule({"POST": only(OPERATOR)}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True,
                             data=lambda w: {"choice": "wrong"}),
    "runs:run_control": Rule({"POST": only(OPERATOR)}, kwargs=lambda w: {"pk": w.run.pk, "action": "cancel"},
                             scoped=True),
    # labels
    "labels:overview": Rule({"GET": ALL}),
    "labels:review": Rule({"GET": ALL}, kwargs=lambda w: {"item_id": w.item.pk}, scoped=True),
    "labels:review_start": Rule({"POST": only(ANNOTATOR)}, kwargs=lambda w: {"item_id": w.item.pk}, scoped=True),
    "labels:review_leave": Rule({"POST": ALL}, kwargs=lambda w: {"item_id": w.item.pk}, scoped=True),
    "labels:toggle": Rule({"POST": only(ANNOTATOR)}, kwargs=lambda w: {"item_id": w.item.pk,
                                                                      "category_id": w.category.pk}, scoped=True),
    "labels:note": Rule({"POST": only(ANNOTATOR)}, kwargs=lambda w: {"item_id": w.item.pk}, scoped=True),
    "labels:corrected": Rule({"POST": only(ANNOTATOR)}, kwargs=lambda w: {"item_id": w.item.pk}, scoped=True),
    "labels:adjudicate": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"item_id": w.item.pk}, scoped=True),
    "labels:final_toggle": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"item_id": w.item.pk,
                                                                          "category_id": w.category.pk}, scoped=True),
    "labels:reveal": Rule({"POST": only(ANNOTATOR)}, kwargs=lambda w: {"item_id": w.item.pk}, scoped=True),
    "labels:queue_list": Rule({"GET": ALL, "POST": only(CURATOR)}),
    "labels:queue_detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.queue.pk}, scoped=True),
    "labels:queue_next": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.queue.pk}, scoped=True),
    "labels:dashboard": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True),
    "labels:questions": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True),
    "labels:agreement": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True),
    "labels:adjudication": Rule({"GET": only(CURATOR)}, kwargs=lambda w: {"pk": w.run.pk}, scoped=True),
    "labels:chart_csv": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.run.pk, "chart": "categories"}, scoped=True),
    "labels:export": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.run.pk, "fmt": "csv"}, scoped=True),
    # labels API
    "label-list": Rule({"GET": ALL, "POST": only(ANNOTATOR)}, api=True),
    "label-detail": Rule({"GET": ALL, "PATCH": only(ANNOTATOR)}, kwargs=lambda w: {"pk": w.label.pk}, scoped=True,
                         api=True, data=lambda w: {"note": "checked"}),
    # an item of a database not granted is a field error ("does not exist"), as an unknown id
    "label-final": Rule({"POST": only(CURATOR)}, data=lambda w: {"item": w.item.pk, "category": w.category.pk},
                        api=True),
}

# exemplar experiments (the world's candidate holds the Annotator's exemplar on the granted database; its suite is
# on the world's dataset; Curators build suites and candidates, run experiments and publish)
EXPECTATIONS.update({
    "experiments:experiment_list": Rule({"GET": ALL}),
    "experiments:experiment_detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.experiment.pk}, scoped=True),
    "experiments:experiment_question": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.experiment.pk,
                                                                           "question_id": w.item.question_id},
                                            scoped=True),
    "experiments:experiment_cancel": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.experiment.pk},
                                          scoped=True),
    "experiments:experiment_new": Rule({"GET": only(CURATOR), "POST": only(CURATOR)},
                                       kwargs=lambda w: {"pk": w.candidate.pk}, scoped=True),
    "experiments:suite_list": Rule({"GET": ALL, "POST": only(CURATOR)}),
    "experiments:suite_detail": Rule({"GET": ALL, "POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.suite.pk},
                                     scoped=True),
    "experiments:suite_version": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.suite.pk, "number": 1}, scoped=True),
    "experiments:candidate_new": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"set_id": w.exemplar_set.pk},
                                      scoped=True),
    "experiments:candidate_detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.candidate.pk}, scoped=True),
    "experiments:candidate_preview": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.candidate.pk}, scoped=True,
                                          query="database=secret&question=How+many%3F"),
    "experiments:candidate_edit": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.candidate.pk},
                                       scoped=True, data=lambda w: {"title": "t"}),
    "experiments:candidate_add": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.candidate.pk}, scoped=True,
                                      data=lambda w: {"exemplar": w.exemplar.pk}),
    "experiments:candidate_item": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {
        "pk": w.candidate.pk, "item_id": w.candidate_item.pk, "op": "up"}, scoped=True),
    "experiments:candidate_discard": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.candidate.pk},
                                          scoped=True),
    "experiments:candidate_publish": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.candidate.pk},
                                          scoped=True),
    "experiments:exemplar_from_failure": Rule({"POST": only(ANNOTATOR, CURATOR)},
                                              kwargs=lambda w: {"item_id": w.item.pk}, scoped=True),
    # experiments API
    "suite-list": Rule({"GET": ALL, "POST": only(CURATOR)}, api=True),
    "suite-detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.suite.pk}, scoped=True, api=True),
    "suite-versions": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.suite.pk}, scoped=True, api=True,
                           data=lambda w: {"sources": [{"kind": "picked", "questions": [0]}]}),
    "suite-version-list": Rule({"GET": ALL}, api=True),
    "suite-version-detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.suite_version.pk}, scoped=True, api=True),
    "candidate-list": Rule({"GET": ALL, "POST": only(CURATOR)}, api=True),
    "candidate-detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.candidate.pk}, scoped=True, api=True),
    "candidate-add": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.candidate.pk}, scoped=True, api=True,
                          data=lambda w: {"exemplar": w.exemplar.pk}),
    "candidate-item": Rule({"PATCH": only(CURATOR), "DELETE": only(CURATOR)},
                           kwargs=lambda w: {"pk": w.candidate.pk, "item_id": w.candidate_item.pk}, scoped=True,
                           api=True, data=lambda w: {"sends": "current"}),
    "candidate-publish": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.candidate.pk}, scoped=True,
                              api=True),
    "candidate-discard": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.candidate.pk}, scoped=True,
                              api=True),
    "experiment-list": Rule({"GET": ALL, "POST": only(CURATOR)}, api=True),
    "experiment-detail": Rule({"GET": ALL}, kwargs=lambda w: {"pk": w.experiment.pk}, scoped=True, api=True),
    "experiment-cancel": Rule({"POST": only(CURATOR)}, kwargs=lambda w: {"pk": w.experiment.pk}, scoped=True,
                              api=True),
    # an item of a database not granted is a field error ("no item"), as an unknown id
    "exemplar-from-failure": Rule({"POST": only(ANNOTATOR, CURATOR)}, api=True, data=lambda w: {"item": w.item.pk}),
})

NAMESPACE_EXPECTATIONS: dict[str, NamespaceRule] = {
    "admin": NamespaceRule(login_prefix="/admin/login/"),  # staff only; no role makes an account staff
}


# --- walking the URLconf ---------------------------------------------------------------------------------

def url_names() -> dict[str, str]:
    """Every named URL (namespaced) with its pattern, from the URLconf; unnamed patterns are reported too."""
    found: dict[str, str] = {}

    def walk(patterns, prefix: str, namespace: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                ns = f"{namespace}{p.namespace}:" if p.namespace else namespace
                walk(p.url_patterns, prefix + str(p.pattern), ns)
            elif isinstance(p, URLPattern):
                name = f"{namespace}{p.name}" if p.name else f"{namespace}<unnamed {prefix}{p.pattern}>"
                found.setdefault(name, prefix + str(p.pattern))

    walk(get_resolver().url_patterns, "", "")
    return found


def _namespace(name: str) -> str | None:
    return name.split(":", 1)[0] if ":" in name else None


def test_every_url_has_an_access_rule():
    missing = [(name, pattern) for name, pattern in url_names().items()
               if name not in EXPECTATIONS and _namespace(name) not in NAMESPACE_EXPECTATIONS]
    assert not missing, "URLs without an access rule. Add a row to EXPECTATIONS in tests/test_access_matrix.py:\n" + \
        "\n".join(f'    "{name}": Rule({{"GET": ALL}}, kwargs=lambda w: {{...}}),  # pattern {pattern!r}; '
                  "list the roles allowed per method; scoped=True if it shows an object of a granted database"
                  for name, pattern in missing)


def test_every_rule_names_a_url():
    stale = sorted(set(EXPECTATIONS) - set(url_names()))
    assert not stale, f"Rows in EXPECTATIONS for URLs that no longer exist (remove them): {stale}"


# --- the world -------------------------------------------------------------------------------------------

@dataclass
class World:
    database: Any = None
    session: Any = None
    dataset: Any = None
    run: Any = None
    item: Any = None
    category: Any = None
    queue: Any = None
    label: Any = None
    exemplar: Any = None
    step: Any = None
    exemplar_set: Any = None
    import_job: Any = None
    suite: Any = None
    suite_version: Any = None
    candidate: Any = None
    candidate_item: Any = None
    experiment: Any = None
    workspace: Any = None
    users: dict[str, User] = field(default_factory=dict)


SCHEMA = """
CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT);
INSERT INTO singer VALUES (1, 'Joe', 'France'), (2, 'Ann', 'Japan');
"""


@pytest.fixture
def world(db, make_sqlite, django_user_model) -> World:
    from agent import services as agent_services
    from agent.models import AgentSession, DatabaseGrant
    from annotations.labels.models import Label, Queue
    from annotations.labels.selectors import default_taxonomy_version
    from annotations.models import Exemplar, ExemplarSet, ExemplarSetVersion, ExemplarStep
    from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem

    importlib.import_module("annotations.migrations.0005_seed_error_taxonomy").seed(
        importlib.import_module("django.apps").apps, None)
    w = World()
    w.database = agent_services.database_register(name="secret", location=str(make_sqlite(SCHEMA, "secret.sqlite")),
                                                  refresh="sync")
    team = Group.objects.create(name="team")
    DatabaseGrant.objects.create(database=w.database, group=team)
    from agent.models import Workspace, WorkspaceMembership

    w.workspace = Workspace.objects.create(slug="team-ws", name="Team")
    WorkspaceMembership.objects.create(workspace=w.workspace, group=team)
    for role in ROLES:
        user = django_user_model.objects.create_user(f"u-{role.replace(' ', '-').lower()}", password="pw-12345-x")
        user.groups.set([Group.objects.get(name=role), team])
        w.users[role] = user
    nobody = django_user_model.objects.create_user("u-no-role", password="pw-12345-x")
    nobody.groups.set([team])
    w.users[NO_ROLE] = nobody
    outsider = django_user_model.objects.create_user("u-outsider", password="pw-12345-x")
    outsider.groups.set(Group.objects.filter(name__in=ROLES))  # every role, but not granted the database
    w.users[OUTSIDER] = outsider

    w.session = AgentSession.objects.create(database=w.database, question="How many singers?",
                                            status=AgentSession.Status.ANSWERED, created_by=w.users[ASKER],
                                            final_sql="SELECT count(*) FROM singer")
    w.dataset = Dataset.objects.create(name="tiny", kind="spider", source_path="/nowhere", question_count=1)
    question = DatasetQuestion.objects.create(dataset=w.dataset, index=0, db_id="secret", database=w.database,
                                              question="How many singers?", gold_sql="SELECT count(*) FROM singer",
                                              difficulty="easy", table_count=1, join_count=0)
    w.run = Run.objects.create(name="tiny run", dataset=w.dataset, source="imported", status="done",
                               totals={"ex": 0.0, "correct": 0, "scored": 1, "questions": 1},
                               created_by=w.users[OPERATOR])
    w.item = RunItem.objects.create(run=w.run, question=question, predicted_sql="SELECT 1", eval_status="ok", ex=False)
    version = default_taxonomy_version()
    w.category = version.categories.order_by("position").first()
    w.queue = Queue.objects.create(run=w.run, name="all", taxonomy_version=version, created_by=w.users[CURATOR])
    w.label = Label.objects.create(item=w.item, category=w.category, taxonomy_version=version,
                                   annotator=w.users[ANNOTATOR])
    w.exemplar = Exemplar.objects.create(database=w.database, question="How many singers?",
                                         author=w.users[ANNOTATOR])
    w.step = ExemplarStep.objects.create(exemplar=w.exemplar, position=0, thought="Count.",
                                         action='ExecuteSQL("SELECT count(*) FROM singer")')
    # the set is in the team's workspace: its pages and routes are scoped to the workspace's members
    w.exemplar_set = ExemplarSet.objects.create(name="set", created_by=w.users[CURATOR], workspace=w.workspace)
    from annotations.exemplars.selectors import exemplar_snapshot

    # the version draws on the granted database: its pages and routes follow that database's grants
    version = ExemplarSetVersion.objects.create(exemplar_set=w.exemplar_set, number=1,
                                                exemplars=[exemplar_snapshot(w.exemplar)], content_hash="0" * 64)
    from annotations.experiments.models import (
        Candidate,
        CandidateItem,
        CandidateSnapshot,
        Experiment,
        Suite,
        SuiteQuestion,
        SuiteVersion,
    )

    w.suite = Suite.objects.create(name="suite", dataset=w.dataset)
    w.suite_version = SuiteVersion.objects.create(suite=w.suite, number=1, recipe=[{"kind": "picked",
                                                                                    "questions": [0]}],
                                                  question_count=1)
    SuiteQuestion.objects.create(version=w.suite_version, question=question, position=0, origins=[{"kind": "picked"}])
    w.candidate = Candidate.objects.create(exemplar_set=w.exemplar_set, number=1, base_version=version)
    w.candidate_item = CandidateItem.objects.create(candidate=w.candidate, position=0, exemplar=w.exemplar)
    snapshot = CandidateSnapshot.objects.create(candidate=w.candidate, exemplars=[], content_hash="1" * 64)
    w.experiment = Experiment.objects.create(exemplar_set=w.exemplar_set, candidate=w.candidate,
                                             candidate_snapshot=snapshot, baseline_version=version,
                                             suite_version=w.suite_version, strategy="interactive_t2s",
                                             created_by=w.users[CURATOR])
    from agent.models import ImportJob

    w.import_job = ImportJob.objects.create(kind="dataset", name="upload", created_by=w.users[OPERATOR])
    return w


def _request(client, method: str, url: str, rule: Rule, w: World):
    data = rule.data(w)
    with transaction.atomic():
        if method == "GET":
            response = client.get(url)
        elif rule.api:
            response = client.generic(method, url, data=__import__("json").dumps(data),
                                      content_type="application/json")
        else:
            response = getattr(client, method.lower())(url, data)
        transaction.set_rollback(True)
    return response


def _allowed(status: int) -> bool:
    return status < 400 or status in (400, 409)


def test_role_matrix(client, world):
    """Every URL x every method x every role (and anonymous, and an outsider) behaves as the table says."""
    failures: list[str] = []
    for name in sorted(url_names()):
        ns = _namespace(name)
        if ns in NAMESPACE_EXPECTATIONS:
            continue
        rule = EXPECTATIONS[name]
        query = rule.query(world) if callable(rule.query) else rule.query
        url = reverse(name, kwargs=rule.kwargs(world)) + (f"?{query}" if query else "")
        for method, roles in rule.methods.items():
            client.logout()
            response = _request(client, method, url, rule, world)
            anonymous_ok = (_allowed(response.status_code) if rule.public else
                            response.status_code in (401, 403) if rule.api else
                            response.status_code == 302 and "/accounts/login/" in response["Location"])
            if not anonymous_ok:
                failures.append(f"{method} {url} ({name}) as anonymous: {response.status_code}")
            for who, user in world.users.items():
                client.force_login(user)
                response = _request(client, method, url, rule, world)
                status = response.status_code
                if who == OUTSIDER:
                    expect = "404" if rule.scoped else "allowed"
                    ok = status == 404 if rule.scoped else _allowed(status)
                else:
                    allowed = who in roles
                    expect = "allowed" if allowed else "403/404"
                    ok = _allowed(status) if allowed else status in (403, 404)
                if not ok:
                    failures.append(f"{method} {url} ({name}) as {who}: {status}, expected {expect}")
    assert not failures, f"{len(failures)} access rules broken:\n" + "\n".join(failures)


def test_admin_is_closed_to_every_role(client, world):
    """No role makes an account staff: every admin URL sends them to the admin login."""
    for user in world.users.values():
        client.force_login(user)
        response = client.get(reverse("admin:index"))
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
        response = client.get(reverse("admin:agent_database_changelist"))
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
