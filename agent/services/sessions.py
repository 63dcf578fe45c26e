"""Agent sessions: create, run (in a Celery worker), cancel, and recover after a dead worker.

Running a session is idempotent. A worker claims a session with a lease (an
atomic UPDATE), stores each turn in its own transaction as soon as the
strategy reports it (unique ``(session, index)``), and keeps a heartbeat
while it runs. A re-delivered or recovered session resumes from its stored
turns without calling the LLM again for them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import DatabaseError, IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.db.models import DateTimeField, F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent import signals
from agent.conf import agent_settings
from agent.hygiene import clean_instance, cleaned_json
from agent.llm import LLMClient, LLMSettings, Message, PriceTable
from agent.models import AgentSession, Database, ExamplePool, LLMEndpoint, Turn
from agent.services import spend
from agent.sql import ForeignKey as SchemaForeignKey
from agent.strategies import (
    STRATEGIES,
    FewShot,
    SessionContext,
    TurnRecord,
    create_strategy,
    follow_up_question,
)
from agent.strategies.authors_rules import MISSING_FOREIGN_KEYS
from agent.strategies.interactive_t2s import PAPER_REPLICA_OPTIONS
from agent.strategies.options import option_errors
from agent.strategies.pool import PoolExample, PoolExclusion
from agent.textclean import clean_json, clean_text
from agent.tools import IndexMissing

from . import budgets, feedback, gates, leases
from . import few_shot as few_shot_source
from .databases import open_connector, thread_sandbox, toolbox_for


def check_option_types(strategy: str, options: Mapping[str, Any]) -> None:
    """A ValidationError on ``options`` naming each option of the wrong type (``max_rounds: "8"``), before any
    config is built: a caller gets a field error, never a Python message."""
    if not isinstance(options, Mapping):
        raise ValidationError({"options": ["options must be an object."]})
    errors = option_errors(STRATEGIES[strategy].config_class, options)
    if errors:
        raise ValidationError({"options": errors})


logger = logging.getLogger(__name__)

MAX_QUESTION_CHARS = 4000
MAX_ATTEMPTS = leases.MAX_ATTEMPTS
RESULT_PREVIEW_ROWS = 50
RUN_SESSION_TASK = leases.RUN_SESSION_TASK


class LeaseLost(Exception):
    """Another worker took the session over (this one was presumed dead)."""


# --- LLM configuration -----------------------------------------------------------------


def default_llm_endpoint() -> LLMEndpoint | None:
    """The endpoint marked default, else one described by the environment (not saved)."""
    endpoint = LLMEndpoint.objects.filter(is_default=True).first()
    if endpoint is not None:
        return endpoint
    model = agent_settings.LLM_MODEL
    if not model:
        return None
    return LLMEndpoint(name="environment", base_url=agent_settings.LLM_BASE_URL, model=model,
                       api_key_env=agent_settings.LLM_API_KEY_ENV,
                       max_concurrency=max(1, int(agent_settings.LLM_MAX_CONCURRENCY)))


def llm_snapshot(endpoint: LLMEndpoint) -> dict[str, Any]:
    prices = {}
    if endpoint.input_price_per_mtok is not None and endpoint.output_price_per_mtok is not None:
        prices = {endpoint.model: {"input_per_mtok": float(endpoint.input_price_per_mtok),
                                   "output_per_mtok": float(endpoint.output_price_per_mtok)}}
    return {"endpoint": endpoint.name, "base_url": endpoint.base_url or None, "model": endpoint.model,
            "api_key_env": endpoint.api_key_env, "prices": prices,
            "timeout_s": float(endpoint.timeout_s), "max_retries": int(endpoint.max_retries)}


_clients: dict[tuple, LLMClient] = {}
_clients_lock = threading.Lock()


def endpoint_from_snapshot(snapshot: Mapping[str, Any]) -> LLMEndpoint:
    """The endpoint a snapshot names: the saved record when it still exists (with the same model), else an
    unsaved copy of the snapshot."""
    saved = LLMEndpoint.objects.filter(name=snapshot.get("endpoint")).first() if snapshot.get("endpoint") else None
    if saved is not None and saved.model == snapshot.get("model"):
        return saved
    prices = (snapshot.get("prices") or {}).get(snapshot.get("model"), {})
    return LLMEndpoint(name=snapshot.get("endpoint") or "snapshot", base_url=snapshot.get("base_url") or "",
                       model=snapshot["model"], api_key_env=snapshot.get("api_key_env") or "",
                       input_price_per_mtok=prices.get("input_per_mtok"),
                       output_price_per_mtok=prices.get("output_per_mtok"),
                       **{k: snapshot[k] for k in ("timeout_s", "max_retries") if snapshot.get(k) is not None})


def llm_client_from_snapshot(snapshot: Mapping[str, Any]) -> LLMClient:
    """A client per endpoint, shared by the sessions of this process (its connections stay open between calls)."""
    key_env = snapshot.get("api_key_env") or ""
    # Checked again when the key is read: a snapshot or record from before the allowlist sends nothing else.
    api_key = os.environ.get(key_env) if key_env and spend.api_key_env_allowed(key_env) else None
    prices = snapshot.get("prices") or {}
    # The endpoint's own timeout and retries (snapshots from before they existed get the client's defaults).
    limits = {k: snapshot[k] for k in ("timeout_s", "max_retries") if snapshot.get(k) is not None}
    outage_budget_s = float(agent_settings.LLM_OUTAGE_BUDGET_S)
    cache_key = (snapshot.get("base_url"), api_key, snapshot["model"], repr(sorted(prices.items())),
                 repr(sorted(limits.items())), outage_budget_s)
    with _clients_lock:
        client = _clients.get(cache_key)
        if client is None:
            settings = LLMSettings(base_url=snapshot.get("base_url"), api_key=api_key, model=snapshot["model"],
                                   prices=PriceTable.from_dict(prices), outage_budget_s=outage_budget_s, **limits)
            client = _clients[cache_key] = LLMClient(settings)
        return client


def _waiting_for_llm(session_id: int) -> Callable[[str | None], None]:
    """Marks a running session as waiting out an LLM provider outage (``failure``), or no longer (None)."""

    def note(failure: str | None) -> None:
        if failure is not None:
            logger.warning("session %s waits for its LLM provider: %s", session_id, failure)
        try:
            AgentSession.objects.filter(pk=session_id).update(
                waiting_for_llm_since=timezone.now() if failure is not None else None)
        except DatabaseError:  # only a display: the call goes on, and the next note may land
            logger.warning("could not note session %s waiting for its LLM provider", session_id, exc_info=True)

    return note


# --- create / cancel ---------------------------------------------------------------------

# Why a strategy that declares ``needs_pool`` is not offered for a single question (the Ask page's picker).
NEEDS_POOL_SHORT = "needs a retrieval pool: run it over a dataset"


def pool_refusal(strategy: str) -> str | None:
    """Why ``strategy`` cannot answer a question asked on its own (None: it can, or it is unknown).

    A single question (Ask, the sessions API, ``ask``, a follow-up) has no example pool, and an exemplar set
    chosen for it does not stand in for one: a method that retrieves its examples from a pool is refused here
    rather than run with an empty one and shown as if it were its paper's."""
    cls = STRATEGIES.get(strategy)
    if cls is None or not cls.needs_pool:
        return None
    return (f"{cls.display_name()} {NEEDS_POOL_SHORT}. It retrieves its few-shot examples from an example "
            "pool, and a question asked on its own has none; launch a run of it over a dataset with an example "
            "pool instead (the run form's Example pool, pool in the runs API, run --pool).")



def session_create(
    *, database: Database, question: str, evidence: str = "", strategy: str = "interactive_t2s",
    options: Mapping[str, Any] | None = None, user=None, endpoint: LLMEndpoint | None = None,
    few_shot: FewShot | None = None, zero_shot: bool = False, paper_replica: bool = False,
    enqueue: bool = True, example_pool: ExamplePool | None = None, question_key: str | None = None,
    billed_to=None, pool_exclusion: Mapping[str, Any] | None = None, follow_up_of: AgentSession | None = None,
) -> AgentSession:
    """Validate, snapshot the configuration, store the session, and queue it after commit.

    ``few_shot`` holds the exemplars, resolved by the caller (e.g. from an immutable exemplar set
    version, see ``agent.services.few_shot``); the snapshot keeps them and where they came from, so
    a resumed session prompts with the same ones. Without them, the Interactive-T2S agent gets the
    paper's set that fits the database (the paper is always 2-shot; ``few_shot_source.default_for``)
    unless ``zero_shot`` asks for none; the snapshot's ``exemplars_choice`` says which happened.
    ``example_pool`` is what retrieving strategies draw examples from (without one, a strategy that declares
    ``needs_pool`` is refused: ``pool_refusal``); ``question_key`` is this question's
    key in such a pool (a run over a dataset sets it), never retrieved; ``pool_exclusion`` is all that the question
    may not retrieve (``agent.strategies.pool.PoolExclusion.to_dict()``: its database, its duplicates).
    ``billed_to``: whose daily budget the session's LLM calls count to (default: ``user``; a run's sessions: its
    launcher, while ``created_by`` stays empty, as nobody asked them by hand).
    ``paper_replica`` is the preset of the agent as the paper's authors ran it: their exemplars (unless a set
    is chosen), their observation formats and their code's switches (README, "Fidelity to the paper").
    ``follow_up_of``: the session this one continues, on the same database; its question, answer and earlier
    turns are snapshot into the config and sent with the question.
    """
    question, errors = _question_errors(question)
    if example_pool is None and (refusal := pool_refusal(strategy)):
        errors["strategy"] = [refusal]
    if follow_up_of is not None and follow_up_of.database_id != database.pk:
        errors["database"] = ["A follow-up question is asked on the database of the conversation."]
    endpoint = endpoint or default_llm_endpoint()
    owner = user if user is not None and user.is_authenticated else None
    if billed_to is None or not billed_to.is_authenticated:
        billed_to = owner
    config = _checked_config(errors, database=database, strategy=strategy, options=options, endpoint=endpoint,
                             few_shot=few_shot, zero_shot=zero_shot, paper_replica=paper_replica,
                             example_pool=example_pool, question_key=question_key, billed_to=billed_to)
    if config:
        config["pool_exclusion"] = dict(pool_exclusion) if pool_exclusion else None
    if errors:
        raise ValidationError(errors)
    if follow_up_of is not None:
        config = {**config, "conversation": feedback.follow_up_context(parent=follow_up_of)}
    with transaction.atomic():
        session = AgentSession.objects.create(
            database=database, question=question, evidence=(evidence or "").strip(), strategy=strategy,
            model=session_model(config), config=config, llm_endpoint=endpoint if endpoint.pk else None,
            queued_at=timezone.now(),
            created_by=owner, billed_to=billed_to, follow_up_of=follow_up_of,
        )
        if enqueue:
            session_enqueue(session=session)
    return session


def _question_errors(question: str | None) -> tuple[str, dict[str, list[str]]]:
    question = (question or "").strip()
    if not question:
        return question, {"question": ["Write a question."]}
    if len(question) > MAX_QUESTION_CHARS:
        return question, {"question": [f"At most {MAX_QUESTION_CHARS} characters."]}
    return question, {}


def _checked_config(errors: dict[str, list[str]], *, database: Database, strategy: str,
                    options: Mapping[str, Any] | None, endpoint: LLMEndpoint | None, few_shot: FewShot | None,
                    zero_shot: bool, paper_replica: bool, example_pool: ExamplePool | None,
                    question_key: str | None, billed_to) -> dict[str, Any]:
    """The session's configuration snapshot, adding to ``errors`` whatever forbids starting it."""
    if database.status != Database.Status.READY:
        errors["database"] = [f"{database.name} is not ready ({database.get_status_display()})."]
    elif database.index_status not in (Database.IndexStatus.READY, Database.IndexStatus.STALE):
        errors["database"] = [f"The tool indexes of {database.name} are not ready "
                              f"({database.get_index_status_display()}); try again in a moment."]
    if strategy not in STRATEGIES:
        errors["strategy"] = [f"Unknown strategy; choose one of {', '.join(sorted(STRATEGIES))}."]
    if endpoint is None:
        errors["llm"] = ["No LLM endpoint is configured: set OPENAI_BASE_URL, OPENAI_API_KEY and T2S_LLM_MODEL "
                         "(see README), or add a default endpoint in the admin."]
    if billed_to is not None:
        used_up = budgets.budget_used_up(billed_to)
        if used_up:
            errors["budget"] = [used_up]
    if paper_replica:
        if strategy != DEFAULT_EXEMPLARS_STRATEGY:
            errors["strategy"] = ["The paper-replica preset is the Interactive-T2S agent."]
        if zero_shot:
            errors["zero_shot"] = ["The paper-replica preset uses the paper's exemplars, never zero-shot."]
        options = {**dict(options or {}), **PAPER_REPLICA_OPTIONS}
    if errors:
        return {}
    try:
        spend.check_api_key_env(endpoint.api_key_env)
        check_option_types(strategy, options or {})
        config, snapshot = _strategy_config(strategy, spend.bounded_options(
            options or {}, endpoint=endpoint, defaults=_strategy_config(strategy, {})[1]))
    except ValidationError as exc:
        errors.update(exc.message_dict)
        return {}
    except (TypeError, ValueError) as exc:
        errors["options"] = [str(exc)]
        return {}
    choice = "chosen" if few_shot is not None else "zero-shot"
    if few_shot is None and not zero_shot and strategy == DEFAULT_EXEMPLARS_STRATEGY:
        few_shot = few_shot_source.default_for(
            database, use_evidence=bool(getattr(config, "use_evidence", True)))
        choice = "default" if few_shot is not None else "zero-shot (no paper set published)"
    return {"strategy": snapshot, "llm": llm_snapshot(endpoint),
            "exemplar_set_version": dict(few_shot.source) if few_shot and few_shot.source else None,
            "few_shot": few_shot.to_dict() if few_shot else None,
            "example_pool": example_pool_snapshot(example_pool), "question_key": question_key,
            "exemplars_choice": choice,
            "exemplar_warnings": _exemplar_warnings(few_shot, config, billed_to),
            "preset": "paper-replica" if paper_replica else None}


def _strategy_config(strategy: str, options: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The strategy's config for these options (a frozen dataclass) and a fresh copy of its snapshot
    (``to_dict``), built once per process and options (a run asks for the same ones at every start). Raises as
    ``create_strategy`` does."""
    try:
        key = json.dumps(options, sort_keys=True)
    except (TypeError, ValueError):  # not JSON: not cached (never the case for a run's stored options)
        config = create_strategy(strategy, options).config
        return config, config.to_dict()
    config, snapshot = _strategy_config_of(strategy, key)
    return config, json.loads(snapshot)


@functools.lru_cache(maxsize=256)
def _strategy_config_of(strategy: str, options_json: str) -> tuple[Any, str]:
    config = create_strategy(strategy, json.loads(options_json)).config
    return config, json.dumps(config.to_dict())


@dataclass(frozen=True)
class SessionSpec:
    """One session of a batch (``session_create_many``): what differs from one question to the next."""

    database: Database
    question: str
    evidence: str = ""
    options: Mapping[str, Any] | None = None
    question_key: str | None = None
    # What the question may not retrieve from the run's pool (agent.strategies.pool.PoolExclusion.to_dict()).
    pool_exclusion: Mapping[str, Any] | None = None


def session_create_many(*, specs: Sequence[SessionSpec], strategy: str, endpoint: LLMEndpoint,
                        few_shot: FewShot | None = None, zero_shot: bool = False,
                        example_pool: ExamplePool | None = None,
                        billed_to=None) -> list[AgentSession | ValidationError]:
    """Sessions of one configuration (a run's next questions), each checked as ``session_create`` checks one,
    stored with one INSERT and queued after commit; for each spec, its session or why it was refused.

    The checks that do not depend on the question (the database's state, the options, the budget, the
    snapshot) run once per distinct database and options, not once per session: a run that starts 8 sessions
    pays for them about what one costs.
    """
    if billed_to is not None and not billed_to.is_authenticated:
        billed_to = None
    checked: dict[tuple, tuple[dict[str, Any], dict[str, list[str]]]] = {}
    out: list[AgentSession | ValidationError] = []
    rows: list[AgentSession] = []
    now = timezone.now()
    for spec in specs:
        question, errors = _question_errors(spec.question)
        key = (spec.database.pk, spec.database.status, spec.database.index_status,
               json.dumps(spec.options or {}, sort_keys=True, default=str))
        if key not in checked:
            config_errors: dict[str, list[str]] = {}
            config = _checked_config(config_errors, database=spec.database, strategy=strategy, options=spec.options,
                                     endpoint=endpoint, few_shot=few_shot, zero_shot=zero_shot, paper_replica=False,
                                     example_pool=example_pool, question_key=None, billed_to=billed_to)
            # Cleaned once here, not once per session by clean_instance below: the sessions of a key share it.
            checked[key] = (cleaned_json(config), config_errors)
        config, config_errors = checked[key]
        errors = {**errors, **config_errors}
        if errors:
            out.append(ValidationError(errors))
            continue
        # Cleaned here: bulk_create sends no pre_save signal (agent.hygiene).
        session = clean_instance(AgentSession(
            database=spec.database, question=question, evidence=(spec.evidence or "").strip(), strategy=strategy,
            model=session_model(config), config={**config, "question_key": cleaned_json(spec.question_key),
                                                 "pool_exclusion": cleaned_json(spec.pool_exclusion)},
            llm_endpoint=endpoint if endpoint.pk else None, queued_at=now, billed_to=billed_to),
            clean_already=("config",))
        rows.append(session)
        out.append(session)
    with transaction.atomic(savepoint=False):  # a run's pass calls this in its own transaction: no savepoint
        AgentSession.objects.bulk_create(rows)  # ids set on both vendors (RETURNING)
        leases.publish_many([session.pk for session in rows])
    return out


def session_model(config: Mapping[str, Any]) -> str:
    """The model a session's calls use: the strategy's choice (an allowed model of the endpoint), else the endpoint's."""
    model = (config.get("strategy") or {}).get("model") or (config.get("llm") or {}).get("model") or ""
    return str(model)[:200]


def _few_shot(config: Mapping[str, Any]) -> FewShot:
    """The snapshot's exemplars and their own tool description (None: the agent's generated one)."""
    return FewShot.from_dict(config.get("few_shot") or {})


def example_pool_snapshot(pool: ExamplePool | None) -> dict[str, Any] | None:
    if pool is None:
        return None
    return {"id": pool.pk, "source": pool.source, "size": pool.size, "digest": pool.digest}


def example_pool_store(*, source: str, examples: Sequence[PoolExample]) -> ExamplePool:
    """The stored pool with exactly these examples (content-addressed: the same content is stored once)."""
    items = [e.to_dict() for e in examples]
    digest = hashlib.sha256(json.dumps(items, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    pool, _ = ExamplePool.objects.get_or_create(digest=digest, defaults={
        "source": source[:300], "size": len(items), "examples": items})
    return pool


@functools.lru_cache(maxsize=8)
def _pool_examples(pool_id: int, digest: str) -> tuple[PoolExample, ...]:
    """A pool's examples, read once per worker process (pools are immutable; the digest guards the cache)."""
    pool = ExamplePool.objects.get(pk=pool_id, digest=digest)
    return tuple(PoolExample.from_dict(e) for e in pool.examples)


def _pool_exclusion(config: Mapping[str, Any]) -> PoolExclusion | None:
    stored = config.get("pool_exclusion")
    return PoolExclusion.from_dict(stored) if stored else None


def _example_pool(config: Mapping[str, Any]) -> tuple[PoolExample, ...]:
    snapshot = config.get("example_pool")
    return _pool_examples(int(snapshot["id"]), str(snapshot["digest"])) if snapshot else ()


# The paper's exemplar sets are trajectories of its ReAct agent; the pipeline strategies take a set only when
# one is picked (their papers prompt differently).
DEFAULT_EXEMPLARS_STRATEGY = "interactive_t2s"


def _exemplar_databases(few_shot: FewShot, user=None) -> list[tuple[str | None, Database | None]]:
    """Each exemplar's source database name, and that database when it is registered, ready here and granted
    to ``user`` (whoever the session acts for): an exemplar's calls are never run on a database its user may
    not query, whatever set version brought it."""
    names = list(few_shot.databases) or [None] * len(few_shot.exemplars)
    ready = {db.name: db for db in Database.objects.granted_to(user).filter(
        name__in=[n for n in names if n], status=Database.Status.READY)}
    return [(name, ready.get(name) if name else None) for name in names]


def _exemplar_warnings(few_shot: FewShot | None, config, user=None) -> list[str]:
    """Exemplars whose observations cannot be produced again in the session's profile (their database is
    not registered here, or not granted to the session's user): their stored text is sent as written, or, in
    the default profile, rewritten from the authors' format (agent.tools.authors_reprs)."""
    if few_shot is None or not hasattr(config, "observation_profile"):
        return []
    if getattr(config, "prompt_format", "default") == "paper":
        return []  # the authors' prompt sends their exemplar text as written, by design
    if config.observation_profile == "default":
        how = "are rewritten from their stored text into the 'default' format, not run again"
    else:
        how = f"are sent as stored, not rendered in the {config.observation_profile!r} profile"
    return [f"Exemplar {i} ({name or 'no database'}): its database is not one you may query here, so its "
            f"observations {how}." for i, (name, db) in enumerate(_exemplar_databases(few_shot, user), 1)
            if db is None]


def session_acting_user(session: AgentSession):
    """Whom a session acts for: who asked it, else whose budget it spends (a run's launcher); None for neither."""
    return session.created_by or session.billed_to


def _exemplars_for(few_shot: FewShot, strategy, user=None) -> tuple:
    """The exemplars as the prompt gets them. For a strategy with an observation profile, each exemplar whose
    database is registered and granted to ``user`` has its tool calls run again there and its observations
    written in that profile, exactly as live ones are; the others keep their stored text (the session's
    ``exemplar_warnings``). Without a user, nothing is run again."""
    cfg = getattr(strategy, "config", None)
    if cfg is None or not hasattr(cfg, "observation_profile") or not few_shot.exemplars:
        return few_shot.exemplars
    if getattr(cfg, "prompt_format", "default") == "paper":
        return few_shot.exemplars  # the authors' prompt: their exemplar files as written
    return tuple(_rerender(shot, db, cfg) if db is not None else _rewrite_stored(shot, cfg)
                 for shot, (_, db) in zip(few_shot.exemplars, _exemplar_databases(few_shot, user), strict=True))


def _rewrite_stored(shot, cfg):
    """An exemplar whose database is not here: in the default profile its stored observations (the authors'
    reprs) are rewritten in the default format, so examples and live steps show one format."""
    if cfg.observation_profile != "default":
        return shot
    from agent.strategies.exemplars import rewritten
    from agent.strategies.interactive_t2s import clip_observation
    from agent.tools.authors_reprs import default_from_authors

    return rewritten(shot, lambda name, args, kwargs, stored: clip_observation(
        default_from_authors(name, args, kwargs, stored), cfg.max_observation_chars))


def _rerender(shot, database: Database, cfg):
    from agent.strategies.exemplars import rerendered
    from agent.strategies.interactive_t2s import clip_observation

    with toolbox_for(database, profile=cfg.observation_profile,
                     column_ranking=getattr(cfg, "column_ranking", "index")) as tools:
        return rerendered(shot, lambda name, args, kwargs: clip_observation(
            tools.run(name, args, kwargs).observation, cfg.max_observation_chars))


def _authors_foreign_keys(database: Database, cfg) -> tuple[SchemaForeignKey, ...]:
    """The keys the authors added to this Spider database (by its name), when the config asks for them."""
    if not getattr(cfg, "authors_foreign_keys", False):
        return ()
    return tuple(SchemaForeignKey(table, (column,), ref_table, (ref_column,))
                 for table, column, ref_table, ref_column in MISSING_FOREIGN_KEYS.get(database.name, ()))


def session_enqueue(*, session: AgentSession) -> None:
    """Publish the session's task after commit; a failed publish leaves it QUEUED for the recovery sweep."""
    leases.publish(session.pk)


def session_cancel(*, session: AgentSession) -> AgentSession:
    """Ask a running session to stop after its current step; a queued one stops at once."""
    now = timezone.now()
    AgentSession.objects.filter(pk=session.pk, status=AgentSession.Status.QUEUED).update(
        status=AgentSession.Status.CANCELLED, cancel_requested=True, finished_at=now, error="Cancelled.")
    AgentSession.objects.filter(pk=session.pk, status=AgentSession.Status.RUNNING).update(cancel_requested=True)
    session.refresh_from_db()
    return session


# --- run -----------------------------------------------------------------------------------

# Faults that say nothing about the session itself: the app database or the broker was away for a moment.
# The session is released (or left to the stale sweep) and runs again from its stored turns; never FAILED.
# Redis errors too: with a Redis broker the LLM call slots live there (llm_slots), and a broker restart is transient.
TRANSIENT_FAULTS: tuple[type[BaseException], ...] = (OperationalError, InterfaceError, KombuOperationalError,
                                                     RedisConnectionError, RedisTimeoutError)


class SessionInterrupted(Exception):
    """A transient fault stopped the session; it is queued again (or will be by the sweep) and resumes."""


def _claim(session_id: int) -> str | None:
    """Take the lease if the session is queued, or running under a worker that stopped beating (one UPDATE:
    two workers given the same session never both take it; ``started_at`` is set on the first claim only)."""
    lease = leases.new_lease()
    now = timezone.now()
    stale = now - timedelta(seconds=agent_settings.SESSION_STALE_AFTER_S)
    claimable = Q(status=AgentSession.Status.QUEUED) | Q(
        Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True), status=AgentSession.Status.RUNNING)
    claimed = AgentSession.objects.filter(claimable, pk=session_id).update(
        status=AgentSession.Status.RUNNING, lease=lease, heartbeat_at=now, attempts=F("attempts") + 1,
        started_at=Coalesce("started_at", Value(now, output_field=DateTimeField())))
    return lease if claimed else None


def session_records(session: AgentSession) -> list[TurnRecord]:
    """The stored turns as the strategy reported them, prompts rebuilt in full."""
    records, previous = [], []
    for turn in Turn.objects.for_session(session):
        messages = previous[: turn.prompt_prefix_len] + [Message.from_dict(m) for m in turn.prompt]
        records.append(turn.to_record(messages))
        previous = messages
    return records


def _store_turn(session_id: int, lease: str, record: TurnRecord, previous_messages: list[Message]) -> None:
    messages = list(record.messages)
    prefix = len(previous_messages) if messages[: len(previous_messages)] == previous_messages else 0
    turn = Turn.from_record(record, session_id=session_id, prompt=messages[prefix:], prompt_prefix_len=prefix)
    try:
        # Two statements: the turn, then the session's counters and heartbeat under its lease. A lost lease
        # rolls the turn back; a turn stored already fails the insert (unique (session, index)).
        with transaction.atomic():
            turn.save(force_insert=True)
            counted = AgentSession.objects.filter(pk=session_id, lease=lease).update(
                heartbeat_at=timezone.now(), rounds=F("rounds") + (1 if record.completion is not None else 0),
                tool_calls=F("tool_calls") + (1 if record.tool_latency_ms is not None else 0),
                prompt_tokens=F("prompt_tokens") + int(record.prompt_tokens),
                completion_tokens=F("completion_tokens") + int(record.completion_tokens),
                llm_latency_ms=F("llm_latency_ms") + float(record.llm_latency_ms or 0),
                tool_latency_ms=F("tool_latency_ms") + float(record.tool_latency_ms or 0))
            if not counted:
                raise LeaseLost(session_id)
    except IntegrityError:
        # Already stored by an earlier delivery of this session: never a duplicate, nor counted twice.
        logger.info("turn %s of session %s already stored", record.index, session_id)
        if not AgentSession.objects.filter(pk=session_id, lease=lease).update(heartbeat_at=timezone.now()):
            raise LeaseLost(session_id) from None


def result_preview(result) -> dict[str, Any] | None:
    return result.to_json(max_rows=RESULT_PREVIEW_ROWS) if result is not None else None


def session_execute(*, session_id: int) -> None:
    """Run (or resume) one session in this process. Safe to call twice: the second call does nothing.

    Raises ``SessionInterrupted`` when the app database or the broker failed on the way (the caller may
    retry later): the session is then QUEUED again, or, when even that write failed, left RUNNING for the
    stale sweep. Stored turns are never redone; only an LLM call whose turn was not stored is repeated.
    """
    try:
        lease = _claim(session_id)
    except TRANSIENT_FAULTS as exc:
        _close_connection()
        raise SessionInterrupted(f"session {session_id} could not be claimed: {exc}") from exc
    if lease is None:
        return
    keeper = leases.keeper()
    keeper.hold(session_id, lease)
    started = time.monotonic()
    finished = False
    interrupted: BaseException | None = None
    with ExitStack() as cleanup:  # closes the tools' connector however the session ends
        try:
            session = AgentSession.objects.select_related("database", "billed_to", "created_by").get(pk=session_id)
            previous = session_records(session)
            strategy = create_strategy(session.strategy, session.config.get("strategy") or {})
            # The thread's SQLite query process serves session after session (a child per session was costly).
            tools = cleanup.enter_context(toolbox_for(
                session.database, enabled=getattr(strategy.config, "enabled_tools", None),
                profile=getattr(strategy.config, "observation_profile", "default"),
                column_ranking=getattr(strategy.config, "column_ranking", "index"),
                extra_foreign_keys=_authors_foreign_keys(session.database, strategy.config),
                connector=open_connector(session.database, sandbox=thread_sandbox())))
            # Every call passes the session's gate: the daily budget, then an endpoint slot (agent/services/gates.py).
            deadline = started + float(agent_settings.SESSION_MAX_SECONDS)
            # The wall-clock limit cuts a call in flight too (its timeout and retries end at the deadline).
            client = llm_client_from_snapshot(session.config["llm"])
            llm = gates.gated(client.bounded(deadline, on_outage=_waiting_for_llm(session_id)),
                              user=session.billed_to, llm_snapshot=session.config["llm"], deadline=deadline)
            few_shot = _few_shot(session.config)
            # A follow-up is asked with the conversation it continues (snapshot taken when it was created).
            question = follow_up_question(session.question, session.config.get("conversation") or ())
            ctx = SessionContext(question=question, schema=tools.schema, evidence=session.evidence or None,
                                 exemplars=_exemplars_for(few_shot, strategy, session_acting_user(session)),
                                 tool_description=few_shot.tool_description,
                                 example_pool=_example_pool(session.config),
                                 question_key=session.config.get("question_key") or None,
                                 pool_exclusion=_pool_exclusion(session.config),
                                 tool_description_no_findpath=few_shot.tool_description_no_findpath,
                                 database_name=session.database.name,
                                 exemplar_databases=tuple(few_shot.databases))
            last_messages = list(previous[-1].messages) if previous else []

            def on_turn(record: TurnRecord) -> None:
                nonlocal last_messages
                if keeper.lost(session_id):
                    raise LeaseLost(session_id)
                _store_turn(session_id, lease, record, last_messages)
                last_messages = list(record.messages)

            def should_cancel() -> bool:  # asked before each round; a stop request arrives with the next beat
                return time.monotonic() > deadline or session.cancel_requested or keeper.cancelled(session_id)

            outcome = strategy.run(ctx, tools=tools, llm=llm, on_turn=on_turn, previous_turns=previous,
                                   should_cancel=should_cancel)
            status = outcome.status.value
            error = outcome.error or ""
            if status in (AgentSession.Status.CANCELLED, AgentSession.Status.LLM_ERROR) and time.monotonic() >= deadline:
                status, error = AgentSession.Status.FAILED, f"Stopped at the session time limit " \
                                                            f"({agent_settings.SESSION_MAX_SECONDS} s)."
            cost = outcome.totals.cost
            finished = _finish(session_id, lease, status=status, error=error, final_sql=outcome.final_sql or "",
                               result=result_preview(outcome.result), cost=cost, started=started)
        except LeaseLost:
            logger.warning("session %s was taken over by another worker", session_id)
        except TRANSIENT_FAULTS as exc:
            logger.warning("session %s interrupted by a transient fault: %s", session_id, exc)
            interrupted = exc
        except IndexMissing as exc:
            finished = _finish(session_id, lease, status=AgentSession.Status.FAILED, started=started,
                               error=f"The tool indexes of {session.database.name} are not built yet: {exc}")
        except Exception as exc:
            logger.exception("session %s failed", session_id)
            finished = _finish(session_id, lease, status=AgentSession.Status.FAILED, started=started,
                               error=f"{type(exc).__name__}: {exc}")
        finally:
            keeper.release(session_id)
    if interrupted is not None:
        _release(session_id, lease)
        raise SessionInterrupted(f"session {session_id}: {interrupted}") from interrupted
    if finished:
        signals.session_finished.send_robust(sender=AgentSession, session_id=session_id)


def _close_connection() -> None:
    """Drop this thread's database connection if a fault broke it (or it is past its age), so the next query
    opens a new one (after a restart)."""
    if connection.in_atomic_block:  # a caller's transaction (a test, an inline caller): not ours to drop
        return
    try:
        connection.close_if_unusable_or_obsolete()
    except Exception:  # a connection that is already broken may fail to close; it is discarded all the same
        logger.debug("closing a broken connection failed", exc_info=True)


def _release(session_id: int, lease: str) -> None:
    """Queue an interrupted session again; if the database is still away, the stale sweep will."""
    _close_connection()
    try:
        leases.requeue(session_id=session_id, lease=lease)
    except TRANSIENT_FAULTS as exc:
        logger.warning("session %s stays RUNNING until the stale sweep requeues it: %s", session_id, exc)
        _close_connection()


def _finish(session_id: int, lease: str, *, status: str, error: str, started: float, final_sql: str = "",
            result: dict | None = None, cost: float | None = None) -> bool:
    """Store the outcome while this worker still holds the lease; True when it did."""
    # update() sends no pre_save: outside text (the model's SQL, cells, messages) is cleaned here.
    now = timezone.now()
    return bool(AgentSession.objects.filter(pk=session_id, lease=lease).update(
        status=status, error=clean_text(error), final_sql=clean_text(final_sql), result=clean_json(result),
        cost=cost, finished_at=now, elapsed_ms=(time.monotonic() - started) * 1000, heartbeat_at=now))


def sessions_recover_stale(*, stale_after_s: float | None = None, max_attempts: int = MAX_ATTEMPTS) -> dict:
    """Sessions whose worker died: queue them again to resume, or fail them after too many attempts; and
    sessions still QUEUED long after their message was published (a broker that lost it): publish again."""
    out = leases.recover_stale(stale_after_s=stale_after_s, max_attempts=max_attempts)
    out["republished"] = leases.republish_queued()
    return out
