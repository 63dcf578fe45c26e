import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotations.exemplars import paper_sets, selectors
from annotations.exemplars.importer import ImportProblem, parse_trajectory
from annotations.models import Exemplar, ExemplarSet, ExemplarSetVersion
from tests.conftest import SHARED_DIR

pytestmark = pytest.mark.django_db

REFERENCE = SHARED_DIR / "reference" / "interactive_t2s_prompts"
DATASETS = ["bird-no_evidence", "bird-with_evidence", "spider", "spider2-lite-snowflake", "spider2-lite-sqlite"]


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.shared_data
def test_import_every_reference_folder(dataset):
    folder = REFERENCE / dataset
    trajectories = sorted(p for p in folder.glob("*/*.txt") if p.name != "schema.txt")
    out = StringIO()
    call_command("import_exemplars", str(folder), "--format", "interactive-t2s", stdout=out, stderr=StringIO())
    version = ExemplarSetVersion.objects.get(exemplar_set__name=dataset)
    assert version.number == 1 and version.exemplar_count == len(trajectories)
    assert version.tool_description == (folder / "tool_desc.txt").read_text(encoding="utf-8").strip()
    for item in version.exemplars:
        exemplar = Exemplar.objects.get(pk=item["exemplar_id"])
        assert exemplar.state == Exemplar.State.APPROVED and exemplar.database is None
        assert item["schema_text"] == (folder / item["database"] / "schema.txt").read_text(encoding="utf-8").strip()
        assert item["question"] and item["final_sql"]
    assert f"Imported set '{dataset}' v1" in out.getvalue()
    shots = selectors.exemplars_for_version(version)
    assert all(s.question for s in shots)


@pytest.mark.shared_data
def test_import_keeps_steps_evidence_and_observations():
    call_command("import_exemplars", str(REFERENCE / "bird-with_evidence"), "--format", "interactive-t2s",
                 stdout=StringIO())
    shot = selectors.exemplars_for_version(ExemplarSetVersion.objects.get(exemplar_set__name="bird-with_evidence"))[0]
    assert shot.question.startswith("Among the daylight savings areas in the Midwest region")
    assert shot.evidence.startswith("postal points refer to zip_code")
    assert [s.action.split("(")[0] for s in shot.steps] == [
        "SearchValue", "SearchColumn", "FindShortestPath", "ExecuteSQL", "Done."]
    assert shot.steps[2].observation == "zip_data.zip_code <-> zip_data.abbreviation = state.state <-> state.name"
    assert shot.steps[-1].observation is None


@pytest.mark.shared_data
def test_a_folder_of_datasets_imports_one_set_each():
    call_command("import_exemplars", str(REFERENCE), "--format", "interactive-t2s", stdout=StringIO(),
                 stderr=StringIO())
    imported = ExemplarSet.objects.exclude(name__in=paper_sets.FOLDERS).values_list("name", flat=True)
    assert sorted(imported) == DATASETS


def test_a_bad_file_is_reported_with_file_and_line_and_nothing_is_imported(tmp_path: Path):
    dataset = tmp_path / "mine"
    (dataset / "shop").mkdir(parents=True)
    (dataset / "tool_desc.txt").write_text("Tools...")
    (dataset / "shop" / "schema.txt").write_text("| Table |")
    (dataset / "shop" / "good.txt").write_text('Q: How many?\nThought: count\nAction: ExecuteSQL("SELECT 1")\n'
                                               "Observation: [(1,)]\nThought: ok\nAction: Done\n")
    (dataset / "shop" / "bad.txt").write_text('Q: How many?\nThought: count\nAction: ExecuteSQL("SELECT 1\n')
    before = (Exemplar.objects.count(), ExemplarSet.objects.count())  # the paper's sets, published at setup
    with pytest.raises(CommandError) as info:
        call_command("import_exemplars", str(dataset), "--format", "interactive-t2s", stdout=StringIO())
    assert "mine/shop/bad.txt:3: the action does not parse" in str(info.value)
    assert (Exemplar.objects.count(), ExemplarSet.objects.count()) == before
    assert not ExemplarSet.objects.filter(name="mine").exists()


def test_parse_errors_name_the_line():
    with pytest.raises(ImportProblem) as info:
        parse_trajectory("Q: q\nObservation: x\nstray text\n", path="f.txt")
    assert "f.txt:2: an Observation with no Action before it." in info.value.problems


def test_json_round_trip_is_lossless(tmp_path, demo_database, reviewer, approved):
    from annotations.exemplars import services

    exemplar_set = services.set_create(name="demo", user=reviewer, description="Two shots")
    services.set_publish(exemplar_set=exemplar_set, exemplars=[approved(demo_database)], user=reviewer)
    services.set_publish(exemplar_set=exemplar_set, exemplars=[approved(demo_database, question="Again?")],
                         user=reviewer, tool_description="My tools", note="v2 note")
    first = StringIO()
    call_command("export_exemplars", "demo", "--version", "2", stdout=first)
    path = tmp_path / "demo.json"
    path.write_text(first.getvalue())
    call_command("import_exemplars", str(path), "--format", "json", "--name", "demo-copy", stdout=StringIO())
    second = StringIO()
    call_command("export_exemplars", "demo-copy", stdout=second)
    a, b = json.loads(first.getvalue()), json.loads(second.getvalue())

    def content(doc):
        return {"description": doc["set"]["description"], "note": doc["version"]["note"],
                "tool_description": doc["version"]["tool_description"], "hash": doc["version"]["content_hash"],
                "exemplars": [{k: v for k, v in e.items() if k != "exemplar_id"} for e in doc["exemplars"]]}

    assert content(a) == content(b)
    assert b["exemplars"][0]["database"] == "chinook" and b["exemplars"][0]["steps"][0]["observation"]
    copy = ExemplarSetVersion.objects.get(exemplar_set__name="demo-copy")
    # Mapped to the registered database of that name; the same content is the same exemplar, not a duplicate.
    assert Exemplar.objects.get(pk=copy.exemplars[0]["exemplar_id"]).database == demo_database
    assert copy.exemplars[0]["exemplar_id"] == a["exemplars"][0]["exemplar_id"]
    count = Exemplar.objects.count()
    call_command("import_exemplars", str(path), "--format", "json", "--name", "linked", "--database", "chinook",
                 stdout=StringIO())
    linked = ExemplarSetVersion.objects.get(exemplar_set__name="linked")
    assert Exemplar.objects.get(pk=linked.exemplars[0]["exemplar_id"]).database == demo_database
    assert linked.content_hash == copy.content_hash and Exemplar.objects.count() == count


def test_json_import_refuses_an_existing_set_name(tmp_path, demo_database, reviewer, approved):
    from annotations.exemplars import services

    exemplar_set = services.set_create(name="demo", user=reviewer)
    services.set_publish(exemplar_set=exemplar_set, exemplars=[approved(demo_database)], user=reviewer)
    out = StringIO()
    call_command("export_exemplars", "demo", stdout=out)
    path = tmp_path / "demo.json"
    path.write_text(out.getvalue())
    count = Exemplar.objects.count()
    with pytest.raises(CommandError, match="is not available; choose another with --name"):
        call_command("import_exemplars", str(path), "--format", "json", stdout=StringIO())
    assert Exemplar.objects.count() == count
