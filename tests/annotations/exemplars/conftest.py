"""Helpers for exemplar tests: an exemplar built through the services on a real database."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from agent.roles import ANNOTATOR, CURATOR
from annotations.exemplars import services


@pytest.fixture
def author(django_user_model):
    """Writes exemplars: an Annotator."""
    user = django_user_model.objects.create_user("ana", "ana@example.com", "pw-ana-123")
    user.groups.add(Group.objects.get(name=ANNOTATOR))
    return user


@pytest.fixture
def reviewer(django_user_model):
    """Reviews and publishes them: a Curator."""
    user = django_user_model.objects.create_user("rex", "rex@example.com", "pw-rex-123")
    user.groups.add(Group.objects.get(name=CURATOR))
    return user


@pytest.fixture
def build_exemplar():
    """An exemplar on ``database`` with steps run by the real tools, ending with Done."""

    def build(database, user, *, question="How many albums has AC/DC?", actions=None):
        exemplar = services.exemplar_create(user=user, database=database, question=question)
        for thought, action in actions or [
            ("Find the artist.", 'SearchValue("AC/DC")'),
            ("Count the albums.", 'ExecuteSQL("SELECT COUNT(*) FROM Album JOIN Artist ON Album.ArtistId = '
                                  "Artist.ArtistId WHERE Artist.Name = 'AC/DC'\")"),
            ("That answers it.", "Done"),
        ]:
            services.step_add(exemplar=exemplar, user=user, thought=thought, action=action)
        exemplar.refresh_from_db()
        return exemplar

    return build


@pytest.fixture
def approved(build_exemplar, author, reviewer):
    """Build, submit and approve an exemplar; returns it."""

    def make(database, **kwargs):
        exemplar = build_exemplar(database, author, **kwargs)
        services.exemplar_submit(exemplar=exemplar, user=author)
        return services.exemplar_review(exemplar=exemplar, user=reviewer, approve=True)

    return make
