"""A tiny real run to label: a small SQLite database, a dataset of five questions, predictions judged wrong."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from agent.roles import ANNOTATOR
from tests.conftest import group_of_testers, seed_taxonomy_and_roles

SCHEMA = """
CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
INSERT INTO singer VALUES (1, 'Joe', 'France', 30), (2, 'Ann', 'France', 40), (3, 'Bo', 'Japan', 25);
CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, singer_id INTEGER REFERENCES singer(singer_id), year INTEGER);
INSERT INTO concert VALUES (1, 1, 2014), (2, 1, 2015), (3, 2, 2015);
"""

# (question, gold, predicted, ex, difficulty, join_count)
QUESTIONS = [
    ("How many singers are there?", "SELECT count(*) FROM singer", "SELECT count(*) FROM singer", True, "easy", 0),
    ("Which countries do singers come from?", "SELECT country FROM singer", "SELECT DISTINCT country FROM singer",
     False, "easy", 0),
    ("Names of singers older than 35?", "SELECT name FROM singer WHERE age > 35",
     "SELECT country FROM singer WHERE age > 35", False, "medium", 0),
    ("Singers with a concert in 2014?",
     "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id WHERE T2.year = 2014",
     "SELECT name FROM singer WHERE singer_id = 2", False, "hard", 1),
    ("Singers from Peru?", "SELECT name FROM singer WHERE country = 'Peru'", "SELECT name FROM singer",
     False, "medium", 0),
]


@pytest.fixture
def tiny_run(db, make_sqlite, grant):
    from agent import services as agent_services
    from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem

    path = make_sqlite(SCHEMA, name="singers.sqlite")
    database = agent_services.database_register(name="singers", location=str(path), refresh="none")
    grant(database, group_of_testers())
    dataset = Dataset.objects.create(name="tiny", kind="spider", source_path=str(path), question_count=5)
    run = Run.objects.create(name="tiny run", dataset=dataset, source="imported", status="done",
                             totals={"ex": 20.0, "correct": 1, "scored": 5, "questions": 5})
    for index, (text, gold, pred, ex, difficulty, joins) in enumerate(QUESTIONS):
        question = DatasetQuestion.objects.create(
            dataset=dataset, index=index, db_id="singers", database=database, question=text, gold_sql=gold,
            difficulty=difficulty, table_count=joins + 1, join_count=joins)
        RunItem.objects.create(run=run, question=question, predicted_sql=pred, eval_status="ok", ex=ex)
    return run


@pytest.fixture(autouse=True)
def seeded(db):
    """The seeded taxonomy and roles (a transactional test elsewhere may have flushed them)."""
    seed_taxonomy_and_roles()


def make_annotator(django_user_model, username: str):
    """An Annotator in the group the tiny run's database is granted to."""
    user = django_user_model.objects.create_user(username, f"{username}@example.com", f"pw-{username}-123")
    user.groups.add(Group.objects.get(name=ANNOTATOR), group_of_testers())
    return user


@pytest.fixture
def annotators(django_user_model):
    return [make_annotator(django_user_model, name) for name in ("alice", "bob", "carol")]


@pytest.fixture
def viewer(django_user_model):
    """A new account (default roles: Viewer, Asker) granted the tiny run's database: it reads, never labels."""
    user = django_user_model.objects.create_user("viewer", "viewer@example.com", "pw-viewer-123")
    user.groups.add(group_of_testers())
    return user
