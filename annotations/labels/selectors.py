"""Reads for labels: queues and progress, suggestions, agreement, dashboards, corrected EX, export rows."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from typing import Any

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from agent.models import Turn
from agent.services import open_connector
from agent.sql import Limits, SQLError
from annotations import policies
from annotations.evaluation import DIFFICULTY_ORDER, TABLE_BUCKETS, agreement, table_bucket
from annotations.evaluation.compare import bird_results_equal, spider_order_matters, spider_results_equal
from annotations.labels import suggestions
from annotations.labels.models import (
    Category,
    Label,
    Queue,
    Reservation,
    SuggestionEvent,
    Taxonomy,
    TaxonomyVersion,
)
from annotations.labels.version import labels_version
from annotations.runs.models import Run, RunItem
from annotations.runs.selectors import run_agent_figures


def default_taxonomy_version() -> TaxonomyVersion | None:
    """Latest version of the seeded paper taxonomy (or of the first taxonomy there is)."""
    taxonomy = Taxonomy.objects.filter(name="Interactive-T2S errors").first() or Taxonomy.objects.first()
    return taxonomy.latest_version() if taxonomy else None


def run_failures(*, run: Run) -> QuerySet[RunItem]:
    return run.items.filter(ex=False).select_related("question").order_by("question__index")


def queue_items(*, queue: Queue) -> QuerySet[RunItem]:
    return RunItem.objects.filter(queue.item_filter()).select_related("question").order_by("question__index")


def queue_items_unlabelled_by(*, queue: Queue, user) -> QuerySet[RunItem]:
    """The queue's failures ``user`` has not labelled yet."""
    return queue_items(queue=queue).exclude(
        pk__in=Label.objects.filter(annotator=user, is_final=False).values("item_id"))


def queue_next_item(*, queue: Queue, user, after: RunItem | None = None) -> RunItem | None:
    """The next question for ``user``: not labelled by them, and not already taken by as many people as allowed
    (someone who labelled it and still holds it counts once)."""
    qs = queue_items_unlabelled_by(queue=queue, user=user)
    if after is not None:
        qs = qs.filter(question__index__gt=after.question.index)
    candidates = list(qs.values_list("pk", flat=True))
    if not candidates:
        return None
    taken: dict[int, set[int]] = defaultdict(set)
    for item_id, annotator_id in (Label.objects.filter(item_id__in=candidates, is_final=False)
                                  .exclude(annotator=user).values_list("item_id", "annotator_id")):
        taken[item_id].add(annotator_id)
    for item_id, holder_id in (Reservation.objects.filter(item_id__in=candidates, expires_at__gt=timezone.now())
                               .exclude(user=user).values_list("item_id", "user_id")):
        taken[item_id].add(holder_id)
    for item_id in candidates:
        if len(taken[item_id]) < queue.max_annotators:
            return RunItem.objects.select_related("question").get(pk=item_id)
    return None


def queue_progress(*, queue: Queue, user) -> dict[str, int]:
    """Where the queue stands, and where ``user`` stands in it: see ``queues_progress``."""
    return queues_progress(queues=[queue], user=user)[queue.pk]


def queue_annotator_progress(*, queue: Queue) -> list[dict[str, Any]]:
    """Per annotator, how many of the queue's questions they labelled (counts only, never which categories, so
    a blind queue shows them too), most first."""
    rows = (Label.objects.filter(is_final=False, item__in=queue_items(queue=queue)).order_by()
            .values("annotator__username").annotate(n=Count("item_id", distinct=True)))
    return sorted(({"annotator": r["annotator__username"], "done": r["n"]} for r in rows),
                  key=lambda r: (-r["done"], r["annotator"]))


def queues_for_user(*, user) -> QuerySet[Queue]:
    """Queues on runs ``user`` may see that are open to everyone or assigned to them."""
    return (policies.visible_queues(user).filter(Q(assignees=user) | Q(assignees__isnull=True)).distinct()
            .select_related("run", "taxonomy_version__taxonomy"))


def queues_created_by(*, user) -> QuerySet[Queue]:
    """Queues ``user`` created (on runs they may still see), to follow the work they handed out."""
    return (policies.visible_queues(user).filter(created_by_id=user.pk)
            .select_related("run", "taxonomy_version__taxonomy").prefetch_related("assignees"))


def queue_is_for(*, queue: Queue, user) -> bool:
    """Whether ``user`` may work the queue: anyone when it has no assignees, else only them."""
    return not queue.assignees.exists() or queue.assignees.filter(pk=user.pk).exists()


def active_reservations(*, item: RunItem) -> QuerySet[Reservation]:
    return item.label_reservations.filter(expires_at__gt=timezone.now()).select_related("user")


# --- suggestions --------------------------------------------------------------------


def item_suggestions(*, item: RunItem, results: dict[str, Any]) -> list[suggestions.Suggestion]:
    """Suggestions for a failed item from its re-executed results (see ``run_item_with_results``)."""
    if item.ex is not False:
        return []
    gold, pred = results.get("gold"), results.get("pred")
    return suggestions.suggest(
        gold_sql=item.question.gold_sql, pred_sql=item.predicted_sql or "",
        gold_columns=list(gold.columns) if gold else None, gold_rows=gold.rows if gold else None,
        pred_columns=list(pred.columns) if pred else None, pred_rows=pred.rows if pred else None)


def suggestion_acceptance(*, user, run: Run | None = None,
                          runs: QuerySet[Run] | None = None) -> list[dict[str, Any]]:
    """How often shown suggestions were taken: on one run, or across ``runs``; in a blind queue, only the events
    ``user`` may see (theirs, and the others' once the question is revealed to them or adjudicated)."""
    qs = SuggestionEvent.objects.all()
    if run is not None:
        qs = qs.filter(item__run=run)
    if runs is not None:
        qs = qs.filter(item__run__in=runs.values("pk"))
    qs = policies.hide_blind_suggestion_events(user, qs, run_ids=[run.pk] if run is not None else None)
    rows = qs.values("category_key").annotate(shown=Count("id"), accepted=Count("id", filter=Q(accepted=True)))
    version = default_taxonomy_version()
    names = {c.key: c.name for c in version.categories.all()} if version else {}
    return [{"key": r["category_key"], "name": names.get(r["category_key"], r["category_key"]),
             "shown": r["shown"], "accepted": r["accepted"],
             "rate": round(100 * r["accepted"] / r["shown"], 1) if r["shown"] else None}
            for r in rows.order_by("category_key")]


# --- agreement and adjudication ------------------------------------------------------------


def run_label_sets(*, run: Run, blind_only: bool = False) -> dict[int, dict[int, set[str]]]:
    """``{item_id: {annotator_id: {category keys}}}`` over the run's annotators' (not adjudication) labels.

    ``blind_only``: leave out an annotator's rating of an item when any of their labels on it is not blind."""
    rows = list(Label.objects.for_run(run).filter(is_final=False)
                .values_list("item_id", "annotator_id", "category__key", "blind"))
    seen = {(item_id, annotator_id) for item_id, annotator_id, _key, blind in rows if not blind}
    return agreement.group_ratings((item_id, annotator_id, key) for item_id, annotator_id, key, _blind in rows
                                   if not (blind_only and (item_id, annotator_id) in seen))


def run_annotators(*, run: Run):
    ids = Label.objects.for_run(run).filter(is_final=False).values_list("annotator_id", flat=True).distinct()
    return get_user_model().objects.filter(pk__in=ids).order_by("username")


def run_agreement(*, run: Run, annotator_ids: list[int], version: TaxonomyVersion | None = None) -> dict[str, Any]:
    """Krippendorff's alpha (overall and per category) and Cohen's kappa per pair of annotators, on blind
    ratings only, each with the number of questions it rests on; plus how many ratings were left out as not
    blind."""
    version = version or default_taxonomy_version()
    categories = list(version.categories.all()) if version else []
    blind = run_label_sets(run=run, blind_only=True)
    every = run_label_sets(run=run)
    figures = agreement.label_agreement(blind, [c.key for c in categories], annotator_ids)
    names = {u.pk: u.get_username() for u in get_user_model().objects.filter(pk__in=annotator_ids)}
    by_key = {c.key: c for c in categories}
    chosen = set(annotator_ids)
    left_out = (sum(1 for by in every.values() for a in by if a in chosen)
                - sum(1 for by in blind.values() for a in by if a in chosen))
    return {
        "alpha": figures.alpha, "items": figures.items, "ratings": figures.ratings,
        "annotators": figures.annotators, "not_blind": left_out,
        "rows": [{"category": by_key[f.key], "alpha": f.alpha, "items": f.items, "positives": f.positives}
                 for f in figures.categories],
        "pairs": [{"first": names.get(p.first, p.first), "second": names.get(p.second, p.second),
                   "kappa": p.kappa, "items": p.items, "agreed": p.agreed} for p in figures.pairs],
    }


def run_adjudication_rows(*, run: Run, annotator_ids: list[int] | None = None,
                          disagreements_only: bool = True) -> list[dict[str, Any]]:
    """Questions rated by at least two annotators (by default only those whose category sets differ), each
    with every annotator's categories and the final decision if any. Meant for adjudicators: it shows every
    label, blind or not."""
    sets = run_label_sets(run=run)
    if annotator_ids:
        sets = {i: {a: k for a, k in by.items() if a in annotator_ids} for i, by in sets.items()}
    chosen = (agreement.disagreeing_items(sets) if disagreements_only
              else [i for i, by in sets.items() if len(by) >= 2])
    finals: dict[int, set[str]] = defaultdict(set)
    for item_id, key in (Label.objects.for_run(run).filter(is_final=True, item_id__in=chosen)
                         .values_list("item_id", "category__key")):
        finals[item_id].add(key)
    version = default_taxonomy_version()
    names = {c.key: c.name for c in Category.objects.filter(key__in={k for by in sets.values()
                                                                      for keys in by.values() for k in keys}
                                                           | {k for keys in finals.values() for k in keys})
             .order_by("version__number")}  # the latest version's name wins
    if version:
        names.update({c.key: c.name for c in version.categories.all()})
    users = {u.pk: u.get_username() for u in get_user_model().objects.filter(
        pk__in={a for i in chosen for a in sets[i]})}
    items = run.items.select_related("question").filter(pk__in=chosen).order_by("question__index")
    rows = []
    for item in items:
        by = sets[item.pk]
        rows.append({"item": item,
                     "by": [{"annotator": users.get(a, a), "chips": [names.get(k, k) for k in sorted(keys)]}
                            for a, keys in sorted(by.items(), key=lambda kv: users.get(kv[0], ""))],
                     "final": [names.get(k, k) for k in sorted(finals.get(item.pk, ()))],
                     "adjudicated": item.pk in finals})
    return rows


def next_adjudication_item(*, run: Run, after: RunItem) -> RunItem | None:
    """The next question with disagreeing annotators after ``after`` (adjudication mode's "next")."""
    chosen = agreement.disagreeing_items(run_label_sets(run=run))
    return (run.items.filter(pk__in=chosen, question__index__gt=after.question.index)
            .select_related("question").order_by("question__index").first())


def item_other_labels(*, item: RunItem, user) -> list[dict[str, Any]]:
    """The labels on ``item`` of annotators other than ``user`` (everyone's when None), grouped by annotator.
    The caller checks they may be seen."""
    by: dict[str, list[str]] = defaultdict(list)
    qs = Label.objects.filter(item=item, is_final=False)
    if user is not None:
        qs = qs.exclude(annotator=user)
    for name, category in (qs.order_by("annotator__username", "category__position")
                           .values_list("annotator__username", "category__name")):
        by[name].append(category)
    return [{"annotator": name, "chips": chips} for name, chips in by.items()]


def item_final_labels(*, item: RunItem) -> QuerySet[Label]:
    return Label.objects.filter(item=item, is_final=True).select_related("category", "annotator")


# --- dashboards ----------------------------------------------------------------------


def run_labels(*, run: Run, user=None) -> QuerySet[Label]:
    """The run's labels ``user`` may see (blind queues hide some); all of them when no user is given."""
    qs = Label.objects.for_run(run)
    return qs if user is None else policies.hide_blind_labels(user, qs, run_ids=[run.pk])


def item_categories(*, run: Run, user=None) -> dict[int, set[str]]:
    """The categories each labelled item counts under: its final labels if adjudicated, else all labels given
    (those ``user`` may see)."""
    given: dict[int, set[str]] = defaultdict(set)
    final: dict[int, set[str]] = defaultdict(set)
    for item_id, key, is_final in run_labels(run=run, user=user).values_list("item_id", "category__key",
                                                                             "is_final"):
        (final if is_final else given)[item_id].add(key)
    return {i: final.get(i) or given[i] for i in set(given) | set(final)}


def category_distribution(*, run: Run, version: TaxonomyVersion | None = None, user=None) -> dict[str, Any]:
    """Counts of labelled failures per category, grouped as the paper's Table 11 (labels ``user`` may see)."""
    version = version or default_taxonomy_version()
    cats = item_categories(run=run, user=user)
    counts = Counter(k for keys in cats.values() for k in keys)
    rows = []
    for c in (version.categories.all() if version else []):
        rows.append({"key": c.key, "label": c.name, "group": c.group, "count": counts.get(c.key, 0),
                     "percent": round(100 * counts.get(c.key, 0) / len(cats), 1) if cats else None})
    groups = Counter()
    for r in rows:
        groups[r["group"]] += r["count"]
    return {"rows": rows, "labelled": len(cats), "failures": run_failures(run=run).count(),
            "groups": dict(groups)}


def _table_bucket(count) -> str:
    """The evaluation core's bucket (0 tables counts as 1, as there); unknown without a count."""
    return table_bucket(None if count in (None, "") else int(count)) or "unknown"


def _ex_rows(values, key: str, order=None, bucket=None) -> list[dict[str, Any]]:
    buckets: dict[str, dict[str, int]] = {}
    for v in values:
        k = bucket(v[key]) if bucket else v[key]
        k = "unknown" if k in (None, "") else str(k)
        b = buckets.setdefault(k, {"scored": 0, "correct": 0})
        b["scored"] += 1
        b["correct"] += 1 if v["ex"] else 0
    total = sum(b["scored"] for b in buckets.values())

    def sort_key(k: str):
        if order and k in order:
            return (0, order.index(k), k)
        return (1, 0, k)

    return [{"key": k, "label": k, **buckets[k], "ex": round(100 * buckets[k]["correct"] / buckets[k]["scored"], 2),
             "share": round(100 * buckets[k]["scored"] / total, 2)}
            for k in sorted(buckets, key=sort_key)]


def ex_by(*, run: Run, field: str) -> list[dict[str, Any]]:
    """EX per number of tables in the gold query (Table 9 buckets 1, 2, 3, 4+) or per difficulty (scored only)."""
    values = run.items.filter(ex__isnull=False).values("ex", f"question__{field}")
    if field == "table_count":
        return _ex_rows(values, "question__table_count", TABLE_BUCKETS, _table_bucket)
    return _ex_rows(values, f"question__{field}", DIFFICULTY_ORDER)


def agent_figures(*, run: Run) -> dict[str, Any] | None:
    """Rounds and tokens per case (the runs' figures), their distribution, tool usage per round, and the
    last tool call before a failure."""
    items = list(run.items.filter(session__isnull=False).select_related("session"))
    if not items:
        return None
    figures = run_agent_figures(run=run)
    rounds = Counter(i.session.rounds for i in items)
    per_round: dict[int, Counter] = defaultdict(Counter)
    last_before_failure: Counter = Counter()
    failed_sessions = {i.session_id for i in items if i.ex is False}
    turns = (Turn.objects.filter(session_id__in=[i.session_id for i in items])
             .exclude(tool="").order_by("session_id", "index").values_list("session_id", "index", "tool"))
    for _session_id, index, tool in turns:
        per_round[index + 1][tool] += 1
    last_tool = last_tools(session_ids=failed_sessions)
    for session_id in failed_sessions:
        last_before_failure[last_tool.get(session_id, "(none)")] += 1
    tools = sorted({t for c in per_round.values() for t in c})
    return {
        "cases": figures["cases"],
        "avg_rounds": round(figures["rounds"] or 0, 2),
        "avg_tokens": round(figures["tokens"], 1),
        "rounds": [{"key": str(k), "label": str(k), "count": rounds[k]} for k in sorted(rounds)],
        "tools": tools,
        "per_round": [{"round": r, **{t: per_round[r].get(t, 0) for t in tools}} for r in sorted(per_round)],
        "before_failure": [{"key": t, "label": t, "count": n} for t, n in last_before_failure.most_common()],
    }


def last_tools(*, session_ids) -> dict[int, str]:
    """The last tool each session called before answering (Done excluded)."""
    out: dict[int, str] = {}
    for session_id, tool in (Turn.objects.filter(session_id__in=list(session_ids)).exclude(tool__in=["", "Done"])
                             .order_by("session_id", "index").values_list("session_id", "tool")):
        out[session_id] = tool
    return out


def chart_items(*, run: Run, category: str = "", tables: str = "", difficulty: str = "", rounds: str = "",
                last_tool: str = "", user=None) -> QuerySet[RunItem]:
    """The items behind a bar of a dashboard chart."""
    qs = run.items.select_related("question").order_by("question__index")
    if category:
        qs = qs.filter(pk__in=[i for i, keys in item_categories(run=run, user=user).items() if category in keys])
    if tables == "unknown":
        qs = qs.filter(question__table_count__isnull=True, ex__isnull=False)
    elif tables == "4+":
        qs = qs.filter(question__table_count__gte=4, ex__isnull=False)
    elif tables.isdigit():
        qs = qs.filter(question__table_count=int(tables), ex__isnull=False)
    if difficulty:
        qs = qs.filter(question__difficulty="" if difficulty == "unknown" else difficulty, ex__isnull=False)
    if rounds.isdigit():
        qs = qs.filter(session__rounds=int(rounds))
    if last_tool:
        failed = list(qs.filter(ex=False, session__isnull=False).values_list("session_id", flat=True))
        tools = last_tools(session_ids=failed)
        qs = qs.filter(ex=False, session_id__in=[s for s in failed if tools.get(s, "(none)") == last_tool])
    return qs


def runs_distribution(*, runs: QuerySet[Run], user=None) -> dict[str, Any]:
    """Category counts per run, for those of ``runs`` with labels (across-runs dashboard; the labels ``user``
    may see).

    An item counts under its final labels if adjudicated, else under every label given (as ``item_categories``).
    Counting them takes the database a moment per view at tens of thousands of labels (167 ms at 41k), so the
    counts are cached under the labels' version, which every change of a label, a reveal or a queue replaces
    (``annotations.labels.version``); the failures per run (which a re-evaluation changes) are counted each time."""
    version = default_taxonomy_version()
    categories = list(version.categories.all()) if version else []
    visible = list(runs.select_related("dataset").order_by("-created_at"))
    counted = _runs_label_counts(run_ids=[run.pk for run in visible], user=user)
    labelled_runs = [run for run in visible if run.pk in counted]
    failures = dict(RunItem.objects.filter(run_id__in=[run.pk for run in labelled_runs], ex=False).order_by()
                    .values_list("run_id").annotate(n=Count("id")))
    rows = []
    for run in labelled_runs:
        counts = counted[run.pk]["counts"]
        rows.append({"run": run, "labelled": counted[run.pk]["labelled"], "failures": failures.get(run.pk, 0),
                     "counts": [counts.get(c.key, 0) for c in categories], "ex": (run.totals or {}).get("ex")})
    return {"categories": categories, "rows": rows}


def _runs_label_counts(*, run_ids: list[int], user) -> dict[int, dict[str, Any]]:
    """{run id: {"labelled": items, "counts": {category key: items}}} for the runs of ``run_ids`` with labels,
    as ``user`` sees them (blind queues hide some from those who may not adjudicate), through the cache."""
    if user is None or policies.can_adjudicate(user):
        view = "all"
    else:
        view = f"user-{user.pk}" if user.is_authenticated and user.is_active else "anonymous"
    digest = hashlib.sha1(",".join(map(str, sorted(run_ids))).encode()).hexdigest()
    key = f"labels:runs-distribution:{labels_version()}:{view}:{digest}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    labels = Label.objects.filter(item__run_id__in=run_ids)
    out: dict[int, dict[str, Any]] = {run_id: {"labelled": 0, "counts": {}} for run_id in
                                      labels.order_by().values_list("item__run_id", flat=True).distinct()}
    if user is not None:
        labels = policies.hide_blind_labels(user, labels, run_ids=run_ids)
    counting = labels.filter(Q(is_final=True) | ~Exists(labels.filter(item_id=OuterRef("item_id"), is_final=True)))
    for run_id, key_, n in (counting.order_by().values_list("item__run_id", "category__key")
                            .annotate(n=Count("item_id", distinct=True))):
        out[run_id]["counts"][key_] = n
    for run_id, n in labels.order_by().values_list("item__run_id").annotate(n=Count("item_id", distinct=True)):
        out[run_id]["labelled"] = n
    cache.set(key, out, timeout=24 * 3600)
    return out


def queues_progress(*, queues: list[Queue], user) -> dict[int, dict[str, int]]:
    """For each queue: its questions (``total``); those labelled by as many annotators as the queue asks for
    (``complete``; one for a single-annotator queue, two for a double one); those ``user`` labelled (``mine``);
    those left for ``user`` (not labelled by them and still short of annotators: ``left``).

    One grouped query whatever the number of queues: the failures of their runs counted per (run, database,
    difficulty, joins, number of annotators, labelled by ``user``); each queue adds up the groups its filters
    select and reads completeness against its own number of annotators."""
    runs = {q.run_id: q.run for q in queues}
    if not runs:
        return {}
    # Counting them reads every failure with two label lookups, so a
    # finished run's groups are cached per user under the labels' version and the run's state; a running run's
    # failures still change, they are counted each time.
    version = labels_version()
    keys = {pk: _progress_key(run, user, version) for pk, run in runs.items()}
    cached = cache.get_many([k for k in keys.values() if k])
    groups = [group for pk, k in keys.items() if k in cached for group in cached[k]]
    missing = [pk for pk, k in keys.items() if k not in cached]
    if missing:
        labels = Label.objects.filter(item_id=OuterRef("pk"), is_final=False)
        annotators = (labels.order_by().values("item_id").annotate(n=Count("annotator_id", distinct=True))
                      .values("n"))
        fresh = [tuple(g) for g in RunItem.objects.filter(run_id__in=missing, ex=False).order_by()
                 .annotate(annotators=Coalesce(Subquery(annotators), 0), by_me=Exists(labels.filter(annotator=user)))
                 .values_list("run_id", "question__db_id", "question__difficulty", "question__join_count",
                              "annotators", "by_me")
                 .annotate(total=Count("id"))]
        groups += fresh
        cache.set_many({keys[pk]: [g for g in fresh if g[0] == pk] for pk in missing if keys[pk]}, timeout=24 * 3600)
    out = {}
    for queue in queues:
        total = complete = mine = left = 0
        for run_id, db_id, difficulty, joins, n_annotators, by_me, n in groups:
            if (run_id == queue.run_id and (not queue.db_id or db_id == queue.db_id)
                    and (not queue.difficulty or difficulty == queue.difficulty)
                    and (queue.join_count is None or joins == queue.join_count)):
                total += n
                complete += n if n_annotators >= queue.max_annotators else 0
                mine += n if by_me else 0
                left += n if not by_me and n_annotators < queue.max_annotators else 0
        out[queue.pk] = {"total": total, "complete": complete, "mine": mine, "left": left,
                         "needed": queue.max_annotators, "percent": round(100 * complete / total) if total else 0}
    return out


def _progress_key(run: Run, user, version: str) -> str | None:
    """Cache key of a finished run's queue progress groups for ``user`` (None while it runs)."""
    if run.status not in (Run.Status.DONE, Run.Status.CANCELLED, Run.Status.FAILED):
        return None
    evaluated = run.evaluated_at.timestamp() if run.evaluated_at else ""
    return (f"labels:queue-progress-v2:{version}:{user.pk if user.is_authenticated else 0}:{run.pk}:"
            f"{run.created_at.timestamp()}:{run.status}:{evaluated}")


# --- corrected gold ----------------------------------------------------------------


def corrections(*, run: Run, user=None) -> dict[int, Label]:
    """One usable corrected gold per item: a final label's if any, else the latest (of the labels ``user`` may
    see: a blind queue hides the others' corrections too)."""
    out: dict[int, Label] = {}
    qs = (run_labels(run=run, user=user).filter(corrected_ok=True).exclude(corrected_sql="")
          .select_related("item__question__database").order_by("is_final", "updated_at"))
    for label in qs:
        out[label.item_id] = label  # later rows (final, then newest) win
    return out


def run_ex_with_corrections(*, run: Run, user=None) -> dict[str, Any]:
    """EX with corrected golds: each corrected item is re-judged against its corrected gold query,
    using the dataset's semantics (Spider test-suite or BIRD); the others keep their decision."""
    fixed = corrections(run=run, user=user)
    scored = list(run.items.filter(ex__isnull=False).values_list("id", "ex"))
    changes = []
    decisions = dict(scored)
    limits = Limits(timeout_s=30, max_rows=100_000, count_cap=100_000)
    for item_id, label in fixed.items():
        item = label.item
        database = item.question.database
        if database is None:
            continue
        pred = None
        try:
            with open_connector(database, limits=limits) as conn:
                gold = conn.execute(label.corrected_sql).rows
                if item.predicted_sql:
                    try:
                        pred = conn.execute(item.predicted_sql).rows
                    except SQLError:
                        pred = None
        except SQLError:
            continue
        if pred is None:
            new = False
        elif run.dataset.eval_mode == "bird":
            new = bird_results_equal(gold, pred)
        else:
            new = spider_results_equal(gold, pred, order_matters=spider_order_matters(label.corrected_sql))
        old = decisions.get(item_id)
        decisions[item_id] = new
        if old != new:
            changes.append({"item": item, "label": label, "before": old, "after": new})
    total = len(decisions)
    correct = sum(1 for v in decisions.values() if v)
    original = (run.totals or {}).get("ex")
    return {"ex": round(100 * correct / total, 2) if total else None, "correct": correct, "scored": total,
            "original": original, "corrected_items": len(fixed), "changes": changes}


# --- export -----------------------------------------------------------------------


EXPORT_FIELDS = ["run", "item", "question_index", "db_id", "question", "gold_sql", "predicted_sql", "ex",
                 "taxonomy", "taxonomy_version", "category", "category_name", "group", "annotator", "is_final", "blind",
                 "note", "corrected_sql", "corrected_ok", "corrected_row_count", "corrected_error",
                 "created_at", "updated_at"]


def export_rows(*, run: Run, user=None):
    """Every label of the run ``user`` may see, one row each."""
    qs = (run_labels(run=run, user=user)
          .select_related("item__question", "category", "taxonomy_version__taxonomy", "annotator")
          .order_by("item__question__index", "category__position", "annotator__username"))
    for label in qs.iterator():
        item, q = label.item, label.item.question
        yield {"run": run.pk, "item": item.pk, "question_index": q.index, "db_id": q.db_id, "question": q.question,
               "gold_sql": q.gold_sql, "predicted_sql": item.predicted_sql, "ex": item.ex,
               "taxonomy": label.taxonomy_version.taxonomy.name, "taxonomy_version": label.taxonomy_version.number,
               "category": label.category.key, "category_name": label.category.name,
               "group": label.category.group, "annotator": label.annotator.get_username(),
               "is_final": label.is_final, "blind": label.blind, "note": label.note, "corrected_sql": label.corrected_sql,
               "corrected_ok": label.corrected_ok, "corrected_row_count": label.corrected_row_count,
               "corrected_error": label.corrected_error, "created_at": label.created_at.isoformat(),
               "updated_at": label.updated_at.isoformat()}
