import pytest

from annotations.runs import services
from tests.conftest import SPIDER_DIR, group_of_testers


@pytest.fixture
def spider_dev(db):
    """Spider dev imported as a dataset (databases registered; their indexes are not built), its databases granted
    to the ``testers`` group (the ``user`` fixture's).

    Tests using it are marked shared_data (skipped in a clone without ../shared), so a missing folder here
    means a test lacks the marker: it fails instead of skipping quietly.
    """
    from agent.models import DatabaseGrant

    if not SPIDER_DIR.exists():
        pytest.fail(f"Spider dev data not found at {SPIDER_DIR}; mark the test shared_data")
    dataset = services.dataset_import(kind="spider", path=SPIDER_DIR, name="spider-dev", build_indexes=False)
    group = group_of_testers()
    for database_id in set(dataset.questions.exclude(database=None).values_list("database_id", flat=True)):
        DatabaseGrant.objects.get_or_create(database_id=database_id, group=group)
    return dataset


@pytest.fixture
def built_dataset(db, tmp_path, make_sqlite):
    """A small JSONL dataset on a built SQLite database (no shared data): ``built_dataset(n, name=...)`` gives
    ``n`` questions "How many items cost more than k?", its database granted to ``testers``."""
    import json

    from agent.models import DatabaseGrant

    def build(n: int = 6, name: str = "mini", db_id: str = "shop"):
        folder = tmp_path / name
        (folder / "database" / db_id).mkdir(parents=True)
        rows = ", ".join(f"('item{i}', {i})" for i in range(20))
        make_sqlite(f"CREATE TABLE item (name TEXT, price REAL); INSERT INTO item VALUES {rows};",
                    name=f"{name}.sqlite").rename(folder / "database" / db_id / f"{db_id}.sqlite")
        lines = [json.dumps({"question": f"How many items cost more than {k}?", "database": db_id,
                             "sql": f"SELECT count(*) FROM item WHERE price > {k}"}) for k in range(n)]
        (folder / "questions.jsonl").write_text("\n".join(lines) + "\n")
        # Introspected and indexed now (a 20-row table): estimates and sessions need the schema.
        dataset = services.dataset_import(kind="jsonl", path=folder / "questions.jsonl", name=name)
        for database_id in set(dataset.questions.exclude(database=None).values_list("database_id", flat=True)):
            DatabaseGrant.objects.get_or_create(database_id=database_id, group=group_of_testers())
        return dataset

    return build
