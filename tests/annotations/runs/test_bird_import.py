"""BIRD layout: dev.json with evidence and difficulty, dev_databases/<db>/<db>.sqlite, database_description CSVs."""

import json

import pytest

from agent import services as agent_services
from agent.models import Database
from annotations.runs import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def bird_dir(tmp_path, make_sqlite):
    root = tmp_path / "bird"
    folder = root / "dev_databases" / "school"
    (folder / "database_description").mkdir(parents=True)
    db = make_sqlite("CREATE TABLE frpm (cds TEXT PRIMARY KEY, fte REAL, county TEXT);"
                     "INSERT INTO frpm VALUES ('01', 12.5, 'Alameda'), ('02', 3.0, 'Fresno'), ('03', 7.0, 'Alameda');")
    db.rename(folder / "school.sqlite")
    (folder / "database_description" / "frpm.csv").write_text(
        "original_column_name,column_name,column_description,data_format,value_description\n"
        "cds,CDSCode,county district school code,text,\n"
        "fte,FTE,full-time equivalent enrollment of teachers,real,\n"
        "county,County Name,name of the county,text,\n", encoding="utf-8")
    (root / "dev.json").write_text(json.dumps([
        {"question_id": 0, "db_id": "school", "question": "How many schools are in Alameda?",
         "evidence": "Alameda is a county", "SQL": "SELECT count(*) FROM frpm WHERE county = 'Alameda'",
         "difficulty": "simple"},
        {"question_id": 1, "db_id": "school", "question": "Total teacher FTE?", "evidence": "",
         "SQL": "SELECT sum(fte) FROM frpm", "difficulty": "moderate"},
    ]))
    return root


def test_bird_import_keeps_evidence_difficulty_and_column_descriptions(bird_dir):
    dataset = services.dataset_import(kind="bird", path=bird_dir, name="bird-mini")
    first = dataset.questions.get(index=0)
    assert (first.evidence, first.difficulty, dataset.executable_count) == ("Alameda is a county", "simple", 2)
    school = Database.objects.get(name="school")
    assert school.column_descriptions["frpm.fte"] == "full-time equivalent enrollment of teachers"
    toolbox = agent_services.toolbox_for(school)
    try:
        observation = toolbox.run("SearchColumn", ["teachers enrollment"]).observation
    finally:
        toolbox.connector.close()
    assert observation.splitlines()[1].startswith("- frpm.fte")  # found through its description
    assert "full-time equivalent enrollment of teachers" in observation


def test_bird_predictions_are_scored_with_set_semantics_and_difficulty_buckets(bird_dir):
    dataset = services.dataset_import(kind="bird", path=bird_dir, name="bird-mini", build_indexes=False)
    text = json.dumps({"0": "SELECT count(*) FROM frpm WHERE county = 'Alameda'\t----- bird -----\tschool",
                       "1": "SELECT sum(fte) FROM frpm WHERE county = 'Fresno'\t----- bird -----\tschool"})
    run = services.run_evaluate(run=services.run_import_predictions(dataset=dataset, text=text, fmt="bird",
                                                                    name="bird run"))
    assert run.totals["ex"] == 50.0 and run.totals["soft_f1"] is not None
    assert set(run.breakdowns["difficulty"]) == {"simple", "moderate"}


def test_csv_dataset_with_an_existing_registered_database(tmp_path, demo_database):
    path = tmp_path / "questions.csv"
    path.write_text("question,sql,database\nHow many artists?,SELECT count(*) FROM Artist,chinook\n"
                    "Longest track?,SELECT Name FROM Track ORDER BY Milliseconds DESC LIMIT 1,chinook\n")
    dataset = services.dataset_import(kind="jsonl", path=path, name="music questions")
    assert dataset.question_count == 2 and dataset.executable_count == 2
    run = services.run_evaluate(run=services.run_import_predictions(
        dataset=dataset, text="SELECT count(*) FROM Artist\nSELECT 1\n", fmt="spider", name="half"))
    assert run.totals["ex"] == 50.0
