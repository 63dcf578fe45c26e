from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .tool_double import ToolDouble, build_school_db


@pytest.fixture
def school_db(tmp_path: Path) -> Path:
    return build_school_db(tmp_path / "school.sqlite")


@pytest.fixture
def tools(school_db: Path) -> Iterator[ToolDouble]:
    runner = ToolDouble(school_db, canned={
        "SearchValue": "singer.name = 'Adele'",
        "SearchColumn": "singer.name (TEXT): e.g. 'Adele', 'Shakira'; concert.year (INTEGER): 2016 .. 2019",
        "FindShortestPath": "singer.name <-> concert.singer_id = singer.singer_id <-> concert.year",
    })
    yield runner
    runner.close()
