"""The flight_2 patch: the foreign key the paper's authors added to Spider, optional and visible."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from agent.models import Database
from agent.services import toolbox_for
from annotations.runs import services
from annotations.runs.models import Dataset
from tests.conftest import SPIDER_DIR

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]


@pytest.fixture
def flight_2_only(tmp_path):
    """Spider dev's flight_2 questions as a small Spider folder (the database file is the real one)."""
    if not (SPIDER_DIR / "database" / "flight_2").is_dir():
        pytest.skip("Spider dev data not available")
    dev = [q for q in json.loads((SPIDER_DIR / "dev.json").read_text()) if q["db_id"] == "flight_2"]
    (tmp_path / "dev.json").write_text(json.dumps(dev))
    (tmp_path / "database").mkdir()
    (tmp_path / "database" / "flight_2").symlink_to(SPIDER_DIR / "database" / "flight_2")
    for name in ("tables.json",):
        if (SPIDER_DIR / name).exists():
            (tmp_path / name).symlink_to(SPIDER_DIR / name)
    return tmp_path


def _path(database):
    tools = toolbox_for(database)
    try:
        return tools.run("FindShortestPath", ["airlines.Airline", "flights.FlightNo"]).observation
    finally:
        tools.connector.close()


def test_without_the_patch_airlines_and_flights_do_not_join(flight_2_only):
    services.dataset_import(kind="spider", path=flight_2_only, name="f2")
    database = Database.objects.get(name="flight_2")
    assert database.foreign_key_patches == []
    assert "airlines.Airline <->" not in _path(database)


def test_the_flight_2_patch_lets_find_shortest_path_join_airlines_and_flights(flight_2_only, staff_client):
    call_command("import_dataset", "spider", str(flight_2_only), "--name", "f2", "--patch", "flight_2")
    database = Database.objects.get(name="flight_2")
    [fk] = database.foreign_key_patches
    # declared as the authors' spider_missing_fk.json writes it: airlines.uid references flights.Airline
    assert (fk["table"], fk["columns"], fk["ref_table"], fk["ref_columns"]) == ("airlines", ["uid"], "flights",
                                                                               ["Airline"])
    observation = _path(database)
    assert "flights.Airline = airlines.uid" in observation or "airlines.uid = flights.Airline" in observation
    # the prompt's schema table lists it too
    schema = database.schema_info()
    assert any(f.ref_table == "flights" for f in schema.table("airlines").foreign_keys)
    # visible: on the dataset and on the database page
    dataset = Dataset.objects.get(name="f2")
    assert dataset.patches == ["flight_2"]
    page = staff_client.get(f"/databases/{database.name}/").content.decode()
    assert 'id="fk-patches"' in page and "airlines(uid) → flights(Airline)" in page
    assert "flight_2" in staff_client.get(dataset.get_absolute_url()).content.decode()
    # re-importing without it takes it away again
    services.dataset_import(kind="spider", path=flight_2_only, name="f2")
    database.refresh_from_db()
    assert database.foreign_key_patches == [] and "airlines.Airline <->" not in _path(database)


def test_an_unknown_patch_is_refused():
    with pytest.raises(ValidationError, match="No patch 'nope' for spider datasets"):
        services.dataset_import(kind="spider", path=SPIDER_DIR, name="x", patches=["nope"])
