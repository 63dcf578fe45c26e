"""The test suite's fixtures (settings, replay server, user client, the Spider dev dataset)."""

from tests.annotations.runs.conftest import spider_dev  # noqa: F401
from tests.conftest import *  # noqa: F403
