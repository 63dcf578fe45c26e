import pytest

from annotations.runs import services
from tests.conftest import SPIDER_DIR


@pytest.fixture
def spider_dev(db):
    """Spider dev imported as a dataset (databases registered; their indexes are not built).

    Tests using it are marked shared_data (skipped in a clone without ../shared), so a missing folder here
    means a test lacks the marker: it fails instead of skipping quietly.
    """
    if not SPIDER_DIR.exists():
        pytest.fail(f"Spider dev data not found at {SPIDER_DIR}; mark the test shared_data")
    return services.dataset_import(kind="spider", path=SPIDER_DIR, name="spider-dev", build_indexes=False)
