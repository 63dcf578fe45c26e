"""The labels overview and the queue list count in grouped queries: their figures equal the per-run and per-queue
figures the dashboards and queue pages compute one by one."""

from __future__ import annotations

import pytest

from annotations.labels import selectors
from annotations.labels.models import Label, Queue

pytestmark = pytest.mark.django_db


def test_grouped_figures_equal_the_one_by_one_figures(tiny_run, annotators, staff):
    alice, bob, _carol = annotators
    version = selectors.default_taxonomy_version()
    cats = list(version.categories.all())
    failures = list(selectors.run_failures(run=tiny_run))
    Label.objects.bulk_create([
        Label(item=failures[0], category=cats[0], taxonomy_version=version, annotator=alice),
        Label(item=failures[0], category=cats[1], taxonomy_version=version, annotator=bob),
        Label(item=failures[1], category=cats[2], taxonomy_version=version, annotator=alice),
        Label(item=failures[1], category=cats[3], taxonomy_version=version, annotator=staff, is_final=True),
        Label(item=failures[2], category=cats[0], taxonomy_version=version, annotator=bob),
    ])
    across = selectors.runs_distribution(runs=type(tiny_run).objects.all())
    one = selectors.category_distribution(run=tiny_run, version=version)
    (row,) = across["rows"]
    assert row["counts"] == [r["count"] for r in one["rows"]] and row["counts"][3] == 1 and row["counts"][2] == 0
    assert (row["labelled"], row["failures"]) == (one["labelled"], one["failures"]) == (3, 4)

    queues = [Queue.objects.create(name=f"q{i}", run=tiny_run, taxonomy_version=version, **filters)
              for i, filters in enumerate([{}, {"difficulty": "medium"}, {"join_count": 1}, {"db_id": "other"}])]
    grouped = selectors.queues_progress(queues=queues, user=alice)
    for queue in queues:
        assert grouped[queue.pk] == selectors.queue_progress(queue=queue, user=alice)
    assert grouped[queues[0].pk] == {"total": 4, "complete": 3, "mine": 2, "left": 1, "needed": 1, "percent": 75}


def overview_counts(user, run):
    """(labelled, {category key: count}) of ``run``'s row on the labels overview, as ``user`` sees it (None: the
    run has no labels, no row)."""
    across = selectors.runs_distribution(runs=type(run).objects.all(), user=user)
    rows = [r for r in across["rows"] if r["run"].pk == run.pk]
    if not rows:
        return None
    (row,) = rows
    return row["labelled"], {c.key: n for c, n in zip(across["categories"], row["counts"], strict=True) if n}


def test_overview_counts_are_cached_and_follow_every_label_change(tiny_run, annotators, staff,
                                                                  django_assert_max_num_queries):
    from django.contrib.auth.models import Group
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agent.roles import CURATOR
    from annotations.labels import services

    alice, bob, _carol = annotators
    curator = type(alice).objects.create_user("cura")
    curator.groups.add(Group.objects.get(name=CURATOR))
    version = selectors.default_taxonomy_version()
    cat = {c.key: c for c in version.categories.all()}
    failures = list(selectors.run_failures(run=tiny_run))
    services.label_toggle(item=failures[0], category=cat["distinct"], user=alice)
    with CaptureQueriesContext(connection) as first:
        assert overview_counts(alice, tiny_run) == (1, {"distinct": 1})
    with django_assert_max_num_queries(len(first) - 3):  # the label counts come from the cache
        assert overview_counts(alice, tiny_run) == (1, {"distinct": 1})

    services.label_toggle(item=failures[1], category=cat["format"], user=bob)
    assert overview_counts(alice, tiny_run) == (2, {"distinct": 1, "format": 1})
    services.label_toggle(item=failures[0], category=cat["distinct"], user=alice)  # taken away
    assert overview_counts(alice, tiny_run) == (1, {"format": 1})
    services.label_adjudicate(item=failures[1], user=curator, categories=[cat["reasoning"]])
    assert overview_counts(alice, tiny_run) == (1, {"reasoning": 1})  # the final label counts, not bob's
    failures[1].delete()  # its labels go with it
    assert overview_counts(alice, tiny_run) is None

    # a blind queue: bob's label is hidden from alice until she labels the question and reveals it
    services.queue_create(run=tiny_run, name="double", taxonomy_version=version, user=curator, max_annotators=2)
    services.label_toggle(item=failures[2], category=cat["format"], user=bob)
    assert overview_counts(alice, tiny_run) == (0, {}) and overview_counts(bob, tiny_run) == (1, {"format": 1})
    services.label_toggle(item=failures[2], category=cat["distinct"], user=alice)
    assert overview_counts(alice, tiny_run) == (1, {"distinct": 1})
    services.labels_reveal(item=failures[2], user=alice)
    assert overview_counts(alice, tiny_run) == (1, {"distinct": 1, "format": 1})
    assert overview_counts(curator, tiny_run) == (1, {"distinct": 1, "format": 1})


def test_deleting_a_run_replaces_the_labels_version_once_not_once_per_label(tiny_run, annotators, monkeypatch):
    from annotations.labels import version as labels_version

    version = selectors.default_taxonomy_version()
    cats = list(version.categories.all())
    Label.objects.bulk_create([Label(item=item, category=cat, taxonomy_version=version, annotator=who)
                               for item in selectors.run_failures(run=tiny_run) for cat in cats[:3]
                               for who in annotators])
    before = selectors.labels_version()
    calls = []
    real = labels_version._new_labels_version
    monkeypatch.setattr(labels_version, "_new_labels_version", lambda: (calls.append(1), real()))
    tiny_run.delete()  # 36 labels cascade through 5 items
    assert len(calls) == 1 and selectors.labels_version() != before


def copy_run(run, name):
    """Another finished run over the same questions, with the same predictions and decisions."""
    from annotations.runs.models import Run, RunItem

    copy = Run.objects.create(name=name, dataset=run.dataset, source="imported", status="done", totals=run.totals)
    RunItem.objects.bulk_create([RunItem(run=copy, question_id=i.question_id, predicted_sql=i.predicted_sql,
                                         eval_status=i.eval_status, ex=i.ex) for i in run.items.all()])
    return copy


def give_labels(run, users, categories) -> int:
    from annotations.labels.version import labels_changed

    made = Label.objects.bulk_create([
        Label(item=item, category=category, taxonomy_version_id=category.version_id, annotator=user)
        for item in selectors.run_failures(run=run) for category in categories for user in users])
    labels_changed()
    return len(made)


def test_deleting_a_run_takes_as_many_queries_with_360_labels_as_with_4(tiny_run, django_user_model):
    """Its labels are deleted in one statement, not loaded and deleted a hundred at a time (a run of 40k
    labels took 400 statements and 40k objects)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotations.runs.models import Run, RunItem
    from tests.annotations.labels.conftest import make_annotator

    users = [make_annotator(django_user_model, f"annotator{i}") for i in range(10)]
    categories = list(selectors.default_taxonomy_version().categories.all())
    small, large = copy_run(tiny_run, "small"), copy_run(tiny_run, "large")
    assert (give_labels(small, users[:1], categories[:1]), give_labels(large, users, categories)) == (4, 360)
    queries = []
    for run in (small, large):
        with CaptureQueriesContext(connection) as deleting:
            Run.objects.get(pk=run.pk).delete()
        queries.append(len(deleting))
    assert queries[0] == queries[1]
    assert not RunItem.objects.filter(run__in=[small, large]).exists()
    assert Label.objects.count() == 0


def test_overview_counts_follow_deletes_of_items_labels_and_runs(tiny_run, annotators, staff, staff_client):
    from annotations.labels import services

    alice, bob, _carol = annotators
    cat = {c.key: c for c in selectors.default_taxonomy_version().categories.all()}
    other = copy_run(tiny_run, "other")
    failures = list(selectors.run_failures(run=tiny_run))
    for item in failures[:3]:
        services.label_toggle(item=item, category=cat["format"], user=alice)
    services.label_toggle(item=selectors.run_failures(run=other).first(), category=cat["distinct"], user=bob)
    assert overview_counts(alice, tiny_run) == (3, {"format": 3})

    tiny_run.items.filter(pk=failures[0].pk).delete()  # as choosing to score only the predicted subset does
    assert overview_counts(alice, tiny_run) == (2, {"format": 2})

    label = Label.objects.get(item=failures[1])
    response = staff_client.post("/admin/annotations/label/", {"action": "delete_selected",
                                                               "_selected_action": [label.pk], "post": "yes"})
    assert response.status_code == 302 and not Label.objects.filter(pk=label.pk).exists()
    assert overview_counts(alice, tiny_run) == (1, {"format": 1})
    services.label_final_toggle(item=failures[2], category=cat["reasoning"], user=staff)
    assert overview_counts(alice, tiny_run) == (1, {"reasoning": 1})
    services.label_final_toggle(item=failures[2], category=cat["reasoning"], user=staff)  # undone
    assert overview_counts(alice, tiny_run) == (1, {"format": 1})

    before = selectors.labels_version()
    other.delete()
    assert selectors.labels_version() != before
    assert overview_counts(alice, tiny_run) == (1, {"format": 1}) and overview_counts(alice, other) is None


def test_queue_list_progress_is_cached_and_follows_labels_and_evaluation(tiny_run, annotators):
    from django.utils import timezone

    from annotations.labels import services

    alice, bob, _carol = annotators
    version = selectors.default_taxonomy_version()
    queue = Queue.objects.create(name="all", run=tiny_run, taxonomy_version=version)
    failures = list(selectors.run_failures(run=tiny_run))

    def progress(user):
        return selectors.queues_progress(queues=list(Queue.objects.select_related("run")), user=user)[queue.pk]

    assert progress(alice) == {"total": 4, "complete": 0, "mine": 0, "left": 4, "needed": 1, "percent": 0}
    services.label_toggle(item=failures[0], category=version.categories.first(), user=alice)
    assert progress(alice) == {"total": 4, "complete": 1, "mine": 1, "left": 3, "needed": 1, "percent": 25}
    assert progress(bob) == {"total": 4, "complete": 1, "mine": 0, "left": 3, "needed": 1, "percent": 25}
    failures[1].ex = True  # a re-evaluation finds one failure right after all
    failures[1].save()
    assert progress(alice)["total"] == 4  # cached under the run's evaluation
    tiny_run.evaluated_at = timezone.now()
    tiny_run.save()
    assert progress(alice) == {"total": 3, "complete": 1, "mine": 1, "left": 2, "needed": 1, "percent": 33}


def blind_queue(run, staff):
    from annotations.labels import services

    return services.queue_create(run=run, name="double", taxonomy_version=selectors.default_taxonomy_version(),
                                 user=staff, max_annotators=2)


def test_re_evaluating_or_resuming_a_run_changes_what_a_blind_queue_hides_and_the_counts_follow(tiny_run, annotators,
                                                                                                 staff):
    """Evaluation writes the items in bulk (no signal): a question found right after all leaves the blind queue, and
    bob's label on it shows to alice at once, not a day later."""
    from annotations.labels import services
    from annotations.runs import services as run_services
    from annotations.runs.models import RunItem

    alice, bob, _carol = annotators
    cat = {c.key: c for c in selectors.default_taxonomy_version().categories.all()}
    blind_queue(tiny_run, staff)
    failures = list(selectors.run_failures(run=tiny_run).select_related("question"))
    services.label_toggle(item=failures[0], category=cat["format"], user=bob)
    services.label_toggle(item=failures[1], category=cat["distinct"], user=bob)
    assert overview_counts(alice, tiny_run) == (0, {})  # hidden until she labels them

    RunItem.objects.filter(pk=failures[0].pk).update(predicted_sql=failures[0].question.gold_sql)
    run_services.run_evaluate(run=tiny_run)
    assert RunItem.objects.get(pk=failures[0].pk).ex is True
    assert overview_counts(alice, tiny_run) == (1, {"format": 1})

    RunItem.objects.filter(pk=failures[1].pk).update(predicted_sql="")  # its session failed: resumed
    run_services.run_evaluate(run=tiny_run)
    assert overview_counts(alice, tiny_run) == (1, {"format": 1})
    run_services.run_resume(run=tiny_run)
    assert RunItem.objects.get(pk=failures[1].pk).ex is None
    assert overview_counts(alice, tiny_run) == (2, {"format": 1, "distinct": 1})


def test_re_importing_a_dataset_changes_queue_progress_and_the_cached_progress_follows(tiny_run, annotators,
                                                                                       tmp_path):
    """A re-import updates the questions in bulk: a question now 'hard' leaves the 'medium' queue."""
    import json

    from annotations.labels import services
    from annotations.runs import services as run_services
    from tests.annotations.labels.conftest import QUESTIONS

    alice, _bob, _carol = annotators
    queue = Queue.objects.create(name="medium", run=tiny_run, difficulty="medium",
                                 taxonomy_version=selectors.default_taxonomy_version())
    medium = list(selectors.queue_items(queue=queue))
    services.label_toggle(item=medium[0], category=selectors.default_taxonomy_version().categories.first(),
                          user=alice)

    def progress():
        return selectors.queues_progress(queues=list(Queue.objects.select_related("run")), user=alice)[queue.pk]

    def reimport(questions):
        path = tmp_path / "tiny.jsonl"
        path.write_text("".join(json.dumps({"question": q, "sql": gold, "database": "singers", "difficulty": d})
                                + "\n" for q, gold, _pred, _ex, d, _joins in questions))
        run_services.dataset_import(kind="jsonl", path=path, name="tiny", register_databases=False,
                                    build_indexes=False)

    assert progress() == {"total": 2, "complete": 1, "mine": 1, "left": 1, "needed": 1, "percent": 50}
    edited = [q if i != 4 else (*q[:4], "hard", q[5]) for i, q in enumerate(QUESTIONS)]
    reimport(edited)  # the unlabelled medium question is hard now
    assert progress() == {"total": 1, "complete": 1, "mine": 1, "left": 0, "needed": 1, "percent": 100}
    reimport(edited[:2])  # shorter: the labelled question goes, with its item and label
    assert progress() == {"total": 0, "complete": 0, "mine": 0, "left": 0, "needed": 1, "percent": 0}


def test_admin_edits_of_labels_queues_items_and_questions_are_counted_at_once(tiny_run, annotators, staff, rf):
    from django.contrib import admin

    from annotations.labels import services
    from annotations.runs.models import DatasetQuestion, RunItem

    alice, bob, _carol = annotators
    cat = {c.key: c for c in selectors.default_taxonomy_version().categories.all()}
    failures = list(selectors.run_failures(run=tiny_run))
    services.label_toggle(item=failures[0], category=cat["format"], user=alice)
    services.label_toggle(item=failures[0], category=cat["distinct"], user=bob)
    assert overview_counts(alice, tiny_run) == (1, {"format": 1, "distinct": 1})
    request = rf.post("/admin/")
    request.user = staff

    def save_in_admin(obj):
        admin.site._registry[type(obj)].save_model(request, obj, form=None, change=True)

    label = Label.objects.get(annotator=bob)
    label.is_final = True  # made the question's decision in the admin
    save_in_admin(label)
    assert overview_counts(alice, tiny_run) == (1, {"distinct": 1})
    label.is_final = False
    save_in_admin(label)
    queue = blind_queue(tiny_run, staff)
    queue.max_annotators = 1  # no longer blind
    save_in_admin(queue)
    assert overview_counts(alice, tiny_run) == (1, {"format": 1, "distinct": 1})
    queue.max_annotators = 2
    save_in_admin(queue)
    services.label_toggle(item=failures[1], category=cat["format"], user=bob)
    assert overview_counts(alice, tiny_run) == (1, {"format": 1})  # blind again: bob's labels hidden

    item = RunItem.objects.get(pk=failures[1].pk)
    item.ex = True  # a decision corrected in the admin: not a failure, not held by the queue
    save_in_admin(item)
    assert overview_counts(alice, tiny_run) == (2, {"format": 2})
    item.ex = False
    save_in_admin(item)
    assert overview_counts(alice, tiny_run) == (1, {"format": 1})
    queue.difficulty = "hard"  # holds neither question now
    save_in_admin(queue)
    assert overview_counts(alice, tiny_run) == (2, {"format": 2, "distinct": 1})
    question = DatasetQuestion.objects.get(pk=item.question_id)
    question.difficulty = "hard"  # held again
    save_in_admin(question)
    assert overview_counts(alice, tiny_run) == (1, {"format": 1, "distinct": 1})
