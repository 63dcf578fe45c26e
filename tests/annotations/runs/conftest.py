import pytest

from annotations.runs import services
from tests.conftest import SPIDER_DIR, testers_group


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
    group = testers_group()
    for database_id in set(dataset.questions.exclude(database=None).values_list("database_id", flat=True)):
        DatabaseGrant.objects.get_or_create(database_id=database_id, group=group)
    return dataset
