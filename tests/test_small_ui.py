"""Small things a user meets on every page: the favicon, filter labels, the exemplar header's counts."""

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

from annotations.models import Exemplar

pytestmark = pytest.mark.django_db


def test_favicon_is_a_real_icon_served_to_anyone(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("favicon.ico")
    with open(finders.find("favicon.ico"), "rb") as icon:
        assert icon.read(4) == b"\x00\x00\x01\x00"  # an ICO file


def test_session_filter_says_any_instead_of_dashes(user_client, demo_database):
    page = user_client.get(reverse("session_list")).content.decode()
    assert ">any</option>" in page and "---------" not in page


def test_exemplar_header_counts_follow_an_added_step(client, demo_database, django_user_model):
    from agent.roles import ANNOTATOR
    from tests.conftest import give_roles

    author = give_roles(django_user_model.objects.create_user("ann", password="pw-ann-12345"), ANNOTATOR)
    client.force_login(author)
    client.post(reverse("exemplars:exemplar_new"), {"database": "chinook", "question": "How many albums?"})
    exemplar = Exemplar.objects.get(database=demo_database, question="How many albums?")
    assert 'id="exemplar-counts">0 steps' in client.get(exemplar.get_absolute_url()).content.decode()
    html = client.post(reverse("exemplars:step_add", args=[exemplar.pk]),
                       {"thought": "Count.", "tool": "ExecuteSQL", "sql": "SELECT COUNT(*) FROM Album"},
                       HTTP_HX_REQUEST="true").content.decode()
    assert 'id="exemplar-counts" hx-swap-oob="true">1 step ·' in html
