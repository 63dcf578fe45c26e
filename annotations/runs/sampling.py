"""Which questions of a dataset a run covers: all, the first N, or a random N drawn with a stored seed.

A random sample is drawn from the questions in index order with ``random.Random(seed)``, so the same
dataset, filters, size and seed always give the same questions (the seed is stored on the run).
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Sequence

SAMPLE_MODES = {
    "random": "a random sample of N questions (seeded, repeatable)",
    "first": "the first N questions (in the dataset's order)",
    "all": "every question",
}


def new_seed() -> int:
    return secrets.randbelow(1_000_000)


def sample_questions(queryset, *, db_ids: Sequence[str] = (), limit: int | None = None, mode: str = "first",
                     seed: int | None = None) -> list:
    """The questions of ``queryset`` (a dataset's questions) chosen by ``mode``, in index order.

    ``mode="random"`` needs ``limit`` and ``seed``; ``"first"`` with no limit, like ``"all"``, takes every one.
    """
    if mode not in SAMPLE_MODES:
        raise ValueError(f"Unknown sample {mode!r}; expected one of {', '.join(SAMPLE_MODES)}")
    qs = queryset.order_by("index")
    if db_ids:
        qs = qs.filter(db_id__in=db_ids)
    if mode == "all" or not limit:
        return list(qs)
    if mode == "first":
        return list(qs[:limit])
    if seed is None:
        raise ValueError("A random sample needs a seed")
    ids = list(qs.values_list("pk", flat=True))
    chosen = set(random.Random(seed).sample(ids, min(limit, len(ids))))
    return [q for q in qs.filter(pk__in=chosen)]
