import sqlite3
import time

import pytest

from agent import services
from agent.models import Database

pytestmark = pytest.mark.django_db


def test_indexes_are_built_on_register_and_shown_on_the_database_page(user_client, user, chinook_copy, grant):
    db = grant(services.database_register(name="music", location=str(chinook_copy), refresh="sync"), user)
    assert db.index_status == Database.IndexStatus.READY
    assert db.index_manifest["counts"]["tables"] == 11
    html = user_client.get(db.get_absolute_url()).content.decode()
    assert "Tool indexes:" in html and "text cells indexed" in html and "total" in html


def test_a_changed_target_is_marked_stale_rebuilt_and_then_searchable(chinook_copy,
                                                                     django_capture_on_commit_callbacks):
    db = services.database_register(name="music", location=str(chinook_copy), refresh="sync")
    time.sleep(0.01)
    with sqlite3.connect(chinook_copy) as conn:
        conn.execute("INSERT INTO Artist (ArtistId, Name) VALUES (9001, 'Zzyzx Band')")
    conn.close()
    with django_capture_on_commit_callbacks() as callbacks:
        toolbox = services.toolbox_for(db)
    toolbox.connector.close()
    db.refresh_from_db()
    assert db.index_status == Database.IndexStatus.STALE and len(callbacks) == 1  # a rebuild is queued
    services.database_refresh(database=db)
    db.refresh_from_db()
    assert db.index_status == Database.IndexStatus.READY
    toolbox = services.toolbox_for(db)
    try:
        assert "Artist.Name = 'Zzyzx Band'" in toolbox.run("SearchValue", ["Zzyzx Band"]).observation
    finally:
        toolbox.connector.close()


def test_index_build_failure_is_reported_on_the_database(chinook_copy, settings, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    settings.T2S = {**settings.T2S, "INDEX_DIR": blocker}
    db = services.database_register(name="music", location=str(chinook_copy), refresh="sync")
    assert db.status == Database.Status.READY  # the schema is fine
    assert db.index_status == Database.IndexStatus.FAILED and db.index_error


def test_a_target_past_the_value_index_limits_shows_why_on_the_database_page(user_client, user, chinook_copy, grant,
                                                                              monkeypatch):
    from agent.tools import value_index

    monkeypatch.setattr(value_index, "MAX_INDEX_CELLS", 100)  # chinook has about 12,000 distinct text values
    db = grant(services.database_register(name="music", location=str(chinook_copy), refresh="sync"), user)
    assert db.status == Database.Status.READY and db.index_status == Database.IndexStatus.FAILED
    assert "more than 100 distinct text values (per column) to index (the limit of one build)" in db.index_error
    html = user_client.get(db.get_absolute_url()).content.decode()
    assert "more than 100 distinct text values" in html


def test_a_schema_and_build_from_before_whitespace_was_kept_are_redone(tmp_path, django_capture_on_commit_callbacks):
    """Statistics once collapsed whitespace ('United States ' shown as 'United States'): such a stored schema
    and its index build are redone on the next use, so SearchColumn shows the stored value again."""
    path = tmp_path / "air.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE airports (code TEXT, country TEXT)")
        conn.executemany("INSERT INTO airports VALUES (?, ?)", [("A", "United States "), ("B", "United States ")])
    conn.close()
    db = services.database_register(name="air", location=str(path), refresh="sync")
    old = db.schema
    for table in old["tables"]:
        for col in table["columns"]:
            col.pop("declared_type")
            if col["stats"] and col["stats"]["values"]:
                col["stats"]["values"] = [[" ".join(v.split()), n] for v, n in col["stats"]["values"]]
    Database.objects.filter(pk=db.pk).update(schema=old)
    manifest_path = services.index_dir_for(db) / "manifest.json"
    manifest_path.write_text(manifest_path.read_text().replace('"format_version": 2', '"format_version": 1'))
    with django_capture_on_commit_callbacks() as callbacks:
        services.toolbox_for(db).connector.close()
    assert len(callbacks) == 1  # a rebuild is queued
    db.refresh_from_db()
    services.database_refresh(database=db)
    with services.toolbox_for(db) as toolbox:
        assert "'United States '" in toolbox.run("SearchColumn", ["country"]).observation
