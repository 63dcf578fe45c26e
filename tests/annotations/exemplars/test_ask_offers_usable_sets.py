"""The Ask page offers only the exemplar sets usable on the chosen database: no BIRD set for Chinook."""

from __future__ import annotations

import pytest

from annotations.exemplars.paper_sets import BIRD_NO_EVIDENCE, BIRD_WITH_EVIDENCE, SPIDER
from annotations.models import ExemplarSetVersion

pytestmark = pytest.mark.django_db


@pytest.fixture
def bird_database(make_sqlite, grant):
    from agent import services
    from annotations.runs.models import Dataset, DatasetQuestion
    from tests.conftest import group_of_testers

    path = make_sqlite("CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1);", "birdy.sqlite")
    database = services.database_register(name="birdy", location=str(path), refresh="sync")
    dataset = Dataset.objects.create(name="bird-dev", kind="bird", source_path=str(path), question_count=1)
    DatasetQuestion.objects.create(dataset=dataset, index=0, db_id="birdy", database=database, question="q?",
                                   gold_sql="SELECT a FROM t", difficulty="simple", table_count=1, join_count=0)
    return grant(database, group_of_testers())


def _offered(page: str) -> set[str]:
    return {name for name in (SPIDER, BIRD_WITH_EVIDENCE, BIRD_NO_EVIDENCE) if f"{name} v" in page}


def test_chinook_is_offered_no_bird_set_and_a_bird_database_is(user_client, demo_database, bird_database):
    assert ExemplarSetVersion.objects.filter(exemplar_set__name=BIRD_WITH_EVIDENCE).exists()
    chinook = user_client.get("/ask/?database=chinook").content.decode()
    assert _offered(chinook) == {SPIDER}
    bird = user_client.get("/ask/?database=birdy").content.decode()
    assert _offered(bird) == {SPIDER, BIRD_WITH_EVIDENCE, BIRD_NO_EVIDENCE}
    # The database select re-reads the field for the database chosen.
    assert 'hx-select="#exemplar-set-field"' in chinook and 'id="exemplar-set-field"' in chinook


def test_a_bird_set_posted_for_chinook_is_refused(user_client, demo_database, replay_llm):
    replay_llm([])
    version = ExemplarSetVersion.objects.filter(exemplar_set__name=BIRD_WITH_EVIDENCE).latest("number")
    response = user_client.post("/ask/", {"database": "chinook", "question": "How many albums?",
                                          "strategy": "interactive_t2s", "exemplar_set_version": version.pk,
                                          "tools": ["SearchColumn", "SearchValue", "FindShortestPath", "ExecuteSQL"]})
    assert response.status_code == 200 and "not usable on this database" in response.content.decode()
