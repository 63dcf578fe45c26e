"""The run page shows EX with corrected golds beside EX, and names its tables-joined count as the paper's."""

import pytest
from django.urls import reverse

from tests.annotations.labels.test_labels import category, item

pytestmark = pytest.mark.django_db


def test_ex_with_corrections_sits_beside_ex_once_a_gold_is_corrected(annotators, tiny_run, client):
    alice = annotators[0]
    client.force_login(alice)
    page = client.get(tiny_run.get_absolute_url()).content.decode()
    assert 'id="run-ex-corrected">= EX' in page and "No gold query corrected yet" in page
    assert "Tables joined (paper" in page and "count)" in page
    it = item(tiny_run, 4)
    client.post(reverse("labels:toggle", args=[it.pk, category("golden_empty").pk]))
    client.post(reverse("labels:corrected", args=[it.pk]), {"corrected_sql": "SELECT name FROM singer"})
    page = client.get(tiny_run.get_absolute_url()).content.decode()
    assert 'id="run-ex">20.00%' in page and 'id="run-ex-corrected">40.00%' in page
    assert "2 correct out of 5 scored, with 1 gold query corrected by annotators" in page
