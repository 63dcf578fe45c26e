from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from agent.sql import Connector, connect
from agent.tools import (
    IndexManifest,
    IndexMissing,
    ToolBox,
    build_indexes,
    clear_cache,
    is_stale,
    read_manifest,
    tool_names,
)
from agent.tools.base import ToolRunner
from agent.tools.toolbox import loaded_indexes


@pytest.mark.parametrize(("name", "args", "kwargs", "expected"), [
    ("SearchValue", (), {}, "missing a required argument: 'query'"),
    ("SearchValue", ("a", "b", "c", "d"), {}, "too many positional arguments"),
    ("SearchValue", ("a",), {"tabel": "x"}, "unexpected keyword argument 'tabel'"),
    ("SearchValue", (42,), {}, "query must be a string or a list of strings"),
    ("SearchColumn", ([1, 2],), {}, "query must be a string or a list of strings"),
    ("FindShortestPath", ("singer.name",), {}, "missing a required argument: 'end'"),
    ("ExecuteSQL", (None,), {}, "ExecuteSQL needs one SQL query"),
    ("searchvalue", ("a",), {}, "Did you mean SearchValue?"),
    ("Done", (), {}, "Unknown tool 'Done'"),
    (["SearchValue"], (), {}, "Unknown tool ['SearchValue']"),
])
def test_bad_calls_return_a_helpful_observation(toolbox: ToolBox, name: object, args: tuple[object, ...],
                                                 kwargs: dict[str, object], expected: str) -> None:
    result = toolbox.run(name, args, kwargs)  # type: ignore[arg-type]
    assert not result.ok
    assert expected in result.observation
    assert len(result.observation) < 300


def test_usage_is_part_of_argument_errors(toolbox: ToolBox) -> None:
    assert "Usage: SearchValue(query, table=None, column=None)" in toolbox.run("SearchValue").observation


def test_paper_and_brief_argument_names_are_accepted(toolbox: ToolBox) -> None:
    assert toolbox.run("SearchValue", (), {"value": "France"}).ok
    assert toolbox.run("SearchColumn", (), {"semantic": "age"}).ok
    assert toolbox.run("ExecuteSQL", (), {"query": "SELECT 1"}).ok
    assert toolbox.run("FindShortestPath", (), {"start": "singer.name", "end": ["concert.year"]}).ok


def test_a_bare_string_instead_of_an_argument_list_is_one_argument(toolbox: ToolBox) -> None:
    assert toolbox.run("SearchValue", "France").ok  # type: ignore[arg-type]


def test_disabled_tool_is_refused(connector: Connector, index_dir: Path) -> None:
    build_indexes(connector, index_dir)
    tools = ToolBox(connector, index_dir, enabled=("SearchColumn", "SearchValue", "ExecuteSQL"))
    assert tools.tool_names == ("SearchValue", "SearchColumn", "ExecuteSQL")
    result = tools.run("FindShortestPath", ["singer.name", "concert.theme"])
    assert not result.ok and "not available here" in result.observation
    clear_cache()


def test_toolbox_satisfies_the_runner_protocol(toolbox: ToolBox) -> None:
    runner: ToolRunner = toolbox
    assert runner.tool_names == tool_names()
    assert runner.schema.table("singer") is not None
    assert all(r.elapsed_ms >= 0 for r in [runner.run("SearchValue", ["France"])])


def test_missing_index_raises_a_clear_error(connector: Connector, tmp_path: Path) -> None:
    with pytest.raises(IndexMissing, match="build_indexes"):
        ToolBox(connector, tmp_path / "nothing")


def test_index_files_removed_under_a_toolbox_give_ok_false(connector: Connector, index_dir: Path) -> None:
    manifest = build_indexes(connector, index_dir)
    clear_cache()
    tools = ToolBox(connector, index_dir)
    (index_dir / manifest.version / "values.sqlite").unlink()
    result = tools.run("SearchValue", ["France"])
    assert not result.ok and "rebuild" in result.observation
    clear_cache()


def test_manifest_records_build_and_round_trips(connector: Connector, index_dir: Path) -> None:
    manifest = build_indexes(connector, index_dir)
    assert read_manifest(index_dir) == manifest
    assert IndexManifest.from_dict(manifest.to_dict()) == manifest
    assert manifest.fingerprint == connector.fingerprint()
    assert manifest.counts["tables"] == 7 and manifest.counts["foreign_keys"] == 3
    assert manifest.counts["cells"] > 40
    assert set(manifest.sizes) == {"schema", "columns", "column_vectors", "column_vectors_paper", "graph",
                                   "values"}  # hybrid default
    assert all(size > 0 for size in manifest.sizes.values())
    assert manifest.build_seconds["total"] >= manifest.build_seconds["values"]
    assert not is_stale(manifest, connector)


def test_rebuild_switches_atomically_and_keeps_one_previous_build(connector: Connector, index_dir: Path) -> None:
    first = build_indexes(connector, index_dir)
    second = build_indexes(connector, index_dir)
    third = build_indexes(connector, index_dir)
    versions = sorted(p.name for p in index_dir.iterdir() if p.is_dir())
    assert versions == sorted([second.version, third.version])
    assert first.version not in versions
    assert read_manifest(index_dir) == third
    assert not [p for p in index_dir.iterdir() if p.name.startswith(".")]


def test_failed_build_leaves_the_current_index_in_place(connector: Connector, index_dir: Path) -> None:
    good = build_indexes(connector, index_dir)
    with pytest.raises(ValueError):
        build_indexes(connector, index_dir, column_backend="nonsense")
    assert read_manifest(index_dir) == good


def test_loaded_indexes_are_shared_between_toolboxes(connector: Connector, index_dir: Path) -> None:
    manifest = build_indexes(connector, index_dir)
    a, b = ToolBox(connector, index_dir), ToolBox(connector, index_dir)
    a.run("SearchValue", ["France"])
    assert loaded_indexes(index_dir, manifest) is loaded_indexes(index_dir, manifest)
    assert a._current() is b._current()
    clear_cache()


def test_changed_target_is_stale_and_rebuild_finds_new_values(tmp_path: Path, db_path: Path) -> None:
    target = tmp_path / "copy.sqlite"
    shutil.copy(db_path, target)
    index_dir = tmp_path / "idx"
    with connect("sqlite", str(target)) as db:
        manifest = build_indexes(db, index_dir)
        tools = ToolBox(db, index_dir)
        assert "no matching cell" in tools.run("SearchValue", ["Kraftwerk"]).observation
        time.sleep(0.01)
        conn = sqlite3.connect(target)
        conn.execute("INSERT INTO singer VALUES (8, 'Kraftwerk', 'Germany', 70)")
        conn.commit()
        conn.close()
        assert is_stale(manifest, db)
        rebuilt = build_indexes(db, index_dir)
        assert not is_stale(rebuilt, db)
        assert rebuilt.built_at != manifest.built_at
        # The same ToolBox sees the new build on its next call.
        assert "singer.name = 'Kraftwerk'" in tools.run("SearchValue", ["Kraftwerk"]).observation
    clear_cache()


def test_a_build_of_an_older_format_is_stale(connector: Connector, index_dir: Path) -> None:
    """Builds from before statistics kept whitespace (and the paper profile's files) are rebuilt on next use."""
    build_indexes(connector, index_dir, column_backend="bm25")
    assert not is_stale(read_manifest(index_dir), connector)
    path = index_dir / "manifest.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**data, "format_version": 1}), encoding="utf-8")
    assert is_stale(read_manifest(index_dir), connector)
