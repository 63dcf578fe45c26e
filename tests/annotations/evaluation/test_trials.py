"""The verdict of an experiment: spread over trials, the sign test, and no one-in-twenty gain sold as one."""

import pytest

from annotations.evaluation.trials import QuestionOutcome, Spread, compare, sign_test

Q = QuestionOutcome


@pytest.mark.parametrize(("gained", "lost", "p"), [
    (0, 0, 1.0), (1, 0, 1.0), (2, 0, 0.5), (6, 0, 0.03125), (5, 1, 0.21875), (15, 5, 0.04138946533203125),
    (3, 3, 1.0)])
def test_the_sign_test_is_the_exact_two_sided_binomial_tail(gained, lost, p):
    assert sign_test(gained, lost) == pytest.approx(p)
    assert sign_test(lost, gained) == pytest.approx(p)


def test_one_question_in_twenty_is_no_gain():
    result = compare(candidate_ex=[55.0], baseline_ex=[50.0], outcomes=[Q(1, 0, 1)] + [Q(1, 1, 1)] * 19)
    verdict = result.verdict
    assert verdict.kind == "no_clear_difference" and verdict.delta == 5.0 and not verdict.regressed
    assert verdict.text.startswith("No clear difference: +5.0 points")
    assert "1 question gained and 0 lost of 20 scored" in verdict.text
    assert "probability 1.00" in verdict.text and "run 3 or more trials" in verdict.text
    assert verdict.text.endswith("Do not count it as a gain yet.")


def test_overlapping_trial_ranges_are_noise_even_when_the_questions_agree():
    outcomes = [Q(3, 0, 3)] * 7 + [Q(1, 1, 3)] * 13
    verdict = compare(candidate_ex=[60, 70, 65], baseline_ex=[55, 66, 50], outcomes=outcomes).verdict
    assert verdict.kind == "no_clear_difference" and verdict.p_value < 0.05
    assert "the trials' EX ranges overlap (candidate 60.0-70.0 %, baseline 50.0-66.0 %)" in verdict.text


def test_a_consistent_difference_beyond_chance_is_called_better_or_worse():
    better = compare(candidate_ex=[80.0, 80.0, 80.0], baseline_ex=[50.0, 50.0, 50.0],
                     outcomes=[Q(3, 0, 3)] * 6 + [Q(3, 3, 3)] * 14).verdict
    assert better.kind == "better" and better.text.startswith("Better: +30.0 points, EX 80.0 % in every trial")
    worse = compare(candidate_ex=[30.0], baseline_ex=[70.0], outcomes=[Q(0, 1, 1)] * 8 + [Q(1, 1, 1)] * 12).verdict
    assert worse.kind == "worse" and worse.regressed and "probability below 0.01" in worse.text


def test_no_change_at_all_and_unscored_trials():
    same = compare(candidate_ex=[50.0], baseline_ex=[50.0], outcomes=[Q(1, 1, 1), Q(0, 0, 1)]).verdict
    assert same.kind == "no_difference" and same.text.endswith("no question changed.")
    waiting = compare(candidate_ex=[50.0, None], baseline_ex=[40.0, 45.0], outcomes=[Q(None, 1, 2)]).verdict
    assert waiting.kind == "incomplete" and waiting.delta is None


def test_question_kinds_and_spread():
    assert [Q(2, 0, 2).kind, Q(0, 2, 2).kind, Q(2, 2, 2).kind, Q(0, 0, 2).kind, Q(1, 1, 2).kind,
            Q(None, 1, 2).kind] == ["gained", "lost", "both_right", "both_wrong", "same", "unscored"]
    assert Q(2, 0, 2).consistent and not Q(2, 1, 2).consistent
    spread = Spread((60.0, 70.0, 65.0))
    assert (spread.min, spread.max, spread.mean) == (60.0, 70.0, 65.0)
    assert spread.overlaps(Spread((69.0,))) and not spread.overlaps(Spread((71.0, 80.0)))
