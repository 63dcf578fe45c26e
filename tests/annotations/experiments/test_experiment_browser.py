"""In Chromium, with a real worker and the replay LLM: an Annotator writes an exemplar from a labelled failure; a
Curator tries it in a candidate, runs an experiment on the failures with the same label, reads the flips side
by side, approves the exemplar and publishes the candidate."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from agent.models import DatabaseGrant
from agent.roles import ANNOTATOR, CURATOR
from annotations.exemplars import services as exemplar_services
from annotations.experiments.models import Candidate, Experiment
from annotations.labels.models import Category, Label
from annotations.labels.selectors import default_taxonomy_version
from annotations.models import Exemplar
from annotations.runs import services as run_services
from tests.annotations.experiments.conftest import drive
from tests.browser import log_in
from tests.support.run_dataset import question as shop_question
from tests.support.run_dataset import write_dataset
from tests.support.worker import WorkerProcess, purge_broker

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _script() -> dict:
    """Questions 0 and 1 always right; 2 and 3 right only when question 2's own text is in the system message (an
    exemplar written from it is in the prompt); the rest always wrong. Stateless per turn."""
    scripts = {}
    marker = shop_question(2)[0]
    for i in range(8):
        text, gold = shop_question(i)
        right = f'Thought: count, question {i}\nAction: ExecuteSQL("{gold}")'
        wrong = f'Thought: guess, question {i}\nAction: ExecuteSQL("SELECT count(*) FROM item WHERE grp = 99")'
        first = right if i < 2 else {"if_system_contains": marker, "then": right, "else": wrong} if i in (2, 3) \
            else wrong
        scripts[text] = {"by_turn": [{"text": first, "latency_ms": 50} if isinstance(first, str) else first,
                                     "Thought: that is the answer\nAction: Done"]}
    return {"scripts": scripts}


def test_author_an_exemplar_from_a_failure_then_experiment_and_publish(page, live_server, replay_llm, tmp_path,
                                                                       django_user_model):
    from agent.roles import ensure_roles

    ensure_roles()
    team = Group.objects.create(name="team")
    ana = django_user_model.objects.create_user("ana", password="pw-ana-123")
    ana.groups.set([Group.objects.get(name=ANNOTATOR), team])
    cleo = django_user_model.objects.create_user("cleo", password="pw-cleo-123")
    cleo.groups.set([Group.objects.get(name=CURATOR), team])
    dataset = run_services.dataset_import(kind="jsonl", path=write_dataset(tmp_path / "shop", 8), name="shop-8")
    database = dataset.questions.first().database
    DatabaseGrant.objects.create(database=database, group=team)
    a = exemplar_services.exemplar_create(user=ana, database=database, question="How many items are there?")
    exemplar_services.step_add(exemplar=a, user=ana, thought="Count.", action='ExecuteSQL("SELECT count(*) FROM item")')
    exemplar_services.step_add(exemplar=a, user=ana, thought="Done.", action="Done")
    exemplar_services.exemplar_submit(exemplar=a, user=ana)
    exemplar_services.exemplar_review(exemplar=a, user=cleo, approve=True)
    exemplar_set = exemplar_services.set_create(name="team-set", user=cleo)
    exemplar_services.set_publish(exemplar_set=exemplar_set, exemplars=[a], user=cleo)
    replay_llm(_script())
    # A run with v1 whose failures were labelled: 2 and 3 are Selected Column errors.
    run = run_services.run_create_agent(dataset=dataset, name="labelled run", exemplar_set_version=exemplar_set
                                        .versions.get(), options={"max_rounds": 4})
    drive([run])
    version = default_taxonomy_version()
    selected = Category.objects.get(version=version, name="Selected Column")
    for index in (2, 3):
        Label.objects.create(item=run.items.get(question__index=index), category=selected, taxonomy_version=version,
                             annotator=ana)
    Label.objects.create(item=run.items.get(question__index=4), category=Category.objects.get(
        version=version, name="Reasoning"), taxonomy_version=version, annotator=ana)
    failure = run.items.get(question__index=2)

    purge_broker()
    worker = WorkerProcess(tmp_path).start()
    try:
        # The Annotator writes an exemplar from the labelled failure and submits it.
        log_in(page, live_server, "ana", "pw-ana-123")
        page.goto(f"{live_server.url}/labels/items/{failure.pk}/")
        page.click("#write-exemplar button")
        page.wait_for_url("**/exemplars/*/")
        exemplar = Exemplar.objects.get(source__startswith="failure of run")
        assert page.inner_text("h2").startswith(f"Exemplar #{exemplar.pk}")
        assert shop_question(2)[0] in page.content() and "grp = 99" in page.content()  # the agent's own steps
        assert exemplar.final_sql == shop_question(2)[1]
        page.click("#submit-review")
        page.wait_for_selector("#state:has-text('In review')")
        page.click("button:has-text('Log out')")

        # The Curator tries it in a new candidate of the set, and runs the default experiment.
        log_in(page, live_server, "cleo", "pw-cleo-123")
        page.goto(f"{live_server.url}/exemplars/{exemplar.pk}/")
        page.click("#new-candidate-with button:has-text('team-set')")
        page.wait_for_url("**/experiments/candidates/*/")
        candidate = Candidate.objects.get()
        assert f"added #{exemplar.pk}" in page.inner_text("#candidate-summary")
        page.click("#run-experiment")
        page.wait_for_url("**/experiment/")
        assert page.is_checked("#default-suite")
        page.fill("input[name=trials]", "2")
        page.click("#start-experiment")
        page.wait_for_url("**/experiments/*/")
        page.wait_for_selector("#experiment-state:has-text('done')", timeout=120_000)  # refreshed when scored
        experiment = Experiment.objects.get()
        assert experiment.suite_version.question_count == 2  # the Selected Column failures: 2 and 3
        assert page.inner_text("#gained-title").startswith("Gained: 2 questions")
        assert page.inner_text("#lost-title").startswith("Lost: 0 questions")
        gained = page.inner_text("#gained")
        assert "Selected Column" in gained and "in the prompt of the candidate" in gained
        verdict = page.inner_text("#verdict")
        assert verdict.startswith("No clear difference") and "1 question of the suite is itself an exemplar" in verdict
        page.click("#gained tr[data-index='3'] a.side-by-side")
        page.wait_for_selector("#side-by-side")
        assert "correct" in page.inner_text("#side-candidate") and "wrong" in page.inner_text("#side-baseline")
        assert "WHERE grp = 3" in page.inner_text("#side-candidate")

        # The Curator approves the exemplar (not theirs), then publishes the candidate as v2.
        page.goto(f"{live_server.url}/exemplars/{exemplar.pk}/")
        page.click("button[value=approve]")
        page.wait_for_selector("#state:has-text('Approved')")
        page.goto(f"{live_server.url}{candidate.get_absolute_url()}")
        assert "No clear difference" in page.inner_text("#latest-experiment")
        page.fill("#publish-candidate input[name=note]", "exemplar for Selected Column")
        page.click("#publish-candidate button[type=submit]")
        page.wait_for_url("**/sets/*/v2/")
        v2 = exemplar_set.versions.get(number=2)
        assert [e["exemplar_id"] for e in v2.exemplars] == [a.pk, exemplar.pk]
        assert v2.content_hash == experiment.candidate_snapshot.content_hash
    finally:
        worker.stop()
