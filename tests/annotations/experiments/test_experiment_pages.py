"""The experiment pages through the web client: candidate, preview, launch, report, side by side, publish."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotations.exemplars import services as exemplar_services
from annotations.experiments import selectors, services
from annotations.experiments.models import Candidate, Experiment
from annotations.labels.models import Category, Label
from annotations.labels.selectors import default_taxonomy_version
from annotations.models import Exemplar, ExemplarSetVersion
from annotations.runs import services as run_services
from tests.annotations.experiments.conftest import drive, helped_script

pytestmark = pytest.mark.django_db


def _text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def test_a_candidate_page_previews_the_exact_prompt_like_a_published_version(client, shop, team, make_exemplar,
                                                                              annotator, curator):
    b = make_exemplar("MARK-B", author=annotator)
    client.force_login(curator)
    response = client.post(f"/experiments/sets/{team.pk}/candidates/new/", {"exemplar": b.pk, "title": "try B"})
    candidate = Candidate.objects.get()
    assert response.status_code == 302 and response["Location"] == candidate.get_absolute_url()
    page = _text(client.get(candidate.get_absolute_url()))
    assert "team candidate 1" in page and "try B" in page and f"added #{b.pk}" in page
    content = selectors.candidate_content(candidate)
    assert f"{selectors.candidate_token_count(content):,} tokens</strong> in the system message" in page
    # The preview builds the messages with the same code as a published version's preview.
    query = {"database": "shop", "question": "How many items?", "tools": ["SearchColumn", "SearchValue",
                                                                            "FindShortestPath", "ExecuteSQL"]}
    mine = _text(client.get(f"/experiments/candidates/{candidate.pk}/preview/", query))
    assert "MARK-B" in mine and "MARK-A" in mine
    published = _text(client.get(f"/exemplars/sets/{team.pk}/v1/preview/", query))
    assert "MARK-A" in published and "MARK-B" not in published
    tokens = re.search(r'id="prompt-tokens"><strong>≈(\d+) tokens', mine)
    assert tokens and int(tokens.group(1)) > int(re.search(r'id="prompt-tokens"><strong>≈(\d+) tokens',
                                                             published).group(1))
    # Drafts may be sent, but publishing waits for their review.
    assert "Every exemplar this candidate sends as current content must be approved first" in page


def test_launch_report_side_by_side_and_publish_through_the_pages(client, shop, team, make_exemplar, annotator,
                                                                  curator, replay_llm, django_user_model):
    b = make_exemplar("MARK-B", author=annotator)
    replay_llm(helped_script({1: "MARK-B", 6: "MARK-A"}, always_right={0}))
    client.force_login(curator)
    candidate = services.candidate_create(exemplar_set=team, user=curator, exemplars=[b])
    suite = services.suite_create(name="eight", dataset=shop, user=curator,
                                  sources=[{"kind": "picked", "questions": list(range(8))}])
    form = client.get(f"/experiments/candidates/{candidate.pk}/experiment/")
    assert form.status_code == 200 and "team v1 (published)" in form.content.decode()
    response = client.post(f"/experiments/candidates/{candidate.pk}/experiment/", {
        "suite_version": suite.latest_version().pk, "baseline": f"v{team.versions.get().pk}",
        "strategy": "interactive_t2s", "trials": 2, "options": '{"max_rounds": 4}'})
    experiment = Experiment.objects.get()
    assert response.status_code == 302 and response["Location"] == experiment.get_absolute_url()
    running = _text(client.get(experiment.get_absolute_url()))
    assert 'id="experiment-state">running' in running and "hx-trigger=\"every 2s\"" in running
    drive(r.run for r in experiment.runs.select_related("run"))

    page = _text(client.get(experiment.get_absolute_url()))
    assert 'id="experiment-state">done' in page
    assert "Gained: 1 question right more often" in page and "Lost: 0 questions" in page
    # EX per trial with its counts: the candidate answers 0, 1 and 6 right, the baseline 0 and 6
    assert re.search(r'id="arm-candidate">.*?37\.50%</a> \(3/8\) · <a[^>]*>37\.50%</a> \(3/8\)', page)
    assert re.search(r'id="arm-baseline">.*?25\.00%</a> \(2/8\)', page)
    assert "No clear difference" in page
    gained = re.search(r'<table class="compact striped" id="gained">.*?</table>', page).group(0)
    assert 'data-index="1"' in gained and "2/2 · 0/2" in gained
    link = re.search(r'href="(/experiments/\d+/questions/\d+/\?trial=1)" class="side-by-side"', gained).group(1)
    side = _text(client.get(link))
    assert 'id="side-candidate"' in side and 'id="side-baseline"' in side
    candidate_side = side.split('id="side-candidate"')[1].split('id="side-baseline"')[0]
    assert "badge ok\">correct" in candidate_side and "WHERE grp = 1" in candidate_side
    assert "badge error\">wrong" in side.split('id="side-baseline"')[1]

    # Its runs and sessions say which candidate they sent (never as a published version).
    run = experiment.runs.get(arm="candidate", trial=1).run
    run_page = _text(client.get(run.get_absolute_url()))
    assert "team candidate 1</a> (unpublished)" in run_page and f"experiment #{experiment.pk}</a> (candidate, trial 1)" \
        in run_page
    session_page = _text(client.get(reverse("session_detail", args=[run.items.first().session_id])))
    assert "team candidate 1</a> (2 exemplars, unpublished: an experiment's run)" in session_page

    # The set page lists the experiment; the exemplar's author sees how their exemplar did.
    assert f"#{experiment.pk}</a>" in _text(client.get(team.get_absolute_url()))
    client.force_login(annotator)
    exemplar_page = _text(client.get(b.get_absolute_url()))
    assert 'id="exemplar-experiments"' in exemplar_page and f"#{experiment.pk}</a>" in exemplar_page

    # Publishing: first the draft is reviewed by another Curator, then the candidate becomes v2.
    client.force_login(curator)
    refused = client.post(f"/experiments/candidates/{candidate.pk}/publish/", {"note": "with B"}, follow=True)
    assert f"get these reviewed first: #{b.pk} (draft)" in _text(refused)
    exemplar_services.exemplar_submit(exemplar=b, user=annotator)
    exemplar_services.exemplar_review(exemplar=b, user=curator, approve=True)
    response = client.post(f"/experiments/candidates/{candidate.pk}/publish/", {"note": "with B"})
    version = team.versions.get(number=2)
    assert response.status_code == 302 and response["Location"] == version.get_absolute_url()
    assert [e["exemplar_id"] for e in version.exemplars] == [team.versions.get(number=1).exemplars[0]["exemplar_id"],
                                                            b.pk]
    assert version.content_hash == experiment.candidate_snapshot.content_hash  # what was tested is what shipped
    candidate.refresh_from_db()
    assert candidate.state == "published" and candidate.published_version == version


def test_publishing_content_that_regressed_asks_for_confirmation(client, shop, team, make_exemplar, annotator,
                                                                 curator, replay_llm):
    b = make_exemplar("MARK-B", author=annotator, reviewer=curator)
    replay_llm(helped_script({3: "MARK-A", 5: "MARK-A"}, always_right={0}))
    candidate = services.candidate_create(exemplar_set=team, user=curator, exemplars=[b])
    services.candidate_remove(candidate=candidate, item=candidate.items.get(position=0), user=curator)
    suite = services.suite_create(name="eight", dataset=shop, user=curator,
                                  sources=[{"kind": "picked", "questions": list(range(8))}])
    experiment = services.experiment_create(candidate=candidate, suite_version=suite.latest_version(), user=curator)
    drive(r.run for r in experiment.runs.select_related("run"))
    assert selectors.experiment_report(experiment=experiment)["verdict"].regressed
    client.force_login(curator)
    page = _text(client.get(candidate.get_absolute_url()))
    assert 'id="regression-warning"' in page and 'name="confirm_regression"' in page
    refused = _text(client.post(f"/experiments/candidates/{candidate.pk}/publish/", {}, follow=True))
    assert f"Experiment #{experiment.pk} tested exactly this content and it regressed" in refused
    assert team.versions.count() == 1
    # The set page's own publish form asks the same for the same content.
    set_page = _text(client.get(team.get_absolute_url()))
    assert 'name="confirm_regression"' in set_page and f"Latest experiment: <a href=\"/experiments/{experiment.pk}/" \
        in set_page
    refused = _text(client.post(f"/exemplars/sets/{team.pk}/publish/", {f"position_{b.pk}": "1"}, follow=True))
    assert "tested exactly this content and it regressed" in refused and team.versions.count() == 1
    client.post(f"/experiments/candidates/{candidate.pk}/publish/", {"confirm_regression": "on"})
    assert team.versions.count() == 2


def test_write_an_exemplar_for_a_labelled_failure_and_its_default_suite(client, shop, team, curator, annotator,
                                                                        replay_llm):
    replay_llm(helped_script({}, always_right={0, 1}))
    run = run_services.run_create_agent(dataset=shop, name="baseline run", options={"max_rounds": 4})
    drive([run])
    failures = list(run.items.filter(ex=False).order_by("question__index"))
    assert [i.question.index for i in failures] == [2, 3, 4, 5, 6, 7]
    version = default_taxonomy_version()
    selected = Category.objects.get(version=version, name="Selected Column")
    reasoning = Category.objects.get(version=version, name="Reasoning")
    for item in failures[:2]:
        Label.objects.create(item=item, category=selected, taxonomy_version=version, annotator=annotator)
    Label.objects.create(item=failures[2], category=reasoning, taxonomy_version=version, annotator=annotator,
                         corrected_sql="SELECT 1", corrected_ok=True)
    client.force_login(annotator)
    review = _text(client.get(f"/labels/items/{failures[0].pk}/"))
    assert 'id="write-exemplar"' in review and "Write an exemplar for this" in review
    response = client.post(f"/experiments/from-item/{failures[0].pk}/")
    exemplar = Exemplar.objects.get(source__startswith="failure of run")
    assert response.status_code == 302 and response["Location"] == exemplar.get_absolute_url()
    assert exemplar.question == failures[0].question.question and exemplar.state == Exemplar.State.DRAFT
    assert exemplar.final_sql == failures[0].question.gold_sql  # no corrected SQL on this failure: the gold
    steps = list(exemplar.steps.order_by("position"))
    assert [s.action for s in steps][-1] == "Done" and "grp = 99" in steps[0].action  # the agent's trajectory
    assert exemplar.origin.categories == ["selected_column"] and exemplar.origin.run_id == run.pk
    corrected = services.exemplar_from_failure(item=failures[2], user=annotator)
    assert corrected.final_sql == "SELECT 1"

    # The experiment of a candidate holding it defaults to the run's Selected Column failures.
    candidate = services.candidate_create(exemplar_set=team, user=curator, exemplars=[exemplar])
    client.force_login(curator)
    form = _text(client.get(f"/experiments/candidates/{candidate.pk}/experiment/"))
    assert 'id="default-suite" checked' in form and "labelled selected_column" in form
    response = client.post(f"/experiments/candidates/{candidate.pk}/experiment/", {
        "default_suite": "on", "baseline": f"v{team.versions.get().pk}", "strategy": "interactive_t2s",
        "trials": 1})
    experiment = Experiment.objects.get()
    assert response.status_code == 302
    entries = list(selectors.suite_entries(experiment.suite_version))
    assert [e.question.index for e in entries] == [2, 3]
    assert entries[0].origins == [{"kind": "failures", "run": run.pk, "run_name": "baseline run",
                                   "item": failures[0].pk, "categories": ["selected_column"],
                                   "category_names": ["Selected Column"]}]
    # A second experiment on the same failures reuses the suite version instead of building another.
    other = services.failures_suite(run=run, categories=["selected_column"], user=curator)
    assert other == experiment.suite_version
    assert ExemplarSetVersion.objects.filter(exemplar_set=team).count() == 1
