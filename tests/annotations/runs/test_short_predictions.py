"""A prediction file shorter than its dataset is reported before scoring; the missing questions count as the
user chooses (wrong, or left out), and the choice is stored on the run and shown."""

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse

from agent.roles import OPERATOR
from annotations.runs import selectors, services
from annotations.runs.models import Run
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db


def gold_lines(dataset, count: int, broken: tuple[int, ...] = ()) -> str:
    lines = []
    for q in dataset.questions.order_by("index")[:count]:
        lines.append("SELECT 1\tshop\textra" if q.index in broken else q.gold_sql)
    return "\n".join(lines) + "\n"


def test_a_short_file_waits_for_a_choice_and_says_how_many_are_missing(built_dataset):
    dataset = built_dataset(10)
    run = services.run_import_predictions(dataset=dataset, text=gold_lines(dataset, 4, broken=(1,)),
                                          fmt="spider", name="short", evaluate_later=True)
    assert services.run_awaits_missing_choice(run) and run.status == Run.Status.PENDING
    counts = selectors.prediction_counts(run=run)
    assert counts["text"] == "4 predictions for 10 questions: 6 missing (1 of the 4 malformed)"
    assert run.import_issues[0]["line"] == 2  # the malformed line is listed with its number
    with pytest.raises(ValidationError, match="Choose first"):
        services.run_evaluate_queue(run=run)


def test_missing_scored_as_wrong_keeps_every_question_in_the_denominator(built_dataset):
    dataset = built_dataset(10)
    run = services.run_import_predictions(dataset=dataset, text=gold_lines(dataset, 4), fmt="spider",
                                          name="short", missing="wrong")
    run = services.run_evaluate(run=run)
    assert run.missing_predictions == "wrong"
    assert (run.totals["correct"], run.totals["scored"], run.totals["ex"]) == (4, 10, 40.0)


def test_subset_scores_only_the_predicted_questions_and_malformed_lines_still_count(built_dataset):
    dataset = built_dataset(10)
    run = services.run_import_predictions(dataset=dataset, text=gold_lines(dataset, 4, broken=(1,)),
                                          fmt="spider", name="short")
    run = services.run_choose_missing(run=run, choice="subset", evaluate_later=False)
    run = services.run_evaluate(run=run)
    assert run.items.count() == 4 and run.missing_predictions == "subset"
    assert (run.totals["correct"], run.totals["scored"], run.totals["ex"]) == (3, 4, 75.0)
    with pytest.raises(ValidationError):  # the choice is made once
        services.run_choose_missing(run=run, choice="wrong")


def test_a_complete_file_needs_no_choice(built_dataset):
    dataset = built_dataset(5)
    run = services.run_import_predictions(dataset=dataset, text=gold_lines(dataset, 5), fmt="spider", name="full")
    assert not services.run_awaits_missing_choice(run) and run.missing_predictions == ""
    assert selectors.prediction_counts(run=run)["text"] == "5 predictions for 5 questions"


def test_evaluate_refuses_a_short_file_without_missing_and_scores_with_it(built_dataset, tmp_path, capsys):
    dataset = built_dataset(10)
    path = tmp_path / "pred.txt"
    path.write_text(gold_lines(dataset, 4, broken=(2,)))
    with pytest.raises(CommandError, match=r"4 predictions for 10 questions: 6 missing .*--missing wrong"):
        call_command("evaluate", "--dataset", dataset.name, "--predictions", str(path))
    assert "pred.txt: line 3: expected 'SQL<TAB>db_id'" in capsys.readouterr().err
    assert not Run.objects.exists()
    call_command("evaluate", "--dataset", dataset.name, "--predictions", str(path), "--missing", "subset")
    out = capsys.readouterr().out
    assert "missing predictions left out: only the given subset is scored" in out
    assert "EX 75.00% (3 correct of 4 scored questions)" in out
    call_command("evaluate", "--dataset", dataset.name, "--predictions", str(path), "--missing", "wrong",
                 "--save", "kept")
    assert "EX 30.00% (3 correct of 10 scored questions)" in capsys.readouterr().out
    assert Run.objects.get(name="kept").missing_predictions == "wrong"


def test_upload_page_warns_and_an_operator_chooses(client, user, built_dataset, django_capture_on_commit_callbacks):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from t2s_site.celery import app

    dataset = built_dataset(10)
    give_roles(user, OPERATOR)
    client.force_login(user)
    upload = SimpleUploadedFile("pred.txt", gold_lines(dataset, 4).encode())
    response = client.post(dataset.get_absolute_url(), {"name": "short", "format": "spider", "file": upload},
                           follow=True)
    page = response.content.decode()
    run = Run.objects.get(name="short")
    assert "4 predictions for 10 questions: 6 missing" in page and "Nothing is scored until" in page
    assert run.status == Run.Status.PENDING
    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            client.post(reverse("runs:run_missing", args=[run.pk]), {"choice": "wrong"})
    finally:
        app.conf.task_always_eager = False
    run.refresh_from_db()
    assert run.status == Run.Status.DONE and run.totals["ex"] == 40.0
    page = client.get(run.get_absolute_url()).content.decode()
    assert "missing predictions\n  <strong id=\"missing-choice\">scored as wrong</strong>" in page


def test_only_those_who_may_upload_predictions_choose(client, user, built_dataset):
    dataset = built_dataset(10)
    run = services.run_import_predictions(dataset=dataset, text=gold_lines(dataset, 4), fmt="spider", name="short")
    client.force_login(user)  # Viewer and Asker
    assert client.post(reverse("runs:run_missing", args=[run.pk]), {"choice": "wrong"}).status_code == 403
    run.refresh_from_db()
    assert run.missing_predictions == "" and "Choosing needs the Operator role" in client.get(
        run.get_absolute_url()).content.decode()

