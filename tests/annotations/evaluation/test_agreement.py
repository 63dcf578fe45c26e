"""Agreement figures on small examples computed by hand."""

import pytest

from annotations.labels.agreement import category_agreement, cohen_kappa, fleiss_kappa


def test_cohen_kappa_on_a_hand_computed_table():
    # 10 items; both yes 4, both no 3, a-yes/b-no 2, a-no/b-yes 1.
    # po = 0.7; pa(yes)=0.6, pb(yes)=0.5 -> pe = 0.6*0.5 + 0.4*0.5 = 0.5; kappa = (0.7-0.5)/0.5 = 0.4
    a = [1, 1, 1, 1, 0, 0, 0, 1, 1, 0]
    b = [1, 1, 1, 1, 0, 0, 0, 0, 0, 1]
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    assert cohen_kappa([1, 1], [1, 1]) is None  # no variation: undefined, not 1


def test_fleiss_kappa_on_the_wikipedia_example():
    # Fleiss (1971) worked example as on Wikipedia: 10 items, 14 raters, 5 categories -> kappa 0.210
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert fleiss_kappa(table) == pytest.approx(0.2099, abs=1e-4)


def test_fleiss_kappa_small_binary_case_by_hand():
    # 4 items, 3 raters: yes counts 3,0,2,1. P_i = 1,1,1/3,1/3 -> P̄ = 2/3; p_yes = 6/12 -> Pe = 0.5; k = 1/3
    assert fleiss_kappa([[3, 0], [0, 3], [2, 1], [1, 2]]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        fleiss_kappa([[2, 0], [1, 2]])


def test_category_agreement_uses_cohen_for_two_and_fleiss_for_three():
    labels = {
        1: {"a": {"format"}, "b": {"format"}, "c": {"format"}},
        2: {"a": {"distinct"}, "b": {"format"}, "c": {"distinct"}},
        3: {"a": set(), "b": set(), "c": {"format"}},
        4: {"a": {"format"}},  # not labelled by everyone: left out
    }
    two = category_agreement(labels, ["format", "distinct"], ["a", "b"])
    # format: a = [1,0,0], b = [1,1,0]: po = 2/3, pe = (1*2 + 2*1)/9 = 4/9 -> kappa = (6/9-4/9)/(5/9) = 0.4
    assert two["format"]["method"] == "Cohen" and two["format"]["items"] == 3
    assert two["format"]["kappa"] == pytest.approx(0.4)
    three = category_agreement(labels, ["format"], ["a", "b", "c"])
    # yes counts 3,1,1 of 3: P_i = 1, 1/3, 1/3 -> P̄ = 5/9; p_yes = 5/9 -> Pe = 25/81 + 16/81 = 41/81
    assert three["format"]["method"] == "Fleiss"
    assert three["format"]["kappa"] == pytest.approx((5 / 9 - 41 / 81) / (1 - 41 / 81))
