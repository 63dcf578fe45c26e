"""`run --pool spider-dev` on Spider dev itself (#18, #29): the pool is every gold pair of the dataset being run,
and, as Spider's own split (train and dev share no database), no question ever retrieves a pair of its own
database, nor one whose gold SQL or text equals its own (966 of the 1,034 dev questions share their gold query
with another question of the same database), through the path a run takes (the command stores the pool and its
rule, each session gets the question's exclusion), for DART-SQL's DAIL selection and SCL-SQL's positives."""

from __future__ import annotations

import random

import pytest
from django.core.management import call_command

from agent.models import ExamplePool, LLMEndpoint
from agent.services.databases import open_connector
from agent.strategies.base import SessionContext
from agent.strategies.dail import select_examples
from agent.strategies.pool import PoolExample, candidates, normal_sql
from agent.strategies.scl_sql import rank_examples
from annotations.runs.models import Run
from annotations.runs.pools import question_exclusion, question_key

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]


def test_run_pool_spider_dev_on_spider_dev_never_retrieves_its_own_database_or_gold(spider_dev):
    # A launch needs an endpoint on record; nothing here calls it.
    LLMEndpoint.objects.create(name="unused", base_url="http://127.0.0.1:9/v1", model="m", is_default=True)
    call_command("run", "--dataset", "spider-dev", "--strategy", "dart_sql", "--pool", "spider-dev",
                 "--name", "cross-database")
    run = Run.objects.get(name="cross-database")
    questions = list(spider_dev.questions.select_related("database").order_by("index"))
    snapshot = run.config["example_pool"]
    assert snapshot["source"] == "dataset spider-dev" and snapshot["size"] == len(questions) == 1034
    assert snapshot["rule"] == "cross-database"
    pool = tuple(PoolExample.from_dict(e) for e in ExamplePool.objects.get(pk=snapshot["id"]).examples)

    # The leak the rule closes: most questions share their gold query with another of their database.
    shared = sum(any(o is not q and o.db_id == q.db_id and o.gold_sql == q.gold_sql for o in questions)
                 for q in questions)
    assert shared > 900

    def ctx_for(q, schema=None):
        return SessionContext(question=q.question, schema=schema, example_pool=pool,
                              pool_exclusion=question_exclusion(q, rule=snapshot["rule"]))

    # Every question: no pair of its own database, none with its gold SQL (as written, or up to case and
    # spacing), none with its text; everything else stays.
    for q in questions:
        kept, left_out = candidates(ctx_for(q))
        assert question_key(q) not in {e.key for e in kept}
        assert all(e.db_id != q.db_id for e in kept)
        assert all(e.sql != q.gold_sql and normal_sql(e.sql) != normal_sql(q.gold_sql) for e in kept)
        assert all(e.question != q.question for e in kept)
        assert left_out >= sum(o.db_id == q.db_id for o in questions) and kept

    # The retrieval itself, on a seeded sample of the questions whose database is at hand (Spider dev here has
    # 19 of its 20): DAIL masks with the question's schema; SCL ranks skeletons.
    schemas = {}

    def schema_of(database):  # the fixture registers without indexes: introspect as a session would
        with open_connector(database) as connector:
            return connector.introspect(with_stats=False)

    for q in random.Random(18).sample([q for q in questions if q.database is not None], 60):
        schema = schemas[q.database_id] = schemas.get(q.database_id) or schema_of(q.database)
        kept, _ = candidates(ctx_for(q, schema))
        _masked, chosen = select_examples(q.question, schema, kept, k=5, preliminary_sql=q.gold_sql)
        assert len(chosen) == 5 and all(s.example.db_id != q.db_id for s in chosen)
        assert all(normal_sql(s.example.sql) != normal_sql(q.gold_sql) for s in chosen)
        ranked = rank_examples(q.question, [(e.question, e.sql) for e in kept])[:3]
        assert all(kept[i].db_id != q.db_id and normal_sql(s) != normal_sql(q.gold_sql) for _score, i, _q, s in ranked)
