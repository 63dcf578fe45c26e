"""Experiments end to end on the replay LLM: a scripted model answers a question right only when a given
exemplar is in its prompt, so the candidate must win on exactly the questions that exemplar helps."""

from __future__ import annotations

import pytest

from agent.models import AgentSession
from annotations.exemplars import selectors as exemplar_selectors
from annotations.experiments import selectors, services
from annotations.experiments.models import ExperimentRun
from annotations.models import ExemplarSetVersion
from tests.annotations.experiments.conftest import drive, helped_script

pytestmark = pytest.mark.django_db


def _suite(shop, curator, indexes=range(8)):
    suite = services.suite_create(name="all eight", dataset=shop, user=curator,
                                  sources=[{"kind": "picked", "questions": list(indexes)}])
    return suite.latest_version()


def test_the_candidate_wins_on_exactly_the_questions_its_new_exemplar_helps(shop, team, make_exemplar,
                                                                           annotator, curator, replay_llm):
    exemplar_set = team
    b = make_exemplar("MARK-B", author=annotator)  # a draft: candidates take drafts
    server = replay_llm(helped_script({1: "MARK-B", 4: "MARK-B", 6: "MARK-A"}, always_right={0, 2}))
    candidate = services.candidate_create(exemplar_set=exemplar_set, user=curator, exemplars=[b])
    experiment = services.experiment_create(candidate=candidate, suite_version=_suite(shop, curator), user=curator,
                                            trials=2, options={"max_rounds": 4})
    runs = {(er.arm, er.trial): er.run for er in experiment.runs.select_related("run")}
    assert sorted(runs) == [("baseline", 1), ("baseline", 2), ("candidate", 1), ("candidate", 2)]
    drive(runs.values())

    report = selectors.experiment_report(experiment=experiment, user=curator)
    assert report["state"] == "done"
    assert [q["question"].index for q in report["gained"]] == [1, 4]
    assert report["lost"] == []
    assert [q["consistent"] for q in report["gained"]] == [True, True]
    candidate_arm, baseline_arm = report["arms"]["candidate"], report["arms"]["baseline"]
    assert [(t["correct"], t["scored"]) for t in candidate_arm["trials"]] == [(5, 8), (5, 8)]
    assert [(t["correct"], t["scored"]) for t in baseline_arm["trials"]] == [(3, 8), (3, 8)]
    assert candidate_arm["spread"].mean == 62.5 and baseline_arm["spread"].mean == 37.5
    # two questions of eight are no evidence of a gain, however neat: the verdict says so
    verdict = report["verdict"]
    assert verdict.kind == "no_clear_difference" and verdict.gained == 2 and verdict.lost == 0
    assert "probability 0.50" in verdict.text and "Do not count it as a gain yet" in verdict.text
    # tokens, cost and rounds per question come from the sessions (the replay server counts words as tokens)
    assert candidate_arm["rounds"] == 2 and candidate_arm["tokens"] > baseline_arm["tokens"] > 0

    # Half the LLM calls (the candidate's 2 trials x 8 questions x 2 rounds) saw exemplar B, all saw A, and every
    # run sent the same strategy and options to the same endpoint.
    systems = [r.messages[0]["content"] for r in server.chat_requests()]
    assert len(systems) == 64 and sum("MARK-B" in s for s in systems) == 32
    assert all("MARK-A" in s for s in systems)
    # One sampling seed drawn for the experiment: both arms of a trial send the same seeds, each trial its own
    # (the session's seed plus the round), so trials can differ and the spread means something.
    seed = experiment.options["sampling_seed"]
    for (_arm, trial), run in runs.items():
        assert run.config["options"] == {"max_rounds": 4, "sampling_seed": seed + 1000 * (trial - 1)}
        assert run.strategy == "interactive_t2s"
    sent = sorted(r.params["seed"] for r in server.chat_requests())
    assert sent == sorted([seed, seed + 1] * 16 + [seed + 1000, seed + 1001] * 16)
    assert len({str(r.config["llm"]) for r in runs.values()}) == 1
    session = AgentSession.objects.get(run_items__run=runs[("candidate", 1)], question=shop.questions.get(
        index=1).question)
    assert session.config["exemplar_set_version"]["candidate"] == candidate.number
    assert session.config["exemplars_choice"] == "chosen"


def test_removing_a_published_exemplar_shows_the_questions_it_cost(shop, team, make_exemplar, annotator,
                                                                   curator, replay_llm):
    exemplar_set = team
    b = make_exemplar("MARK-B", author=annotator)
    replay_llm(helped_script({1: "MARK-B", 6: "MARK-A"}, always_right={0}))
    candidate = services.candidate_create(exemplar_set=exemplar_set, user=curator, exemplars=[b])
    services.candidate_remove(candidate=candidate, item=candidate.items.get(position=0), user=curator)
    experiment = services.experiment_create(candidate=candidate, suite_version=_suite(shop, curator), user=curator)
    drive(r.run for r in experiment.runs.select_related("run"))
    report = selectors.experiment_report(experiment=experiment, user=curator)
    assert [q["question"].index for q in report["gained"]] == [1]
    assert [q["question"].index for q in report["lost"]] == [6]
    assert report["verdict"].delta == 0 and report["verdict"].kind == "no_clear_difference"
    assert "with one trial each the run-to-run noise is unknown" in report["verdict"].text
    assert "6" in selectors.render_report(report).split("lost")[1]


def test_a_gain_on_most_of_the_suite_in_every_trial_is_called_better(shop, team, make_exemplar, annotator,
                                                                      curator, replay_llm):
    exemplar_set = team
    b = make_exemplar("MARK-B", author=annotator)
    replay_llm(helped_script({i: "MARK-B" for i in range(1, 8)}, always_right={0}))
    candidate = services.candidate_create(exemplar_set=exemplar_set, user=curator, exemplars=[b])
    experiment = services.experiment_create(candidate=candidate, suite_version=_suite(shop, curator), user=curator,
                                            trials=3)
    drive(r.run for r in experiment.runs.select_related("run"))
    report = selectors.experiment_report(experiment=experiment, user=curator)
    verdict = report["verdict"]
    assert (verdict.kind, verdict.gained, verdict.lost) == ("better", 7, 0)
    assert verdict.text.startswith("Better: +87.5 points") and "mean of 3 trials each" in verdict.text
    assert report["arms"]["candidate"]["spread"].to_dict() == {"values": [100.0] * 3, "min": 100.0, "max": 100.0,
                                                               "mean": 100.0}
    lines = selectors.render_report(report)
    assert "candidate team candidate 1: EX 100.00% (8/8), 100.00% (8/8), 100.00% (8/8)" in lines
    assert "7 gained" in lines and "0 lost" in lines


def test_a_candidate_is_never_offered_where_published_versions_are(shop, team, make_exemplar, annotator,
                                                                   curator):
    exemplar_set = team
    candidate = services.candidate_create(exemplar_set=exemplar_set, user=curator,
                                          exemplars=[make_exemplar("MARK-B", author=annotator)])
    services.candidate_freeze(candidate=candidate)
    from agent.services import few_shot

    assert ExemplarSetVersion.objects.count() == exemplar_set.versions.count() + 3  # the paper's three sets
    assert [label for _, label in few_shot.choices(curator) if "team" in label] == ["team v1 (1 exemplars)"]
    assert exemplar_selectors.version_from_spec("team").number == 1
    assert all(v.exemplar_set.name != "team" or v.number == 1 for v in exemplar_selectors.published_versions())


def test_an_experiment_refused_stores_nothing(shop, team, curator, annotator, make_exemplar, replay_llm):
    from django.core.exceptions import ValidationError

    from annotations.runs.models import Run

    exemplar_set = team
    replay_llm(helped_script({}))
    candidate = services.candidate_create(exemplar_set=exemplar_set, user=curator,
                                          exemplars=[make_exemplar("MARK-B", author=annotator)])
    suite_version = _suite(shop, curator)
    with pytest.raises(ValidationError):
        services.experiment_create(candidate=candidate, suite_version=suite_version, user=curator,
                                   options={"max_rounds": 10_000})
    with pytest.raises(ValidationError, match="Between 1 and 10"):
        services.experiment_create(candidate=candidate, suite_version=suite_version, user=curator, trials=11)
    unchanged = services.candidate_create(exemplar_set=exemplar_set, user=curator)
    with pytest.raises(ValidationError, match="sends exactly team v1"):
        services.experiment_create(candidate=unchanged, suite_version=suite_version, user=curator)
    assert Run.objects.count() == 0 and ExperimentRun.objects.count() == 0


def test_an_experiment_keeps_the_sampling_seed_it_is_given_and_refuses_one_out_of_range(
        shop, team, curator, annotator, make_exemplar, replay_llm):
    from django.core.exceptions import ValidationError

    from annotations.runs.models import Run

    replay_llm(helped_script({}))
    candidate = services.candidate_create(exemplar_set=team, user=curator,
                                          exemplars=[make_exemplar("MARK-B", author=annotator)])
    suite_version = _suite(shop, curator, indexes=range(2))
    for seed in (-1, 2**31, "7"):
        with pytest.raises(ValidationError, match="sampling_seed"):
            services.experiment_create(candidate=candidate, suite_version=suite_version, user=curator,
                                       options={"sampling_seed": seed})
    assert not Run.objects.exists()
    experiment = services.experiment_create(candidate=candidate, suite_version=suite_version, user=curator,
                                            trials=2, options={"sampling_seed": 2**31 - 1})
    assert experiment.options == {"sampling_seed": 2**31 - 1}
    seeds = {(er.arm, er.trial): er.run.config["options"]["sampling_seed"] for er in experiment.runs.all()}
    assert seeds == {("candidate", 1): 2**31 - 1, ("baseline", 1): 2**31 - 1,
                     ("candidate", 2): 999, ("baseline", 2): 999}  # wrapped into the range the endpoint takes
