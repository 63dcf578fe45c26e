"""Reads for the agent app."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from django.db.models import Count, F
from django.utils import timezone

from agent import policies
from agent.keyset import KeysetPage, SortKey, paginate
from agent.models import AnswerFeedback, Database, Turn
from agent.services import open_connector
from agent.sql import Limits, QueryResult, SchemaInfo, TableInfo
from agent.strategies import STRATEGIES
from agent.strategies.options import option_specs


def database_list(*, user, status: str | None = None):
    """The databases ``user`` was granted (``agent.policies``)."""
    from agent import policies

    qs = policies.visible_databases(user)
    return qs.filter(status=status) if status else qs


def database_table(*, database: Database, table: str) -> TableInfo | None:
    schema: SchemaInfo | None = database.schema_info()
    return schema.table(table) if schema else None


def index_rows(*, database: Database) -> list[tuple[str, int | None, float | None]]:
    """(index name, size in bytes, build seconds) from the stored manifest, plus the total."""
    manifest = database.index_manifest or {}
    sizes, seconds = manifest.get("sizes", {}), manifest.get("build_seconds", {})
    names = [n for n in dict.fromkeys([*sizes, *seconds]) if n != "total"]
    rows = [(n, sizes.get(n), seconds.get(n)) for n in names]
    if manifest:
        rows.append(("total", sum(sizes.values()) or None, seconds.get("total")))
    return rows


def table_preview(*, database: Database, table: TableInfo, rows: int = 10) -> QueryResult:
    """The first rows of one table, through the read-only connector (internal names, quoted)."""
    with open_connector(database, limits=Limits(timeout_s=5, max_rows=rows, count_cap=0)) as conn:
        return conn.execute(f"SELECT * FROM {conn.quote_table(table.name)} LIMIT {int(rows)}")


# How the sessions list and /api/sessions/ may be ordered (``?sort=``): newest first unless asked.
SESSION_SORTS: dict[str, SortKey] = {
    "-created": SortKey("created_at"),
    "created": SortKey("created_at", descending=False),
    "-rounds": SortKey("rounds"),
    "rounds": SortKey("rounds", descending=False),
    "-tokens": SortKey("tokens", expression=F("prompt_tokens") + F("completion_tokens")),
    "tokens": SortKey("tokens", descending=False, expression=F("prompt_tokens") + F("completion_tokens")),
    "-cost": SortKey("cost", nullable=True),
    "cost": SortKey("cost", descending=False, nullable=True),
    "-latency": SortKey("elapsed_ms", nullable=True),
    "latency": SortKey("elapsed_ms", descending=False, nullable=True),
}
DEFAULT_SESSION_SORT = "-created"


def session_list(*, viewer, database=None, status: str | None = None, since=None, until=None, q: str | None = None,
                 user=None, strategy: str | None = None, model: str | None = None):
    """Sessions ``viewer`` may see (on databases granted to them), filtered; ``user``: only those they asked.

    ``q`` is a case-insensitive substring of the question: on PostgreSQL a trigram index answers it
    (migration 0018), on SQLite it is a scan."""
    from agent import policies

    qs = policies.visible_sessions(viewer).select_related("database", "created_by")
    if database is not None:
        qs = qs.filter(database=database)
    if status:
        qs = qs.filter(status=status)
    if strategy:
        qs = qs.filter(strategy=strategy)
    if model:
        qs = qs.filter(model=model)
    if since:
        qs = qs.filter(created_at__gte=_day_start(since))
    if until:
        qs = qs.filter(created_at__lt=_day_start(until + timedelta(days=1)))
    if q:
        qs = qs.filter(question__icontains=q)
    if user is not None:
        qs = qs.filter(created_by=user)
    return qs


# What a row of a sessions table does not show: the result preview, the config snapshot, the SQL and the error of
# every session, and each row's database's schema and index manifest (tens of KB each for a real database).
SESSION_ROW_DEFERRED = ("config", "result", "final_sql", "error", "evidence", "database__schema",
                        "database__index_manifest", "database__column_descriptions", "database__foreign_key_patches")


def session_rows(qs):
    """``qs`` (a ``session_list``) without the columns a sessions table does not show."""
    return qs.defer(*SESSION_ROW_DEFERRED)


def session_page(qs, *, sort: str = DEFAULT_SESSION_SORT, cursor: str | None = None, size: int = 30,
                 count: bool = True) -> KeysetPage:
    """One page of ``qs`` in the order ``sort`` names (see SESSION_SORTS), by keyset: deep pages cost what the
    first does. Unknown sorts fall back to newest first."""
    key = SESSION_SORTS.get(sort) or SESSION_SORTS[DEFAULT_SESSION_SORT]
    return paginate(qs, key=key, cursor=cursor, size=size, count=count)


def session_models(*, viewer) -> list[str]:
    """The models sessions were run with, for the list's filter (a distinct over the model index)."""
    from agent.models import LLMEndpoint

    names = set(LLMEndpoint.objects.values_list("model", flat=True))
    for endpoint_models in LLMEndpoint.objects.values_list("allowed_models", flat=True):
        names.update(m for m in endpoint_models or [] if isinstance(m, str))
    from agent.conf import agent_settings

    if agent_settings.LLM_MODEL:
        names.add(agent_settings.LLM_MODEL)
    return sorted(n for n in names if n)


def _day_start(day):
    """Midnight of ``day`` in the current time zone: a date filter as a range on the created_at index
    (``created_at__date`` wraps the column in a function no index answers)."""
    return timezone.make_aware(datetime.combine(day, time.min))


def session_turns(*, session, viewer, with_prompts: bool = False, after: int | None = None):
    """The session's turns in order (``after``: only those with a greater index, what a live page lacks).

    ``with_prompts``: each turn gets ``full_prompt``, the exact messages its LLM call received (stored turns keep
    only what they added to the previous turn's prompt, so the chain is rebuilt from the stored parts; for new
    turns only, the earlier parts are read as values and nothing of the earlier turns is rendered again), if
    ``viewer`` may read the session's prompt (``policies.can_see_session_prompt``); otherwise each turn that called
    the LLM gets ``prompt_hidden``, the note that says why, and no prompt."""
    qs = Turn.objects.for_session(session)
    if after is not None:
        qs = qs.filter(index__gt=after)
    if with_prompts and not policies.can_see_session_prompt(viewer, session):
        turns = list(qs.defer("prompt"))
        for turn in turns:
            turn.full_prompt = []
            turn.prompt_hidden = policies.PROMPT_HIDDEN_NOTE if turn.completion is not None or turn.error else ""
        return turns
    if not with_prompts:
        return qs.defer("prompt")
    turns = list(qs)
    previous: list = []
    if after is not None and turns:
        for _index, prefix_len, prompt in (Turn.objects.filter(session=session, index__lte=after).order_by("index")
                                           .values_list("index", "prompt_prefix_len", "prompt")):
            messages = previous[:prefix_len] + list(prompt or [])
            if messages:
                previous = messages
    for turn in turns:
        messages = previous[: turn.prompt_prefix_len] + list(turn.prompt or [])
        turn.full_prompt = messages if turn.completion is not None or turn.error and messages else []
        if messages:
            previous = messages
    return turns


def ask_initial(*, user, requested: str = "") -> dict:
    """Which database and strategy Ask opens on, and why: a ``?database=`` link, else the account's last choice
    (``AskPreference``), else the demo database, else the first one. Never a silent switch: when the remembered
    database is no longer available, ``notice`` says so instead of quietly offering another one.
    """
    from agent import policies
    from agent.models import AskPreference

    # One read of the few names the choice is made among (not a query per rule, nor their schemas).
    ready = list(policies.visible_databases(user).ready().order_by("name").values_list("pk", "name", "is_demo"))
    preference = (AskPreference.objects.select_related("database").only("strategy", "database__name",
                                                                        "database__status")
                  .filter(user_id=getattr(user, "pk", None)).first())
    out: dict = {"database": None, "strategy": preference.strategy if preference else "", "source": "", "notice": "",
                 "strategy_notice": ""}
    if out["strategy"] in STRATEGIES and STRATEGIES[out["strategy"]].needs_pool:
        # Remembered from before such strategies were refused here: said, not silently replaced.
        out["strategy_notice"] = (f"The strategy you last asked with, {STRATEGIES[out['strategy']].display_name()}, "
                                  "needs a retrieval pool, which a single question does not have: run it over a "
                                  "dataset, or choose another strategy here.")
        out["strategy"] = ""
    if requested and any(name == requested for _pk, name, _demo in ready):
        return {**out, "database": requested, "source": "link"}
    if preference is not None and preference.database_id:
        if any(pk == preference.database_id for pk, _name, _demo in ready):
            return {**out, "database": preference.database.name, "source": "last"}
        out["notice"] = (f"The database you last asked about, {preference.database.name}, is not available now "
                         f"({preference.database.get_status_display().lower()}, or no longer granted): choose one.")
    demo = next((name for _pk, name, is_demo in ready if is_demo), None)
    chosen = demo or next((name for _pk, name, _demo in ready), None)
    if chosen is not None:
        out.update(database=chosen, source="demo" if demo else "first")
    return out


def audit_list(*, action: str | None = None, actor: str | None = None, target: str | None = None,
               target_type: str | None = None, since=None, until=None):
    """Audit entries, newest first, filtered as the audit page asks (``until`` is exclusive)."""
    from agent.models import AuditEntry

    qs = AuditEntry.objects.select_related("actor")
    if action:
        qs = qs.filter(action=action)
    if actor:
        qs = qs.filter(actor_name__iexact=actor) if actor != "system" else qs.filter(actor_name="")
    if target:
        qs = qs.filter(target__icontains=target)
    if target_type:
        qs = qs.filter(target_type=target_type)
    if since:
        qs = qs.filter(created_at__gte=since)
    if until:
        qs = qs.filter(created_at__lt=until)
    return qs


def workspace_list(*, user):
    """The workspaces this user belongs to, with how many databases and members each has."""
    from django.db.models import Count

    from agent import policies

    return policies.member_workspaces(user).annotate(
        database_count=Count("databases", distinct=True), member_count=Count("memberships", distinct=True))


def workspace_overview(*, workspace, user) -> dict:
    """A workspace's members (each with its roles, which say what it may do there), databases and exemplar sets
    (every member sees each of them; ``exemplar_sets`` is the annotations app's reverse relation, so this module
    needs no import from it)."""
    from agent.roles import ROLES

    members = []
    for m in workspace.memberships.select_related("user", "group").prefetch_related("user__groups"):
        roles = ([g.name for g in m.user.groups.all() if g.name in ROLES] if m.user_id
                 else [m.group.name] if m.group.name in ROLES else [])
        members.append({"membership": m, "name": m.user.get_username() if m.user_id else m.group.name,
                        "kind": "account" if m.user_id else "group", "roles": roles})
    return {"members": members, "databases": workspace.databases.order_by("name"),
            "exemplar_sets": workspace.exemplar_sets.order_by("name")}


def strategy_list() -> list[dict]:
    """Every strategy with every option it takes, as declared once in its config (type, default, bounds, help),
    and whether it needs an example pool (then only a run over a dataset starts it)."""
    return [{"name": name, "title": cls.display_name(), "needs_pool": cls.needs_pool,
             "options": option_specs(cls.config_class)} for name, cls in sorted(STRATEGIES.items())]


def access_granters(*, limit: int = 5) -> list[str]:
    """Who can give roles and grant databases (active Data admins, else superusers): named on refusal pages."""
    from django.contrib.auth import get_user_model

    from agent.roles import DATA_ADMIN

    users = get_user_model().objects.filter(is_active=True)
    names = list(users.filter(groups__name=DATA_ADMIN).order_by("username")
                 .values_list("username", flat=True).distinct()[:limit])
    return names or list(users.filter(is_superuser=True).order_by("username").values_list("username", flat=True)[:limit])


def answer_feedback_recent(*, viewer, verdict: str | None = None, limit: int = 20):
    """Verdicts on answers of sessions the viewer may see, newest first, with their sessions and authors."""
    qs = AnswerFeedback.objects.filter(session__in=policies.visible_sessions(viewer))
    if verdict:
        qs = qs.filter(verdict=verdict)
    return qs.select_related("session", "session__database", "author").order_by("-updated_at")[:limit]


def answer_feedback_counts(*, viewer) -> dict[str, int]:
    """How many answers the viewer may see were judged right and wrong (one verdict per person and answer)."""
    rows = (AnswerFeedback.objects.filter(session__in=policies.visible_sessions(viewer))
            .values("verdict").annotate(n=Count("id")))
    counts = {"right": 0, "wrong": 0}
    counts.update({r["verdict"]: r["n"] for r in rows})
    return counts
