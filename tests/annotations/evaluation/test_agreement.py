"""Agreement figures against published examples and small cases computed by hand."""

import pytest

from annotations.evaluation.agreement import (
    cohen_kappa,
    disagreeing_items,
    group_ratings,
    krippendorff_alpha_nominal,
    label_agreement,
)

MISSING = None


def units_from_table(table):
    """Coders as rows, units as columns (None: not rated) -> the values of each unit."""
    return [[row[u] for row in table if row[u] is not MISSING] for u in range(len(table[0]))]


def test_alpha_on_krippendorff_2011_nominal_example_with_missing_data():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers, 12 units,
    # values 1-5, missing data; nominal alpha = 0.743. Unit 12 has one value only and is not pairable.
    table = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, MISSING, MISSING, MISSING],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, MISSING, 3],
        [MISSING, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, MISSING],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, MISSING],
    ]
    alpha, pairable = krippendorff_alpha_nominal(units_from_table(table))
    assert pairable == 11
    assert alpha == pytest.approx(0.743, abs=5e-4)


def test_alpha_on_krippendorff_2011_binary_example_two_observers():
    # Same paper, section A: two observers, ten units, binary data; alpha = 0.095.
    table = [[0, 1, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]]
    alpha, pairable = krippendorff_alpha_nominal(units_from_table(table))
    assert pairable == 10
    assert alpha == pytest.approx(0.095, abs=5e-4)


def test_alpha_is_undefined_without_variation_and_perfect_with_agreement():
    assert krippendorff_alpha_nominal([[1, 1], [1, 1, 1]])[0] is None
    assert krippendorff_alpha_nominal([[1]])[0] is None
    assert krippendorff_alpha_nominal([[1, 1], [2, 2], [1, 1, 1]])[0] == pytest.approx(1.0)


def test_cohen_kappa_on_the_textbook_example():
    # 50 items: both yes 20, both no 15, A yes/B no 5, A no/B yes 10 -> po 0.7, pe 0.5, kappa 0.4.
    a = [1] * 20 + [0] * 15 + [1] * 5 + [0] * 10
    b = [1] * 20 + [0] * 15 + [0] * 5 + [1] * 10
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    assert cohen_kappa([1, 1], [1, 1]) is None  # no variation: undefined, not 1


def test_label_agreement_keeps_partial_overlap_and_counts_items_per_figure():
    ratings = {
        1: {"a": {"format"}, "b": {"format"}, "c": {"format"}},
        2: {"a": {"distinct"}, "b": {"format"}, "c": {"distinct"}},
        3: {"a": set(), "b": set(), "c": {"format"}},
        4: {"a": {"format"}, "c": {"format", "distinct"}},  # b did not rate it: kept for a-c and alpha
        5: {"b": {"format"}},  # one rating: not pairable, left out
    }
    result = label_agreement(ratings, ["format", "distinct"])
    assert result.items == 4 and result.ratings == 11 and result.annotators == 3
    pairs = {(p.first, p.second): p for p in result.pairs}
    assert pairs["a", "b"].items == 3 and pairs["a", "c"].items == 4 and pairs["b", "c"].items == 3
    assert pairs["a", "c"].agreed == 2  # items 1 and 2 have identical sets
    # a vs b, pooled decisions over items 1-3 x (format, distinct):
    # a = [1,0, 0,1, 0,0], b = [1,0, 1,0, 0,0]: po = 4/6; pa(1) = 2/6, pb(1) = 2/6 -> pe = 4/36 + 16/36 = 5/9
    assert pairs["a", "b"].kappa == pytest.approx((4 / 6 - 5 / 9) / (1 - 5 / 9))
    figures = {c.key: c for c in result.categories}
    assert figures["format"].items == 4 and figures["format"].positives == 7
    # format per item: [1,1,1], [0,1,0], [0,0,1], [1,1] -> computed with the same coincidence formula
    expected, _ = krippendorff_alpha_nominal([[1, 1, 1], [0, 1, 0], [0, 0, 1], [1, 1]])
    assert figures["format"].alpha == pytest.approx(expected)
    # the overall figure pools both categories' units
    pooled, _ = krippendorff_alpha_nominal([[1, 1, 1], [0, 1, 0], [0, 0, 1], [1, 1],
                                            [0, 0, 0], [1, 0, 1], [0, 0, 0], [0, 1]])
    assert result.alpha == pytest.approx(pooled)
    # choosing annotators drops the others' ratings (item 3 then has two ratings, item 5 still one)
    two = label_agreement(ratings, ["format", "distinct"], annotators=["a", "b"])
    assert two.items == 3 and [(p.first, p.second) for p in two.pairs] == [("a", "b")]


def test_disagreements_and_grouping():
    ratings = group_ratings([(1, "a", "x"), (1, "b", "x"), (2, "a", "x"), (2, "b", "y"), (2, "b", "x"),
                             (3, "a", None)])
    assert ratings[3] == {"a": set()}
    assert disagreeing_items(ratings) == [2]
