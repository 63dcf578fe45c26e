"""Example pools that cannot leak, on small built data (no ../shared needed): a pool from the dataset being run
is cross-database (a question never sees an example of its own database, nor an exact duplicate of itself or
of its gold SQL); a separate pool loses only the exact duplicates; the run says which rule applied and how big
the pool was; a strategy that retrieves examples is refused without a pool at every door. Also Table 10's
setting: the seeded join-bucket sample and ``--without`` a tool."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from agent.models import DatabaseGrant, ExamplePool, LLMEndpoint
from agent.roles import OPERATOR
from agent.strategies.base import SessionContext
from agent.strategies.pool import PoolExample, candidates
from annotations.runs import services
from annotations.runs.models import Run
from annotations.runs.pools import question_exclusion
from annotations.runs.sampling import sample_questions
from tests.conftest import give_roles, group_of_testers

pytestmark = pytest.mark.django_db

DEV = [
    ("shop", "How many items are there?", "SELECT count(*) FROM item"),
    ("shop", "Count the items.", "SELECT count(*) FROM item"),  # same gold, same database: Spider dev has 966
    ("store", "How many items does the store have?", "select  COUNT(*) from item;"),  # same gold, other database
    ("store", "What is the most expensive item?", "SELECT name FROM item ORDER BY price DESC LIMIT 1"),
    ("store", "List the item names.", "SELECT name FROM item"),
]
TRAIN = [  # a separate pool on one of the same databases (a curated pool)
    ("shop", "How many items are there?", "SELECT 1"),  # the question's exact text
    ("shop", "Give the number of items.", "SELECT count(*) FROM item"),  # the question's exact gold
    ("shop", "Which item is cheapest?", "SELECT name FROM item ORDER BY price LIMIT 1"),
]


@pytest.fixture
def import_questions(tmp_path, make_sqlite):
    def build(name: str, rows) -> object:
        folder = tmp_path / name
        for db_id in {r[0] for r in rows}:
            (folder / "database" / db_id).mkdir(parents=True)
            make_sqlite("CREATE TABLE item (name TEXT, price REAL); INSERT INTO item VALUES ('a', 1), ('b', 2);",
                        name=f"{name}-{db_id}.sqlite").rename(folder / "database" / db_id / f"{db_id}.sqlite")
        (folder / "questions.jsonl").write_text("\n".join(
            json.dumps({"database": d, "question": q, "sql": s}) for d, q, s in rows) + "\n")
        dataset = services.dataset_import(kind="jsonl", path=folder / "questions.jsonl", name=name,
                                          build_indexes=False)
        for database_id in set(dataset.questions.exclude(database=None).values_list("database_id", flat=True)):
            DatabaseGrant.objects.get_or_create(database_id=database_id, group=group_of_testers())
        return dataset

    LLMEndpoint.objects.create(name="unused", base_url="http://127.0.0.1:9/v1", model="m", is_default=True)
    return build


def retrievable(run: Run, question) -> list[PoolExample]:
    """What a session of ``run`` for ``question`` may retrieve: the stored pool under the run's stored rule."""
    snapshot = run.config["example_pool"]
    pool = tuple(PoolExample.from_dict(e) for e in ExamplePool.objects.get(pk=snapshot["id"]).examples)
    exclusion = question_exclusion(question, rule=snapshot["rule"])
    kept, left_out = candidates(SessionContext(question=question.question, schema=None, example_pool=pool,
                                               pool_exclusion=exclusion))
    assert left_out == len(pool) - len(kept)
    return kept


def test_a_pool_from_the_dataset_being_run_is_cross_database_and_drops_duplicates(import_questions, user_client):
    dev = import_questions("dev", DEV)
    run = services.run_create_agent(dataset=dev, name="dart", strategy="dart_sql", pool="dev")
    assert run.config["example_pool"]["rule"] == "cross-database" and run.config["example_pool"]["size"] == 5
    questions = {q.question: q for q in dev.questions.all()}
    for q in questions.values():
        kept = retrievable(run, q)
        assert all(e.db_id != q.db_id for e in kept)
        assert all(" ".join(e.sql.lower().split()).rstrip(";") != q.gold_sql.lower() for e in kept)
    # Its own database's twin and the other database's same gold written otherwise are both out.
    assert [e.question for e in retrievable(run, questions["How many items are there?"])] == [
        "What is the most expensive item?", "List the item names."]
    assert [e.question for e in retrievable(run, questions["List the item names."])] == [
        "How many items are there?", "Count the items."]
    page = user_client.get(run.get_absolute_url()).content.decode()
    assert "Example pool: dataset dev (5 question-SQL pairs)" in page
    assert 'id="run-pool-rule">cross-database</strong>: no example of the question&#x27;s own database' in page


def test_a_separate_pool_loses_only_exact_duplicates_of_the_question_or_its_gold(import_questions, user_client):
    dev = import_questions("dev", DEV)
    import_questions("train", TRAIN)
    run = services.run_create_agent(dataset=dev, name="scl", strategy="scl_sql", pool="train")
    assert run.config["example_pool"]["rule"] == "duplicates" and run.config["example_pool"]["size"] == 3
    own = dev.questions.get(question="How many items are there?")
    # Same database as the question, yet kept: the pool is separate; its text and its gold are not.
    assert [e.question for e in retrievable(run, own)] == ["Which item is cheapest?"]
    other = dev.questions.get(question="What is the most expensive item?")
    assert len(retrievable(run, other)) == 3
    page = user_client.get(run.get_absolute_url()).content.decode()
    assert 'id="run-pool-rule">duplicates</strong>: only exact duplicates' in page


def test_a_strategy_that_retrieves_examples_is_refused_without_a_pool_at_every_door(import_questions, client, user):
    dev = import_questions("dev", DEV)
    for strategy, option in (("dart_sql", "examples"), ("scl_sql", "positives")):
        with pytest.raises(ValidationError) as refused:
            services.run_create_agent(dataset=dev, name="x", strategy=strategy)
        assert "example pool" in refused.value.message_dict["pool"][0]
        assert f"set the option {option} to 0" in refused.value.message_dict["pool"][0]
        # Asking for no examples is a choice, and then it runs.
        services.run_create_agent(dataset=dev, name=f"{strategy} zero", strategy=strategy, options={option: 0})
    with pytest.raises(CommandError, match="DART-SQL selects its 5 examples from an example pool"):
        call_command("run", "--dataset", "dev", "--strategy", "dart_sql")
    give_roles(user, OPERATOR)
    client.force_login(user)
    answer = client.post("/api/runs/", {"dataset": "dev", "name": "x", "strategy": "scl_sql"},
                         content_type="application/json")
    assert answer.status_code == 400 and "positive examples from an example pool" in answer.json()["pool"][0]
    page = client.post(f"/datasets/{dev.name}/run/", {
        "launch-name": "x", "launch-strategy": "dart_sql", "launch-sample": "all"}, follow=True).content.decode()
    assert "DART-SQL selects its 5 examples from an example pool" in page
    # The form's estimate says so before launching, and not once a pool is named.
    estimate = f"/datasets/{dev.name}/estimate/"
    said = client.get(estimate, {"launch-strategy": "scl_sql", "launch-sample": "all"}).content.decode()
    assert 'id="estimate-pool"' in said and "SCL-SQL retrieves its 3 positive examples" in said
    said = client.get(estimate, {"launch-strategy": "scl_sql", "launch-sample": "all", "launch-pool": "dev"})
    assert 'id="estimate-pool"' not in said.content.decode()
    assert Run.objects.filter(name="x").count() == 0
    assert not services.run_create_agent(dataset=dev, name="it", strategy="interactive_t2s").config["example_pool"]


def test_without_a_tool_from_the_command_the_form_and_the_api_is_stored_and_shown(import_questions, client, user):
    dev = import_questions("dev", DEV)
    call_command("run", "--dataset", "dev", "--without", "FindShortestPath", "--name", "ablation")
    run = Run.objects.get(name="ablation")
    assert run.config["without"] == ["FindShortestPath"]
    assert sorted(run.config["options"]["enabled_tools"]) == ["ExecuteSQL", "SearchColumn", "SearchValue"]
    give_roles(user, OPERATOR)
    client.force_login(user)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="run-without">Ablation: without FindShortestPath' in page
    form = client.get(dev.get_absolute_url()).content.decode()
    assert 'name="launch-without" value="FindShortestPath"' in form
    client.post(f"/datasets/{dev.name}/run/", {"launch-name": "from the form", "launch-strategy": "interactive_t2s",
                                                   "launch-sample": "all", "launch-without": ["FindShortestPath"]})
    assert Run.objects.get(name="from the form").config["without"] == ["FindShortestPath"]
    answer = client.post("/api/runs/", {"dataset": "dev", "name": "api", "without": ["FindShortestPath"]},
                         content_type="application/json")
    assert answer.status_code == 201 and answer.json()["config"]["without"] == ["FindShortestPath"]
    refused = client.post("/api/runs/", {"dataset": "dev", "name": "hdsp", "strategy": "hdsp",
                                         "without": ["FindShortestPath"]}, content_type="application/json")
    assert refused.status_code == 400 and refused.json() == {"without": ["hdsp has no tools to switch off."]}
    refused = client.post("/api/runs/", {"dataset": "dev", "name": "t", "without": ["Teleport"]},
                          content_type="application/json")
    assert refused.status_code == 400 and "No tool named Teleport" in refused.json()["without"][0]


def test_the_join_bucket_sample_draws_n_per_bucket_with_a_seed(import_questions, client, user):
    joins = {1: "SELECT name FROM item", 2: "SELECT a.name FROM item AS a JOIN item AS b ON a.name = b.name"}
    rows = []
    for tables, count in ((1, 6), (2, 5), (3, 4), (4, 2), (5, 2)):
        sql = joins.get(tables) or ("SELECT a.name FROM item AS a" + "".join(
            f" JOIN item AS t{k} ON a.name = t{k}.name" for k in range(tables - 1)))
        rows += [("shop", f"Question {tables}-{k}?", sql) for k in range(count)]
    dev = import_questions("joins", rows)
    bucket = {q.pk: ("4+" if q.table_count >= 4 else str(q.table_count)) for q in dev.questions.all()}
    pick = lambda seed: sample_questions(dev.questions.all(), limit=3, mode="join-buckets", seed=seed)  # noqa: E731
    chosen = pick(11)
    assert [q.pk for q in chosen] == [q.pk for q in pick(11)]  # the seed repeats it
    per_bucket = {b: sum(bucket[q.pk] == b for q in chosen) for b in ("1", "2", "3", "4+")}
    assert per_bucket == {"1": 0, "2": 3, "3": 3, "4+": 3}
    assert {frozenset(q.pk for q in pick(s)) for s in range(8)} != {frozenset(q.pk for q in chosen)}
    call_command("run", "--dataset", "joins", "--sample", "join-buckets", "--limit", "3", "--seed", "11",
                 "--without", "FindShortestPath", "--name", "table 10")
    run = Run.objects.get(name="table 10")
    assert run.config["sample"] == {"db_ids": [], "limit": 3, "mode": "join-buckets", "seed": 11}
    assert sorted(run.items.values_list("question_id", flat=True)) == sorted(q.pk for q in chosen)
    default = services.run_create_agent(dataset=dev, name="fifty", sample="join-buckets")
    assert default.config["sample"]["limit"] == 50 and isinstance(default.config["sample"]["seed"], int)
    assert default.items.count() == 5 + 4 + 4  # a bucket smaller than 50 gives all it has
    give_roles(user, OPERATOR)
    client.force_login(user)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "a random 3 per tables-joined bucket 2, 3 and 4+ as the paper's Table 10 (seed 11" in page
    client.post(f"/datasets/{dev.name}/run/", {"launch-name": "form", "launch-strategy": "interactive_t2s",
                                                   "launch-sample": "join-buckets", "launch-seed": "11",
                                                   "launch-limit": "3"})
    assert Run.objects.get(name="form").config["sample"]["mode"] == "join-buckets"
