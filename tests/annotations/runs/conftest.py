import pytest

from annotations.runs import services
from tests.conftest import SPIDER_DIR


@pytest.fixture
def spider_dev(db):
    """Spider dev imported as a dataset (databases registered; their indexes are not built)."""
    if not SPIDER_DIR.exists():
        pytest.skip("Spider dev data not available")
    return services.dataset_import(kind="spider", path=SPIDER_DIR, name="spider-dev", build_indexes=False)
