"""What passes between the loaders, the evaluator and its callers (plain, frozen, no Django)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class Status(StrEnum):
    OK = "ok"  # both queries ran; ``ex`` says whether they agree
    PRED_ERROR = "pred_error"  # prediction missing, malformed, refused, failed or too large
    PRED_TIMEOUT = "pred_timeout"
    GOLD_ERROR = "gold_error"  # a benchmark defect: excluded from the figures
    NOT_EXECUTABLE = "not_executable"  # no database file (Spider's wta_1): excluded


# The statuses that count in EX (the denominator); the others are benchmark defects, excluded.
SCORED_STATUSES = frozenset({Status.OK, Status.PRED_ERROR, Status.PRED_TIMEOUT})
STATUS_LABELS = {
    Status.OK: "both queries ran",
    Status.PRED_ERROR: "prediction failed",
    Status.PRED_TIMEOUT: "prediction timed out",
    Status.GOLD_ERROR: "gold query failed",
    Status.NOT_EXECUTABLE: "no database",
}


@dataclass(frozen=True)
class ParseIssue:
    """A line of an input file that could not be used as given (1-based line number)."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class GoldItem:
    index: int
    db_id: str
    sql: str
    question: str = ""
    evidence: str = ""  # BIRD's external knowledge
    difficulty: str | None = None  # BIRD's simple/moderate/challenging


@dataclass(frozen=True)
class Prediction:
    index: int
    sql: str | None  # None: the line/entry was malformed (see the issues)
    db_id: str | None = None
    line: int = 0


@dataclass(frozen=True)
class PredictionSet:
    predictions: tuple[Prediction, ...]
    issues: tuple[ParseIssue, ...] = ()
    ignored: int = 0  # predictions read but left out by the parser's ``keep`` (past the questions)

    def by_index(self) -> dict[int, Prediction]:
        return {p.index: p for p in self.predictions}


@dataclass(frozen=True)
class EvalItem:
    """One question to score: the gold query and the prediction (None when there is none)."""

    index: int
    db_id: str
    gold_sql: str
    pred_sql: str | None
    difficulty: str | None = None  # BIRD difficulty; Spider hardness is computed
    pred_note: str = ""  # why pred_sql is None (parse issue), shown as the error


@dataclass(frozen=True)
class QuestionResult:
    index: int
    db_id: str
    status: Status
    ex: bool | None  # None when not scored (gold_error, not_executable)
    soft_f1: float | None = None
    ves_reward: float | None = None  # only when VES timing was asked for
    error: str = ""
    gold_rows: int | None = None
    pred_rows: int | None = None
    table_count: int | None = None  # tables involved in the gold query (paper, Table 9)
    join_count: int | None = None  # JOIN clauses and comma joins in the gold query
    hardness: str | None = None  # Spider easy/medium/hard/extra
    difficulty: str | None = None  # BIRD simple/moderate/challenging
    gold_ms: float | None = None
    pred_ms: float | None = None

    @property
    def scored(self) -> bool:
        return self.status in SCORED_STATUSES


@dataclass(frozen=True)
class Aggregate:
    """Figures over a group of questions; rates are over ``scored`` questions only."""

    questions: int  # every question in the group
    scored: int  # the denominator: questions whose gold ran on an existing database
    correct: int
    ex: float | None  # percent, None when nothing was scored
    soft_f1: float | None  # percent
    ves: float | None  # percent-like R-VES, None unless timed
    status_counts: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class EvalReport:
    mode: str
    per_question: tuple[QuestionResult, ...]
    totals: Aggregate
    by_difficulty: Mapping[str, Aggregate]  # Spider hardness or BIRD difficulty
    by_tables: Mapping[str, Aggregate]  # "1", "2", "3", "4+" tables in the gold query
    elapsed_s: float = 0.0

    def summary(self) -> str:
        t = self.totals
        ex = "n/a" if t.ex is None else f"{t.ex:.2f}%"
        return (f"{self.mode} EX {ex} ({t.correct}/{t.scored} scored questions; "
                f"{t.questions - t.scored} of {t.questions} not scored)")
