"""The experiments API: suites, candidates, experiments and their report, as the pages do them."""

from __future__ import annotations

import pytest

from annotations.exemplars import services as exemplar_services
from annotations.experiments.models import Experiment
from tests.annotations.experiments.conftest import drive, helped_script

pytestmark = pytest.mark.django_db


def test_suite_candidate_experiment_report_and_publish_through_the_api(client, shop, team, make_exemplar, annotator,
                                                                       curator, replay_llm):
    b = make_exemplar("MARK-B", author=annotator)
    replay_llm(helped_script({2: "MARK-B"}, always_right={0}))

    client.force_login(annotator)
    refused = client.post("/api/suites/", {"name": "s", "dataset": "shop-8", "sources": [
        {"kind": "picked", "questions": [0]}]}, content_type="application/json")
    assert refused.status_code == 403
    client.force_login(curator)
    bad = client.post("/api/suites/", {"name": "s", "dataset": "shop-8", "sources": [
        {"kind": "picked", "questions": [42]}]}, content_type="application/json")
    assert bad.status_code == 400 and "shop-8 has no question 42" in str(bad.json())
    suite = client.post("/api/suites/", {"name": "s", "dataset": "shop-8", "sources": [
        {"kind": "picked", "questions": [0, 1, 2, 3]}]}, content_type="application/json").json()
    version_id = suite["versions"][0]["id"]
    detail = client.get(f"/api/suite-versions/{version_id}/").json()
    assert [q["index"] for q in detail["questions"]] == [0, 1, 2, 3]
    assert detail["questions"][0]["origins"] == [{"kind": "picked"}]

    candidate = client.post("/api/candidates/", {"exemplar_set": team.pk, "exemplars": [b.pk], "title": "B"},
                            content_type="application/json").json()
    assert candidate["number"] == 1 and candidate["content"]["changes"]["added"] == [b.pk]
    assert [i["sends"] for i in candidate["content"]["items"]] == ["published copy", "added"]
    # Never among the published versions the API offers for sessions and runs.
    assert all(v["exemplar_set"] != "team" or v["number"] == 1
               for v in client.get("/api/exemplar-set-versions/").json()["results"])

    created = client.post("/api/experiments/", {"candidate": candidate["id"], "suite_version": version_id,
                                                "trials": 1, "options": {"max_rounds": 4}},
                          content_type="application/json")
    assert created.status_code == 201, created.content
    experiment = Experiment.objects.get()
    assert sorted((r["arm"], r["trial"]) for r in created.json()["runs"]) == [("baseline", 1), ("candidate", 1)]
    drive(r.run for r in experiment.runs.select_related("run"))
    report = client.get(f"/api/experiments/{experiment.pk}/").json()["report"]
    assert report["state"] == "done"
    assert report["candidate"]["spread"]["mean"] == 50.0 and report["baseline"]["spread"]["mean"] == 25.0
    assert [(q["index"], q["kind"]) for q in report["questions"]] == [(0, "both_right"), (1, "both_wrong"),
                                                                      (2, "gained"), (3, "both_wrong")]
    assert report["verdict"]["kind"] == "no_clear_difference" and report["verdict"]["gained"] == 1
    assert report["candidate"]["rounds_per_question"] == 2

    publish = client.post(f"/api/candidates/{candidate['id']}/publish/", {}, content_type="application/json")
    assert publish.status_code == 400 and f"#{b.pk} (draft)" in str(publish.json())
    exemplar_services.exemplar_submit(exemplar=b, user=annotator)
    exemplar_services.exemplar_review(exemplar=b, user=curator, approve=True)
    published = client.post(f"/api/candidates/{candidate['id']}/publish/", {"note": "B"},
                            content_type="application/json")
    assert published.status_code == 201 and published.json()["number"] == 2
    assert published.json()["content_hash"] == experiment.candidate_snapshot.content_hash
