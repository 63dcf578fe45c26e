"""Comparing two exemplar versions over repeated trials: spread of EX, flips, and a verdict in plain words.

Pure Python (no Django): the experiment page, its API and the ``experiment`` command all call ``compare``.

A difference in EX is called a gain (or a regression) only when both hold:
- the questions that changed agree on its direction beyond chance: an exact two-sided sign test over the
  questions the candidate got right more often than the baseline (gained) and less often (lost), at 5 %;
- with several trials, the trials' EX ranges do not overlap (the run-to-run noise of a sampling LLM is smaller
  than the difference).
Otherwise the verdict says "no clear difference" and why, so one question in twenty is not sold as a gain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

SIGNIFICANCE = 0.05


@dataclass(frozen=True)
class Spread:
    """EX (percent) of each trial of one arm, and their min, max and mean."""

    values: tuple[float, ...]

    @property
    def trials(self) -> int:
        return len(self.values)

    @property
    def min(self) -> float | None:
        return min(self.values) if self.values else None

    @property
    def max(self) -> float | None:
        return max(self.values) if self.values else None

    @property
    def mean(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None

    def overlaps(self, other: Spread) -> bool:
        if not self.values or not other.values:
            return True
        return self.min <= other.max and other.min <= self.max

    def to_dict(self) -> dict:
        return {"values": list(self.values), "min": self.min, "max": self.max, "mean": self.mean}


@dataclass(frozen=True)
class QuestionOutcome:
    """How often each arm got one question right over its trials (``None``: not scored in some trial)."""

    candidate_right: int | None
    baseline_right: int | None
    trials: int

    @property
    def kind(self) -> str:
        """``gained`` / ``lost`` (right more / less often with the candidate), ``both_right``, ``both_wrong``,
        ``same`` (right equally often, sometimes), or ``unscored``."""
        c, b = self.candidate_right, self.baseline_right
        if c is None or b is None:
            return "unscored"
        if c > b:
            return "gained"
        if c < b:
            return "lost"
        if c == self.trials:
            return "both_right"
        return "both_wrong" if c == 0 else "same"

    @property
    def consistent(self) -> bool:
        """A flip in every trial: right in all of one arm's trials and in none of the other's."""
        return {self.candidate_right, self.baseline_right} == {0, self.trials}


@dataclass(frozen=True)
class Verdict:
    kind: str  # "better", "worse", "no_clear_difference", "no_difference", "incomplete"
    text: str
    delta: float | None  # candidate mean EX - baseline mean EX, in points
    p_value: float | None
    gained: int
    lost: int

    @property
    def regressed(self) -> bool:
        """The candidate's mean EX is lower: publishing it asks for confirmation."""
        return self.delta is not None and self.delta < 0

    def to_dict(self) -> dict:
        return {"kind": self.kind, "text": self.text, "delta": self.delta, "p_value": self.p_value,
                "gained": self.gained, "lost": self.lost, "regressed": self.regressed}


def sign_test(gained: int, lost: int) -> float:
    """Exact two-sided sign test: the chance of a split at least as one-sided as ``gained``/``lost`` when each
    changed question is equally likely to go either way."""
    n = gained + lost
    if n == 0:
        return 1.0
    k = min(gained, lost)
    tail = sum(comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def _points(value: float) -> str:
    return f"{value:+.1f} points"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} %"


def _range(spread: Spread) -> str:
    if spread.trials == 1:
        return _pct(spread.mean)
    if spread.min == spread.max:
        return f"{_pct(spread.mean)} in every trial"
    return f"{_pct(spread.mean)} (trials {spread.min:.1f}-{spread.max:.1f} %)"


def _probability(p: float) -> str:
    return f"{p:.2f}" if p >= 0.01 else "below 0.01"


def verdict(*, candidate: Spread, baseline: Spread, outcomes: Sequence[QuestionOutcome]) -> Verdict:
    """The plain-words verdict of an experiment (see the module's docstring for the rule)."""
    kinds = [o.kind for o in outcomes]
    gained, lost = kinds.count("gained"), kinds.count("lost")
    scored = len(kinds) - kinds.count("unscored")
    if candidate.mean is None or baseline.mean is None:
        return Verdict("incomplete", "Not every run is scored yet.", None, None, gained, lost)
    delta = round(candidate.mean - baseline.mean, 2)
    p = sign_test(gained, lost)
    trials = min(candidate.trials, baseline.trials)
    figures = (f"EX {_range(candidate)} with the candidate against {_range(baseline)} with the baseline"
               + (f", mean of {trials} trials each" if trials > 1 else ""))
    changes = (f"{gained} question{'s' if gained != 1 else ''} gained and {lost} lost of {scored} scored")
    if gained == lost == 0 and delta == 0:
        return Verdict("no_difference", f"No difference: {figures}; no question changed.", delta, p, gained, lost)
    chance = (f"a split at least this one-sided happens by chance with probability {_probability(p)} "
              f"(sign test over the changed questions)")
    overlap = trials > 1 and candidate.overlaps(baseline)
    if p < SIGNIFICANCE and not overlap and delta != 0:
        word, kind = ("Better", "better") if delta > 0 else ("Worse", "worse")
        return Verdict(kind, f"{word}: {_points(delta)}, {figures}; {changes}; {chance}.", delta, p, gained, lost)
    reasons = []
    if p >= SIGNIFICANCE:
        reasons.append(chance)
    if overlap:
        reasons.append(f"the trials' EX ranges overlap (candidate {candidate.min:.1f}-{candidate.max:.1f} %, "
                       f"baseline {baseline.min:.1f}-{baseline.max:.1f} %), so run-to-run noise is as large")
    if trials == 1:
        reasons.append("with one trial each the run-to-run noise is unknown (run 3 or more trials to see it)")
    text = f"No clear difference: {_points(delta)} ({figures}) rests on {changes}; " + "; ".join(reasons) + "."
    if delta:
        text += " Do not count it as a " + ("gain" if delta > 0 else "loss") + " yet."
    return Verdict("no_clear_difference", text, delta, p, gained, lost)


@dataclass(frozen=True)
class Comparison:
    candidate: Spread
    baseline: Spread
    outcomes: tuple[QuestionOutcome, ...]
    verdict: Verdict


def compare(*, candidate_ex: Sequence[float | None], baseline_ex: Sequence[float | None],
            outcomes: Sequence[QuestionOutcome]) -> Comparison:
    """Spreads of both arms (trials not scored yet left out) and the verdict over the question outcomes."""
    c = Spread(tuple(v for v in candidate_ex if v is not None))
    b = Spread(tuple(v for v in baseline_ex if v is not None))
    complete = len(c.values) == len(candidate_ex) and len(b.values) == len(baseline_ex)
    v = verdict(candidate=c, baseline=b, outcomes=outcomes) if complete else \
        Verdict("incomplete", "Not every run is scored yet.", None, None, 0, 0)
    return Comparison(c, b, tuple(outcomes), v)
