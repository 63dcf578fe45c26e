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
    assert grouped[queues[0].pk] == {"total": 4, "labelled": 3, "mine": 2, "percent": 75}
