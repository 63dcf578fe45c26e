"""The REST API beyond sessions: datasets (upload with a job to follow), runs (launch with an example pool,
items, compare, cancel), exemplars (write, run a step, submit, review, publish, versions, upload), queues and
agreement; bad input is a field error, never a Python message."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from agent.models import Database, ImportJob
from agent.roles import ANNOTATOR, ASKER, CURATOR, DATA_ADMIN, OPERATOR, VIEWER
from annotations.labels.models import Label, Queue
from annotations.labels.selectors import default_taxonomy_version
from annotations.models import ExemplarSet
from annotations.runs import services
from annotations.runs import uploads as dataset_uploads
from annotations.runs.models import Run
from tests import conftest
from tests.conftest import give_roles
from tests.support.uploads import QUESTIONS, spider_zip, sqlite_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def account(django_user_model):
    def make(name: str, *roles: str):
        user = django_user_model.objects.create_user(name, password=f"pw-{name}-123")
        user.groups.add(conftest.group_of_testers())
        return give_roles(user, VIEWER, *roles)

    return make


@pytest.fixture
def dataset(spider_database, tmp_path):
    spider_database("concert_singer")
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps({"question": q["question"], "sql": q["query"], "db_id": q["db_id"]})
                              for q in QUESTIONS))
    return services.dataset_import(kind="jsonl", path=path, name="tiny", build_indexes=False)


def post(client, url, data):
    return client.post(url, data, content_type="application/json")


def test_a_run_is_launched_with_an_example_pool_and_bad_input_gets_field_errors(client, account, dataset,
                                                                               replay_llm, make_sqlite):
    replay_llm(["SELECT count(*) FROM singer"])
    client.force_login(account("otto", OPERATOR))
    created = post(client, "/api/runs/", {"dataset": "tiny", "name": "dart", "strategy": "dart_sql", "pool": "tiny",
                                          "limit": 2})
    assert created.status_code == 201, created.content
    run = Run.objects.get(pk=created.json()["id"])
    assert run.config["example_pool"]["spec"] == "tiny" and run.items.count() == 2
    assert client.get(f"/api/runs/{run.pk}/").json()["config"]["example_pool"]["size"] == 3

    bad = post(client, "/api/runs/", {"dataset": "tiny", "name": "x", "pool": "nowhere"})
    assert bad.status_code == 400 and "No dataset named 'nowhere'" in bad.json()["pool"][0]
    bad = post(client, "/api/runs/", {"dataset": "tiny", "name": "x", "options": {"max_rounds": "eight"}})
    assert bad.json() == {"options": ["max_rounds must be a whole number, not str."]}
    bad = post(client, "/api/runs/", {"dataset": "nope", "name": "x", "limit": "many"})
    assert set(bad.json()) == {"dataset", "limit"}
    assert Run.objects.count() == 1

    # A pool is drawn only from what the launcher may see: a dataset on a database not granted is unknown.
    from agent import services as agent_services
    from annotations.runs.models import Dataset

    hidden = agent_services.database_register(name="hidden", location=str(make_sqlite("CREATE TABLE t (x INT);")),
                                              refresh="none")
    secret = Dataset.objects.create(name="secret", kind="jsonl", source_path="/x", question_count=1)
    secret.questions.create(index=0, db_id="hidden", database=hidden, question="q", gold_sql="SELECT x FROM t")
    bad = post(client, "/api/runs/", {"dataset": "tiny", "name": "x", "strategy": "dart_sql", "pool": "secret"})
    assert bad.status_code == 400 and "No dataset named 'secret'" in bad.json()["pool"][0]

    cancelled = post(client, f"/api/runs/{run.pk}/cancel/", {})
    assert cancelled.json()["status"] == "cancelled"


def test_run_items_compare_and_agreement(client, account, dataset, django_user_model):
    one = services.run_import_predictions(dataset=dataset, text="SELECT count(*) FROM singer\nSELECT 1\nSELECT 1\n",
                                          fmt="spider", name="one")
    services.run_evaluate(run=one)
    two = services.run_import_predictions(dataset=dataset, text="SELECT 1\nSELECT count(*) FROM concert\nSELECT 1\n",
                                          fmt="spider", name="two")
    services.run_evaluate(run=two)
    client.force_login(account("vera"))
    items = client.get(f"/api/runs/{one.pk}/items/").json()
    assert items["count"] == 3 and [i["ex"] for i in items["results"]] == [True, False, False]
    compared = client.get("/api/runs/compare/", {"a": one.pk, "b": two.pk}).json()
    assert compared["counts"]["fixed"] == 1 and compared["counts"]["broken"] == 1
    assert len(compared["pairs"]) == 3
    assert client.get("/api/runs/compare/", {"a": "x"}).json() == {"a": ["A run id is required."],
                                                                  "b": ["A run id is required."]}
    version = default_taxonomy_version()
    category = version.categories.order_by("position").first()
    for name in ("ann1", "ann2"):
        annotator = account(name, ANNOTATOR)
        for item in one.items.filter(ex=False):
            Label.objects.create(item=item, category=category, taxonomy_version=version, annotator=annotator)
    Queue.objects.create(run=one, name="failures", taxonomy_version=version)
    agreement = client.get(f"/api/runs/{one.pk}/agreement/").json()
    assert agreement["annotators"] == ["ann1", "ann2"] and agreement["items"] == 2
    assert agreement["categories"][0]["category"] == category.key
    assert agreement["pairs"][0]["first"] == "ann1" and agreement["pairs"][0]["items"] == 2
    assert "alpha" in agreement
    queues = client.get("/api/queues/", {"run": one.pk}).json()
    assert [q["name"] for q in queues["results"]] == ["failures"]
    assert client.get("/api/datasets/tiny/questions/").json()["count"] == 3


def test_a_dataset_and_a_database_upload_through_the_api(client, account, tmp_path, upload_dir):
    client.force_login(account("opal", OPERATOR))
    answer = client.post("/api/datasets/", {"kind": "spider", "name": "small",
                                            "archive": SimpleUploadedFile("s.zip", spider_zip(tmp_path))})
    assert answer.status_code == 202 and answer.json()["status"] == "queued"
    job = ImportJob.objects.get(pk=answer.json()["id"])
    dataset_uploads.dataset_upload_run(job=job)
    assert client.get("/api/imports/abc/").status_code == 404
    followed = client.get(f"/api/imports/{job.pk}/").json()
    assert followed["status"] == "done" and followed["result_url"] == "/datasets/small/"
    assert client.get("/api/datasets/small/").json()["question_count"] == 3
    loose = client.post("/api/datasets/", {
        "kind": "spider", "name": "loose", "questions": SimpleUploadedFile("dev.json", json.dumps(QUESTIONS).encode()),
        "databases": [SimpleUploadedFile("concert_singer.sqlite", sqlite_bytes(tmp_path))]})
    assert loose.status_code == 202, loose.content
    loose_job = ImportJob.objects.get(pk=loose.json()["id"])
    dataset_uploads.dataset_upload_run(job=loose_job)
    loose_job.refresh_from_db()
    assert loose_job.status == "failed" and "names are not available" in loose_job.error  # concert_singer is small's
    refused = client.post("/api/datasets/", {"kind": "spider", "name": "small"})
    assert refused.status_code == 400 and "name" in refused.json()

    client.force_login(account("dora", DATA_ADMIN))
    created = client.post("/api/databases/upload/", {"name": "shop", "file": SimpleUploadedFile(
        "shop.sqlite", sqlite_bytes(tmp_path, "shop"))})
    assert created.status_code == 201 and created.json()["name"] == "shop"
    bad = client.post("/api/databases/upload/", {"name": "junk", "file": SimpleUploadedFile("j.sqlite", b"junk")})
    assert bad.status_code == 400 and "not a SQLite database file" in bad.json()["file"][0]
    assert not Database.objects.filter(name="junk").exists()


def test_exemplars_written_reviewed_and_published_through_the_api(client, account, spider_database):
    spider_database("concert_singer")
    client.force_login(account("ann", ANNOTATOR, ASKER))
    exemplar = post(client, "/api/exemplars/", {"database": "concert_singer", "question": "How many singers?"})
    assert exemplar.status_code == 201, exemplar.content
    pk = exemplar.json()["id"]
    step = post(client, f"/api/exemplars/{pk}/steps/", {"thought": "Count.",
                                                         "action": 'ExecuteSQL("SELECT count(*) FROM singer")'})
    assert step.status_code == 201 and "6" in step.json()["observation"]
    assert post(client, f"/api/exemplars/{pk}/steps/", {"action": "Done"}).status_code == 201
    assert post(client, f"/api/exemplars/{pk}/submit/", {}).json()["state"] == "in_review"
    assert post(client, f"/api/exemplars/{pk}/review/", {"approve": True}).status_code == 403
    bad = post(client, f"/api/exemplars/{pk}/steps/", {"action": "ExecuteSQL("})
    assert bad.status_code == 400 and "action" in bad.json()

    client.force_login(account("cleo", CURATOR))
    assert post(client, f"/api/exemplars/{pk}/review/", {"approve": True}).json()["state"] == "approved"
    created = post(client, "/api/exemplar-sets/", {"name": "mine"})
    assert created.status_code == 201
    version = post(client, f"/api/exemplar-sets/{created.json()['id']}/publish/", {"exemplars": [pk]})
    assert version.status_code == 201 and version.json()["number"] == 1
    assert client.get(f"/api/exemplar-set-versions/{version.json()['id']}/").json()["exemplars"][0]["question"] \
        == "How many singers?"
    assert post(client, f"/api/exemplar-sets/{created.json()['id']}/publish/",
                {"exemplars": [10**9]}).json() == {"exemplars": [f"No exemplar with id {10**9}."]}
    exported = client.get(f"/exemplars/sets/{created.json()['id']}/v1/export/").content
    uploaded = client.post("/api/exemplar-sets/upload/", {"file": SimpleUploadedFile("copy.json", exported),
                                                          "name": "copy"})
    assert uploaded.status_code == 201 and ExemplarSet.objects.filter(name="copy").exists()
    junk = client.post("/api/exemplar-sets/upload/", {"file": SimpleUploadedFile("x.json", b"{}")})
    assert junk.status_code == 400 and "file" in junk.json()


def test_a_run_is_launched_on_a_seeded_random_sample(client, account, dataset, replay_llm):
    from annotations.runs.sampling import sample_questions

    replay_llm(["Thought: x\nAction: Done"])
    client.force_login(account("otto", OPERATOR))
    created = post(client, "/api/runs/", {"dataset": "tiny", "name": "r", "limit": 2, "sample": "random", "seed": 3})
    assert created.status_code == 201, created.content
    run = Run.objects.get(pk=created.json()["id"])
    expected = [q.index for q in sample_questions(dataset.questions.all(), limit=2, mode="random", seed=3)]
    assert sorted(run.items.values_list("question__index", flat=True)) == expected
    assert created.json()["config"]["sample"] == {"db_ids": [], "limit": 2, "mode": "random", "seed": 3}


def _imported_run(dataset):
    run = services.run_import_predictions(dataset=dataset, text="SELECT count(*) FROM singer\nSELECT 1\nSELECT 1\n",
                                          fmt="spider", name="one")
    return services.run_evaluate(run=run)


def test_a_curator_creates_a_blind_queue_with_assignees_and_bad_input_gets_field_errors(client, account, dataset):
    run = _imported_run(dataset)
    version = default_taxonomy_version()
    ann1, ann2 = account("ann1", ANNOTATOR), account("ann2", ANNOTATOR)
    client.force_login(account("cora", CURATOR))
    created = post(client, "/api/queues/", {"name": "double", "run": run.pk, "taxonomy_version": version.pk,
                                            "max_annotators": 2, "assignees": ["ann1", "ann2"]})
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["blind"] is True and body["max_annotators"] == 2 and sorted(body["assignees"]) == ["ann1", "ann2"]
    queue = Queue.objects.get(pk=body["id"])
    assert queue.created_by.username == "cora" and set(queue.assignees.all()) == {ann1, ann2}

    bad = post(client, "/api/queues/", {"name": "", "run": 999999, "taxonomy_version": "x", "max_annotators": 0,
                                        "assignees": ["nobody"]})
    assert bad.status_code == 400
    assert set(bad.json()) == {"name", "run", "taxonomy_version", "max_annotators", "assignees"}
    assert all(isinstance(m, str) and "Traceback" not in m for msgs in bad.json().values() for m in msgs)
    assert Queue.objects.count() == 1

    # The queue is blind: ann2 does not see ann1's label before labelling the question, through the API too.
    item = run.items.filter(ex=False).first()
    category = version.categories.order_by("position").first()
    Label.objects.create(item=item, category=category, taxonomy_version=version, annotator=ann1)
    client.force_login(ann2)
    assert client.get("/api/labels/", {"run": run.pk}).json()["results"] == []
    # An annotator may not create queues.
    denied = post(client, "/api/queues/", {"name": "mine", "run": run.pk, "taxonomy_version": version.pk})
    assert denied.status_code == 403 and Queue.objects.count() == 1


def test_a_queue_is_assigned_only_to_people_who_can_label_its_run(client, account, dataset):
    run = _imported_run(dataset)
    version = default_taxonomy_version()
    account("ann1", ANNOTATOR)
    account("vera", VIEWER)  # may read, not label
    gone = account("gone", ANNOTATOR)
    gone.is_active = False
    gone.save()
    client.force_login(account("cora", CURATOR))
    refused = post(client, "/api/queues/", {"name": "q", "run": run.pk, "taxonomy_version": version.pk,
                                            "assignees": ["ann1", "vera", "gone"]})
    assert refused.status_code == 400, refused.content
    [message] = refused.json()["assignees"]
    assert message.startswith("gone, vera cannot label this run's questions") and "ann1" not in message
    assert Queue.objects.count() == 0
    assert post(client, "/api/queues/", {"name": "q", "run": run.pk, "taxonomy_version": version.pk,
                                         "assignees": ["ann1"]}).status_code == 201


def test_a_curator_sets_and_unsets_final_labels_and_annotators_may_not(client, account, dataset):
    run = _imported_run(dataset)
    version = default_taxonomy_version()
    first, second = version.categories.order_by("position")[:2]
    item = run.items.filter(ex=False).first()
    annotator = account("ann1", ANNOTATOR)
    Label.objects.create(item=item, category=first, taxonomy_version=version, annotator=annotator)
    client.force_login(account("cora", CURATOR))
    url = "/api/labels/final/"
    answer = post(client, url, {"item": item.pk, "category": second.pk})
    assert answer.status_code == 200, answer.content
    assert answer.json()["final"] is True
    assert [(f["category_key"], f["is_final"]) for f in answer.json()["final_labels"]] == [(second.key, True)]
    # Setting again changes nothing (not a toggle); the annotator's own label stays beside the decision.
    assert len(post(client, url, {"item": item.pk, "category": second.pk}).json()["final_labels"]) == 1
    assert Label.objects.filter(item=item, is_final=False).count() == 1
    unset = post(client, url, {"item": item.pk, "category": second.pk, "final": False})
    assert unset.status_code == 200 and unset.json()["final_labels"] == []
    assert post(client, url, {"item": item.pk, "category": second.pk, "final": False}).json()["final_labels"] == []
    assert not Label.objects.filter(is_final=True).exists()

    bad = post(client, url, {"item": 999999, "category": "x", "final": "maybe"})
    assert bad.status_code == 400 and set(bad.json()) == {"item", "category", "final"}

    client.force_login(annotator)
    assert post(client, url, {"item": item.pk, "category": second.pk}).status_code == 403
    assert not Label.objects.filter(is_final=True).exists()


def test_an_operator_uploads_a_short_predictions_file_and_chooses_how_missing_ones_count(client, account, dataset):
    client.force_login(account("otto", OPERATOR))
    url = "/api/datasets/tiny/predictions/"
    short = client.post(url, {"name": "short", "format": "spider",
                              "file": SimpleUploadedFile("pred.txt", b"SELECT count(*) FROM singer\n")})
    assert short.status_code == 201, short.content
    body = short.json()
    assert body["predictions"]["text"] == "1 predictions for 3 questions: 2 missing"
    assert body["awaits_missing_choice"] is True and body["missing_predictions"] == ""
    assert body["source_file"] == "pred.txt"
    chosen = post(client, f"/api/runs/{body['id']}/missing/", {"choice": "subset"})
    assert chosen.status_code == 200, chosen.content
    assert chosen.json()["missing_predictions"] == "subset" and chosen.json()["awaits_missing_choice"] is False
    assert chosen.json()["predictions"]["choice"] == "subset"
    assert Run.objects.get(pk=body["id"]).items.count() == 1
    again = post(client, f"/api/runs/{body['id']}/missing/", {"choice": "wrong"})
    assert again.status_code == 400 and again.json() == {
        "choice": ["This run has no missing predictions awaiting a choice."]}

    # The choice can come with the upload; malformed lines are reported, not fatal.
    wrong = client.post(url, {"name": "wrong", "format": "bird", "missing": "wrong",
                              "file": SimpleUploadedFile("pred.json", b'{"0": "SELECT 1\\t----- bird -----\\t'
                                                                      b'concert_singer"}')})
    assert wrong.status_code == 201, wrong.content
    run = Run.objects.get(pk=wrong.json()["id"])
    assert run.missing_predictions == "wrong" and run.items.count() == 3
    assert wrong.json()["predictions"]["choice_label"] == "scored as wrong"

    bad = client.post(url, {"name": "", "format": "csv", "missing": "maybe"})
    assert bad.status_code == 400 and set(bad.json()) == {"name", "format", "missing", "file"}
    not_text = client.post(url, {"name": "x", "format": "spider", "file": SimpleUploadedFile("p.txt", b"\xff\xfe\x00")})
    assert not_text.status_code == 400 and not_text.json() == {"file": ["The file is not UTF-8 text."]}
    not_bird = client.post(url, {"name": "x", "format": "bird", "file": SimpleUploadedFile("p.json", b"[1,")})
    assert not_bird.status_code == 400, not_bird.content
    assert "No prediction in the file matches a question of tiny (line 1: expected a JSON object)" in \
        not_bird.json()["file"][0]
    assert post(client, f"/api/runs/{run.pk}/missing/", {"choice": 3}).json().keys() == {"choice"}
    assert Run.objects.count() == 2

    client.force_login(account("ann", ANNOTATOR))
    denied = client.post(url, {"name": "x", "format": "spider", "file": SimpleUploadedFile("p.txt", b"SELECT 1\n")})
    assert denied.status_code == 403 and Run.objects.count() == 2


def send(client, method: str, url: str, data=None):
    return client.generic(method, url, data=json.dumps(data or {}), content_type="application/json")


def test_exemplar_steps_are_edited_run_moved_and_deleted_through_the_api_as_in_the_page(client, account,
                                                                                          spider_database):
    """The same services as the page: only the author or a Curator edits, a changed action clears the step's
    observation and makes the later ones stale, and an edit of an approved exemplar makes it a draft again (a
    published set version keeps what it published)."""
    from annotations.models import ExemplarSetVersion

    spider_database("concert_singer")
    ann = account("ann", ANNOTATOR, ASKER)
    client.force_login(ann)
    pk = post(client, "/api/exemplars/", {"database": "concert_singer", "question": "How many singers?"}).json()["id"]
    steps = [post(client, f"/api/exemplars/{pk}/steps/", {"thought": t, "action": a}).json() for t, a in [
        ("Look.", 'ExecuteSQL("SELECT name FROM singer")'), ("Count.", 'ExecuteSQL("SELECT count(*) FROM singer")'),
        ("", "Done")]]
    first, second, done = (s["id"] for s in steps)
    assert post(client, f"/api/exemplars/{pk}/submit/", {}).json()["state"] == "in_review"
    client.force_login(account("cleo", CURATOR))
    assert post(client, f"/api/exemplars/{pk}/review/", {"approve": True}).json()["state"] == "approved"
    published = post(client, f"/api/exemplar-sets/{post(client, '/api/exemplar-sets/', {'name': 's'}).json()['id']}"
                             "/publish/", {"exemplars": [pk]}).json()

    client.force_login(account("eve", ANNOTATOR))  # another annotator: not hers to edit
    assert send(client, "PATCH", f"/api/exemplars/{pk}/steps/{first}/", {"thought": "Mine now."}).status_code == 403
    assert send(client, "DELETE", f"/api/exemplars/{pk}/steps/{first}/").status_code == 403
    client.force_login(account("vic", VIEWER))
    assert send(client, "PATCH", f"/api/exemplars/{pk}/", {"question": "?"}).status_code == 403

    client.force_login(ann)
    edited = send(client, "PATCH", f"/api/exemplars/{pk}/steps/{first}/",
                  {"action": 'ExecuteSQL("SELECT name FROM singer WHERE age > 30")'})
    assert edited.status_code == 200 and edited.json()["observation"] is None and edited.json()["thought"] == "Look."
    detail = client.get(f"/api/exemplars/{pk}/").json()
    assert detail["state"] == "draft"  # an approved exemplar edited: reviewed again
    assert [s["stale"] for s in detail["steps"]] == [False, True, False]
    ran = post(client, f"/api/exemplars/{pk}/steps/{first}/run/", {})
    assert ran.status_code == 200 and ran.json()["ok"] is True and ran.json()["observation"]
    assert send(client, "PATCH", f"/api/exemplars/{pk}/steps/{second}/", {"action": "ExecuteSQL("}).status_code == 400
    assert len(post(client, f"/api/exemplars/{pk}/steps/rerun/", {}).json()["steps"]) == 3
    assert not any(s["stale"] for s in client.get(f"/api/exemplars/{pk}/").json()["steps"])

    moved = post(client, f"/api/exemplars/{pk}/steps/{second}/move/", {"offset": -1}).json()
    assert [s["id"] for s in moved["steps"]] == [second, first, done]
    assert post(client, f"/api/exemplars/{pk}/steps/{first}/move/", {"offset": 1}).status_code == 400  # Done last
    assert send(client, "DELETE", f"/api/exemplars/{pk}/steps/{first}/").status_code == 204
    after = client.get(f"/api/exemplars/{pk}/").json()
    assert [(s["id"], s["position"]) for s in after["steps"]] == [(second, 0), (done, 1)]
    assert send(client, "PATCH", f"/api/exemplars/{pk}/steps/{10**9}/", {"thought": "x"}).status_code == 404
    renamed = send(client, "PATCH", f"/api/exemplars/{pk}/", {"question": "How many singers are there?",
                                                              "tags": ["count"]})
    assert renamed.status_code == 200 and renamed.json()["tags"] == ["count"]
    assert renamed.json()["evidence"] == "" and renamed.json()["final_sql"] == "SELECT count(*) FROM singer"
    frozen = ExemplarSetVersion.objects.get(pk=published["id"]).exemplars[0]
    assert frozen["question"] == "How many singers?" and len(frozen["steps"]) == 3
