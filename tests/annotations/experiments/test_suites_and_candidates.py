"""Suites (sources, origins, immutable versions) and candidate versions (compose, freeze, publish), through the
services and the stored rows; and who may do what."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.http import Http404

from annotations import policies
from annotations.exemplars import services as exemplar_services
from annotations.experiments import selectors, services
from annotations.experiments.models import Candidate, CandidateSnapshot, Suite, SuiteVersion
from annotations.labels.models import Category, Label
from annotations.labels.selectors import default_taxonomy_version
from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem

pytestmark = pytest.mark.django_db


@pytest.fixture
def scored_run(shop, annotator):
    """A scored run of the shop dataset: questions 2-7 wrong; 2 and 3 labelled Selected Column, 4 Reasoning."""
    run = Run.objects.create(name="scored", dataset=shop, source="imported", status="done",
                             totals={"ex": 25.0, "correct": 2, "scored": 8, "questions": 8})
    for q in shop.questions.order_by("index"):
        RunItem.objects.create(run=run, question=q, predicted_sql="SELECT 1", eval_status="ok", ex=q.index < 2)
    version = default_taxonomy_version()
    for index, name in ((2, "Selected Column"), (3, "Selected Column"), (4, "Reasoning")):
        Label.objects.create(item=run.items.get(question__index=index), taxonomy_version=version, annotator=annotator,
                             category=Category.objects.get(version=version, name=name))
    return run


def _indexes(version: SuiteVersion) -> list[int]:
    return [e.question.index for e in selectors.suite_entries(version)]


def test_a_suite_unites_its_sources_and_each_question_records_where_it_came_from(shop, scored_run, curator):
    suite = services.suite_create(name="mixed", dataset=shop, user=curator, sources=[
        {"kind": "failures", "run": scored_run.pk, "categories": ["Selected Column"]},
        {"kind": "picked", "questions": [3, 0]},
        {"kind": "sample", "size": 3, "seed": 11}])
    version = suite.latest_version()
    assert _indexes(version)[:3] == [2, 3, 0] and len(set(_indexes(version))) == version.question_count
    entry = version.entries.get(question__index=3)
    assert [o["kind"] for o in entry.origins][:2] == ["failures", "picked"]
    assert entry.origins[0]["category_names"] == ["Selected Column"] and entry.origins[0]["run"] == scored_run.pk
    assert version.recipe[0] == {"kind": "failures", "run": scored_run.pk, "categories": ["selected_column"]}
    assert version.recipe[2] == {"kind": "sample", "size": 3, "seed": 11}
    # The same seed draws the same sample again; a seedless sample stores the seed it drew.
    sampled = {e.question.index for e in version.entries.all() if any(o["kind"] == "sample" for o in e.origins)}
    again = {q.index for q, _ in services.resolve_sources(dataset=shop, sources=[version.recipe[2]], user=curator)[1]}
    assert again == sampled and len(sampled) == 3
    drawn = services.suite_version_create(suite=suite, sources=[{"kind": "sample", "size": 2}], user=curator)
    assert drawn.number == 2 and isinstance(drawn.recipe[0]["seed"], int)
    # A union with another suite keeps the nested origins.
    union = services.suite_create(name="union", dataset=shop, user=curator,
                                  sources=[{"kind": "suite", "suite": "mixed", "version": 1}])
    nested = union.latest_version().entries.get(question__index=2).origins[0]
    assert nested["kind"] == "suite" and nested["origins"][0]["kind"] == "failures"
    assert f"failure of run #{scored_run.pk} labelled Selected Column" in selectors.origin_text(nested)


def test_suite_versions_are_immutable_and_bad_sources_are_named(shop, scored_run, curator, tmp_path):
    suite = services.suite_create(name="s", dataset=shop, user=curator, sources=[{"kind": "picked",
                                                                                   "questions": [1]}])
    version = suite.latest_version()
    with pytest.raises(ValidationError, match="immutable"):
        version.save()
    with pytest.raises(ValidationError, match="Nothing changed since version 1"):
        services.suite_version_create(suite=suite, sources=[{"kind": "picked", "questions": [1]}], user=curator)
    for source, message in [({"kind": "picked", "questions": [99]}, "has no question 99"),
                            ({"kind": "failures", "run": 10**6}, "no run"),
                            ({"kind": "failures", "run": scored_run.pk, "categories": ["Nope"]}, "no label category"),
                            ({"kind": "sample", "size": 0}, "at least 1"),
                            ({"kind": "suite", "suite": "missing"}, "no suite version"),
                            ({"kind": "what"}, "kind must be one of")]:
        with pytest.raises(ValidationError, match=message):
            services.suite_version_create(suite=suite, sources=[source], user=curator)
    other = Dataset.objects.create(name="other", kind="jsonl", source_path="/x")
    # On a database the Curator sees (a dataset with none is not shown to them at all).
    DatasetQuestion.objects.create(dataset=other, index=0, db_id="shop", database=shop.questions.first().database,
                                   question="q", gold_sql="SELECT 1")
    foreign = Run.objects.create(name="elsewhere", dataset=other, source="imported", status="done")
    with pytest.raises(ValidationError, match="is on dataset other"):
        services.suite_version_create(suite=suite, sources=[{"kind": "failures", "run": foreign.pk}], user=curator)
    assert suite.versions.count() == 1


def test_a_candidate_starts_as_the_published_version_and_freezes_what_it_sends(shop, make_exemplar, annotator,
                                                                             curator):
    a = make_exemplar("MARK-A", author=annotator, reviewer=curator)
    team = exemplar_services.set_create(name="team", user=curator)
    v1 = exemplar_services.set_publish(exemplar_set=team, exemplars=[a], user=curator)
    candidate = services.candidate_create(exemplar_set=team, user=curator)
    assert selectors.candidate_content(candidate).content_hash == v1.content_hash  # nothing changed yet
    # Editing A after publishing changes nothing the candidate sends until it takes A's current content.
    exemplar_services.exemplar_update(exemplar=a, user=annotator, question="How many items with an id under 10?",
                                      evidence="", notes="", tags="")
    row = selectors.candidate_rows(candidate)[0]
    assert row["status"] == "published copy" and row["edited_since_published"] and row["approved"]
    item = candidate.items.get()
    services.candidate_use_current(candidate=candidate, item=item, user=curator)
    assert selectors.candidate_changes(candidate) == {"added": [], "removed": [], "edited": [a.pk]}
    first = services.candidate_freeze(candidate=candidate)
    assert services.candidate_freeze(candidate=candidate) == first  # unchanged content: the same snapshot
    b = make_exemplar("MARK-B", author=annotator)
    services.candidate_add(candidate=candidate, exemplar=b, user=curator)
    second = services.candidate_freeze(candidate=candidate)
    assert second != first and CandidateSnapshot.objects.filter(candidate=candidate).count() == 2
    assert [e["exemplar_id"] for e in second.exemplars] == [a.pk, b.pk]
    with pytest.raises(ValidationError, match="in team candidate 1 already"):
        services.candidate_add(candidate=candidate, exemplar=b, user=curator)
    few_shot = selectors.snapshot_few_shot(second.pk)
    assert len(few_shot.exemplars) == 2 and few_shot.source["candidate"] == 1 and "MARK-B" in str(few_shot)
    # Publishing needs both approved; A went back to draft when it was edited.
    with pytest.raises(ValidationError, match=rf"#{a.pk} \(draft\), #{b.pk} \(draft\)"):
        services.candidate_publish(candidate=candidate, user=curator)


def test_a_candidate_started_before_another_publish_cannot_overwrite_it(shop, make_exemplar, annotator, curator):
    a = make_exemplar("MARK-A", author=annotator, reviewer=curator)
    b = make_exemplar("MARK-B", author=annotator, reviewer=curator)
    team = exemplar_services.set_create(name="team", user=curator)
    exemplar_services.set_publish(exemplar_set=team, exemplars=[a], user=curator)
    early = services.candidate_create(exemplar_set=team, user=curator, exemplars=[b])
    late = services.candidate_create(exemplar_set=team, user=curator)
    services.candidate_remove(candidate=late, item=late.items.get(), user=curator)
    services.candidate_add(candidate=late, exemplar=b, user=curator)
    assert services.candidate_publish(candidate=late, user=curator).number == 2
    with pytest.raises(ValidationError, match="Version 2 was published after team candidate 1 started from v1"):
        services.candidate_publish(candidate=early, user=curator)
    with pytest.raises(ValidationError, match="is published"):
        services.candidate_add(candidate=late, exemplar=a, user=curator)


def test_who_may_build_suites_compose_candidates_and_run_experiments(shop, make_exemplar, annotator, curator,
                                                                     django_user_model):
    team = exemplar_services.set_create(name="team", user=curator)
    with pytest.raises(PermissionDenied, match="Curator"):
        services.suite_create(name="x", dataset=shop, user=annotator, sources=[{"kind": "picked", "questions": [0]}])
    with pytest.raises(PermissionDenied, match="Curator"):
        services.candidate_create(exemplar_set=team, user=annotator)
    suite = services.suite_create(name="x", dataset=shop, user=curator, sources=[{"kind": "picked",
                                                                                   "questions": [0]}])
    with pytest.raises(PermissionDenied, match="Running experiments needs the Curator role"):
        policies.check_can_run_experiment(annotator, suite.latest_version())
    # Suites follow the grants of their dataset's databases; candidates those of their exemplars.
    outsider = django_user_model.objects.create_user("out", password="pw-out-12345")
    from tests.conftest import give_roles

    give_roles(outsider, "Curator")
    assert not policies.visible_suites(outsider).exists()
    with pytest.raises(Http404):
        policies.check_can_run_experiment(outsider, suite.latest_version())
    candidate = services.candidate_create(exemplar_set=team, user=curator,
                                          exemplars=[make_exemplar("MARK-B", author=annotator)])
    assert policies.visible_candidates(annotator).filter(pk=candidate.pk).exists()
    assert not policies.visible_candidates(outsider).filter(pk=candidate.pk).exists()
    assert Suite.objects.count() == 1 and Candidate.objects.count() == 1


def test_the_suite_and_candidate_commands(shop, scored_run, make_exemplar, annotator, curator, capsys):
    call_command("suite", "selected", "--dataset", "shop-8", "--failures", f"{scored_run.pk}:Selected Column",
                 "--questions", "5-6")
    assert "Suite selected v1: 4 questions of shop-8." in capsys.readouterr().out
    call_command("suite", "selected", "--show")
    shown = capsys.readouterr().out
    assert f"#2 shop: How many items are in group 2? (question 2)  [failure of run #{scored_run.pk} labelled " \
           "Selected Column]" in shown and "#5 shop:" in shown and "[picked by hand]" in shown
    with pytest.raises(CommandError, match="ana may not do this: Building suites needs the Curator role"):
        call_command("suite", "other", "--dataset", "shop-8", "--questions", "1", "--user", "ana")
    a = make_exemplar("MARK-A", author=annotator, reviewer=curator)
    b = make_exemplar("MARK-B", author=annotator)
    team = exemplar_services.set_create(name="team", user=curator)
    exemplar_services.set_publish(exemplar_set=team, exemplars=[a], user=curator)
    call_command("candidate", "--set", "team", "--new", "--add", str(b.pk), "--title", "B")
    out = capsys.readouterr().out
    assert "team candidate 1 (open): 2 exemplars" in out and f"added [{b.pk}]" in out
    with pytest.raises(CommandError, match=rf"get these reviewed first: #{b.pk} \(draft\)"):
        call_command("candidate", "--set", "team", "--number", "1", "--publish")
    exemplar_services.exemplar_submit(exemplar=b, user=annotator)
    exemplar_services.exemplar_review(exemplar=b, user=curator, approve=True)
    call_command("candidate", "--set", "team", "--number", "1", "--publish", "--user", "cleo")
    assert "Published team candidate 1 as team v2." in capsys.readouterr().out
