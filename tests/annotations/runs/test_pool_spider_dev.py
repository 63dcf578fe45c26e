"""`run --pool spider-dev` on Spider dev itself (#18): the pool is every gold pair of the dataset being run, and no
question ever retrieves its own pair, through the path a run takes (the command stores the pool, each session
gets the question's key), for DART-SQL's DAIL selection and SCL-SQL's positives."""

from __future__ import annotations

import random

import pytest
from django.core.management import call_command

from agent.models import ExamplePool, LLMEndpoint
from agent.services.databases import open_connector
from agent.strategies.base import SessionContext
from agent.strategies.dail import select_examples
from agent.strategies.pool import PoolExample, candidates
from agent.strategies.scl_sql import rank_examples
from annotations.runs.models import Run
from annotations.runs.pools import question_key

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]


def test_run_pool_spider_dev_on_spider_dev_never_retrieves_a_questions_own_gold(spider_dev):
    # A launch needs an endpoint on record; nothing here calls it.
    LLMEndpoint.objects.create(name="unused", base_url="http://127.0.0.1:9/v1", model="m", is_default=True)
    call_command("run", "--dataset", "spider-dev", "--strategy", "dart_sql", "--pool", "spider-dev",
                 "--name", "leave-one-out")
    run = Run.objects.get(name="leave-one-out")
    questions = list(spider_dev.questions.select_related("database").order_by("index"))
    snapshot = run.config["example_pool"]
    assert snapshot["source"] == "dataset spider-dev" and snapshot["size"] == len(questions) == 1034
    pool = tuple(PoolExample.from_dict(e) for e in ExamplePool.objects.get(pk=snapshot["id"]).examples)

    # Every question: its own key is the one pair left out (by key, never by text).
    for q in questions:
        kept, left_out = candidates(SessionContext(question=q.question, schema=None, example_pool=pool,
                                                   question_key=question_key(q)))
        assert left_out == 1 and len(kept) == len(pool) - 1
        assert question_key(q) not in {e.key for e in kept}

    # The retrieval itself, on a seeded sample of the questions whose database is at hand (Spider dev here has
    # 19 of its 20): DAIL masks with the question's schema; SCL ranks skeletons.
    schemas = {}

    def schema_of(database):  # the fixture registers without indexes: introspect as a session would
        with open_connector(database) as connector:
            return connector.introspect(with_stats=False)

    for q in random.Random(18).sample([q for q in questions if q.database is not None], 60):
        own = question_key(q)
        schema = schemas[q.database_id] = schemas.get(q.database_id) or schema_of(q.database)
        ctx = SessionContext(question=q.question, schema=schema, example_pool=pool, question_key=own)
        kept, _ = candidates(ctx)
        _masked, chosen = select_examples(q.question, schema, kept, k=5, preliminary_sql=q.gold_sql)
        assert len(chosen) == 5 and own not in {s.example.key for s in chosen}
        # The gold itself is the best skeleton match there is: leave-one-out is what keeps it out.
        ranked = rank_examples(q.question, [(e.question, e.sql) for e in kept])[:3]
        assert own not in {kept[i].key for _score, i, _q, _s in ranked}
