"""Two annotators opening and labelling the same question at the same moment (real threads, real transactions)."""

import threading

import pytest
from django.db import connection

from annotations.labels import selectors, services
from annotations.labels.models import Label, Reservation

pytestmark = pytest.mark.django_db(transaction=True)


def race(calls):
    """Run the calls at the same moment in their own threads and connections; return results or exceptions."""
    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def run(i, call):
        try:
            barrier.wait()
            results[i] = call()
        except Exception as exc:  # noqa: BLE001 (collected for the assertions)
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_only_one_of_two_simultaneous_annotators_gets_a_single_annotator_question(tiny_run, annotators, staff):
    alice, bob = annotators[:2]
    services.queue_create(run=tiny_run, name="q", taxonomy_version=selectors.default_taxonomy_version(),
                          user=staff, max_annotators=1)
    item = tiny_run.items.get(question__index=1)
    outcomes = race([lambda: services.reservation_take(item=item, user=alice),
                     lambda: services.reservation_take(item=item, user=bob)])
    assert sorted(type(o).__name__ for o in outcomes) == ["LabelConflict", "Reservation"]
    assert Reservation.objects.filter(item=item).count() == 1

    # Two labels on another question at once, without reservations: the limit still holds.
    other = tiny_run.items.get(question__index=2)
    category = selectors.default_taxonomy_version().categories.get(key="reasoning")
    outcomes = race([lambda: services.label_toggle(item=other, category=category, user=alice),
                     lambda: services.label_toggle(item=other, category=category, user=bob)])
    assert sorted(type(o).__name__ for o in outcomes) == ["Label", "LabelConflict"]
    assert Label.objects.filter(item=other).values("annotator").distinct().count() == 1
