"""Which questions of a dataset a run covers: all, the first N, a random N, or a random N per tables-joined
bucket (the paper's Table 10), the random ones drawn with a stored seed.

A random sample is drawn from the questions in index order with ``random.Random(seed)``, so the same
dataset, filters, size and seed always give the same questions (the seed is stored on the run). The
join-bucket sample draws, with one such generator, N questions from each of the buckets 2, 3 and 4+ tables
joined (counted as the paper's Table 9, ``DatasetQuestion.table_count``), in that order; a bucket with fewer
questions gives them all (the paper topped such buckets up from variant datasets, which are not at hand).
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Sequence

SAMPLE_MODES = {
    "random": "a random sample of N questions (seeded, repeatable)",
    "first": "the first N questions (in the dataset's order)",
    "all": "every question",
    "join-buckets": "N questions (50 as the paper) per tables-joined bucket 2, 3 and 4+ (Table 10; seeded)",
}
SEEDED_MODES = frozenset({"random", "join-buckets"})
JOIN_BUCKETS = ("2", "3", "4+")
TABLE10_PER_BUCKET = 50


def new_seed() -> int:
    return secrets.randbelow(1_000_000)


def sample_questions(queryset, *, db_ids: Sequence[str] = (), limit: int | None = None, mode: str = "first",
                     seed: int | None = None, executable_only: bool = False) -> list:
    """The questions of ``queryset`` (a dataset's questions) chosen by ``mode``, in index order.

    ``mode="random"`` needs ``limit`` and ``seed``; ``"first"`` with no limit, like ``"all"``, takes every one;
    ``"join-buckets"`` needs ``seed`` and takes ``limit`` (default 50) per bucket.
    ``executable_only``: draw only among questions whose database is available here (the others cannot run).
    """
    if mode not in SAMPLE_MODES:
        raise ValueError(f"Unknown sample {mode!r}; expected one of {', '.join(SAMPLE_MODES)}")
    qs = queryset.order_by("index")
    if db_ids:
        qs = qs.filter(db_id__in=db_ids)
    if executable_only:
        qs = qs.filter(database__isnull=False)
    if mode == "join-buckets":
        return _join_buckets(qs, per_bucket=limit or TABLE10_PER_BUCKET, seed=seed)
    if mode == "all" or not limit:
        return list(qs)
    if mode == "first":
        return list(qs[:limit])
    if seed is None:
        raise ValueError("A random sample needs a seed")
    ids = list(qs.values_list("pk", flat=True))
    chosen = set(random.Random(seed).sample(ids, min(limit, len(ids))))
    return [q for q in qs.filter(pk__in=chosen)]


def _join_buckets(qs, *, per_bucket: int, seed: int | None) -> list:
    if seed is None:
        raise ValueError("A join-bucket sample needs a seed")
    rng = random.Random(seed)
    chosen: set[int] = set()
    for bucket in JOIN_BUCKETS:
        in_bucket = qs.filter(table_count__gte=4) if bucket == "4+" else qs.filter(table_count=int(bucket))
        ids = list(in_bucket.values_list("pk", flat=True))
        chosen |= set(rng.sample(ids, min(per_bucket, len(ids))))
    return list(qs.filter(pk__in=chosen))
