"""Reads of exemplars and exemplar set versions (no writes here)."""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent.strategies.parsing import ActionParseError, parse_action
from agent.strategies.prompt import Exemplar as PromptExemplar
from agent.strategies.prompt import (
    FewShot,
    Step,
    build_messages,
    dialect_label,
    estimate_message_tokens,
    estimate_tokens,
    render_exemplar,
    schema_text,
    system_prompt,
)
from annotations.models import Exemplar, ExemplarSetVersion, ExemplarStep

PROMPT_KEYS = ("schema_text", "question", "evidence", "steps", "final_sql")
SNAPSHOT_KEYS = ("exemplar_id", "database", *PROMPT_KEYS, "notes", "tags")


def exemplars_for_version(version: ExemplarSetVersion) -> tuple[PromptExemplar, ...]:
    """The version's exemplars, in order, as the agent's prompt takes them (``SessionContext.exemplars``)."""
    return exemplars_from_items(version.exemplars)


def exemplar_schema_text(exemplar: Exemplar) -> str:
    """The stored schema text (imported exemplars), else the registered database's current schema."""
    if exemplar.schema_text.strip():
        return exemplar.schema_text
    info = exemplar.database.schema_info() if exemplar.database_id else None
    return schema_text(info) if info is not None else ""


def exemplar_steps(exemplar: Exemplar) -> list[ExemplarStep]:
    return list(exemplar.steps.order_by("position"))


def exemplar_snapshot(exemplar: Exemplar) -> dict[str, Any]:
    """The frozen content of one exemplar as a set version stores it."""
    return {
        "exemplar_id": exemplar.pk,
        "database": exemplar.database.name if exemplar.database_id else (exemplar.source_database or None),
        "schema_text": exemplar_schema_text(exemplar),
        "question": exemplar.question,
        "evidence": exemplar.evidence or None,
        "steps": [Step(s.thought, s.action, s.observation).to_dict() for s in exemplar_steps(exemplar)],
        "final_sql": exemplar.final_sql or None,
        "notes": exemplar.notes,
        "tags": list(exemplar.tags or []),
    }


def prompt_exemplar(exemplar: Exemplar) -> PromptExemplar:
    """The exemplar's current (unpublished) content in the agent's prompt form."""
    snap = exemplar_snapshot(exemplar)
    return PromptExemplar.from_dict({k: snap[k] for k in PROMPT_KEYS})


def content_hash(*, tool_description: str, exemplars: Sequence[Mapping[str, Any]],
                 tool_description_no_findpath: str = "") -> str:
    """Hash of what a version publishes (ids of the source rows excluded, so an imported copy hashes the same)."""
    body: dict[str, Any] = {"tool_description": tool_description,
                            "exemplars": [{k: v for k, v in e.items() if k != "exemplar_id"} for e in exemplars]}
    if tool_description_no_findpath:  # absent from older versions' hashes, which stay valid
        body["tool_description_no_findpath"] = tool_description_no_findpath
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def prompt_preview(*, database, question: str, evidence: str | None, enabled_tools: Sequence[str],
                   use_evidence: bool, exemplars: Sequence[PromptExemplar], tool_description: str = "",
                   tool_description_no_findpath: str = "") -> dict[str, Any]:
    """The exact first messages a session on ``database`` would send with these exemplars (the agent's own
    ``build_messages``) and their token counts: the preview of a published version and of a candidate alike."""
    msgs = build_messages(
        schema=database.schema_info(), question=question, evidence=evidence or None, exemplars=exemplars,
        enabled_tools=enabled_tools, use_evidence=use_evidence, dialect=dialect_label(database.engine),
        custom_tool_description=tool_description or None,
        custom_tool_description_no_findpath=tool_description_no_findpath or None)
    return {"messages_out": [(m, estimate_tokens(m.content)) for m in msgs],
            "total_tokens": estimate_message_tokens(msgs), "database": database}


def exemplars_from_items(items: Sequence[Mapping[str, Any]]) -> tuple[PromptExemplar, ...]:
    """Stored exemplar snapshots (a version's or a candidate's) as the agent's prompt takes them."""
    return tuple(PromptExemplar.from_dict({k: item.get(k) for k in PROMPT_KEYS}) for item in items)


def version_text(version: ExemplarSetVersion, *, use_evidence: bool = True) -> str:
    """The version as text: its tool description, then each exemplar as the prompt renders it."""
    parts = ["# Tool description", version.tool_description.strip() or "(the agent's generated tool description)"]
    for i, (item, ex) in enumerate(zip(version.exemplars, exemplars_for_version(version), strict=True), 1):
        source = item.get("database") or "no database"
        parts += ["", f"# Example {i} (exemplar #{item.get('exemplar_id')}, {source})",
                  render_exemplar(ex, use_evidence=use_evidence)]
        if item.get("final_sql"):
            parts += [f"-- final SQL: {item['final_sql']}"]
    return "\n".join(parts) + "\n"


def version_diff(old: ExemplarSetVersion, new: ExemplarSetVersion) -> list[str]:
    """Unified diff of the two versions' rendered contents (empty when they are the same)."""
    return list(difflib.unified_diff(
        version_text(old).splitlines(), version_text(new).splitlines(),
        fromfile=f"{old.exemplar_set.name} v{old.number}", tofile=f"{new.exemplar_set.name} v{new.number}",
        lineterm=""))


def version_token_estimate(version: ExemplarSetVersion, *, use_evidence: bool = True) -> int:
    """Estimated tokens of the system message this version contributes (an estimate, not the API's count)."""
    return estimate_tokens(system_prompt(exemplars_for_version(version), use_evidence=use_evidence,
                                         custom_tool_description=version.tool_description or None))


def exemplar_token_estimate(exemplar: Exemplar, *, use_evidence: bool = True) -> int:
    return estimate_tokens(render_exemplar(prompt_exemplar(exemplar), use_evidence=use_evidence))


def sql_of_action(text: str) -> str | None:
    """The SQL of an ``ExecuteSQL(...)`` action, None for any other action or an unreadable one."""
    try:
        action = parse_action(text)
    except ActionParseError:
        return None
    if action.name != "ExecuteSQL":
        return None
    value = action.args[0] if action.args else action.kwargs.get("sql", action.kwargs.get("query"))
    return value if isinstance(value, str) else None


def last_executed_sql(steps: Iterable[ExemplarStep]) -> str | None:
    """The last ExecuteSQL step that succeeded: the agent's answer rule."""
    found = None
    for step in steps:
        sql = sql_of_action(step.action)
        if sql is not None and step.ok is not False:
            found = sql
    return found


def exemplar_list(*, user, state: str | None = None, database_id: int | None = None):
    """Exemplars ``user`` may see (on databases granted to them, or on none)."""
    from annotations import policies

    qs = policies.visible_exemplars(user).select_related("database", "author", "reviewer")
    if state:
        qs = qs.filter(state=state)
    if database_id:
        qs = qs.filter(database_id=database_id)
    return qs


def set_list(user):
    """The sets ``user`` may see (``policies.visible_sets``), each with its versions and workspace."""
    from django.db.models import Prefetch

    from annotations import policies

    return policies.visible_sets(user).select_related("workspace").prefetch_related(
        Prefetch("versions", queryset=policies.visible_versions(user)))


def few_shot_for_version(version: ExemplarSetVersion) -> FewShot:
    """A version's exemplars and tool text as the plain data a session takes (versions are immutable)."""
    return FewShot(exemplars_for_version(version), version.tool_description or None,
                   {"id": version.pk, "set_id": version.exemplar_set_id, "set": version.exemplar_set.name,
                    "number": version.number, "exemplars": len(version.exemplars)},
                   version.tool_description_no_findpath or None,
                   tuple(item.get("database") for item in version.exemplars))


class VersionFewShotSource:
    """Exemplar set versions as the agent app's few-shot source (registered in AnnotationsConfig.ready)."""

    def choices(self, user, database=None) -> list[tuple[int, str]]:
        from annotations import policies

        from .paper_sets import BIRD_NO_EVIDENCE, BIRD_WITH_EVIDENCE, fits_database, is_bird_database

        versions = published_versions().filter(pk__in=policies.visible_versions(user).values("pk"))
        if database is not None:
            versions = list(versions)
            bird = (is_bird_database(database) if any(v.exemplar_set.name in (BIRD_WITH_EVIDENCE, BIRD_NO_EVIDENCE)
                                                      for v in versions) else False)
            versions = [v for v in versions if fits_database(v.exemplar_set.name, database=database, bird=bird)]
        return [(v.pk, f"{v.exemplar_set.name} v{v.number} ({len(v.exemplars)} exemplars)") for v in versions]

    def by_id(self, pk: int, user) -> FewShot | None:
        from annotations import policies

        version = policies.visible_versions(user).select_related("exemplar_set").filter(pk=pk).first()
        return few_shot_for_version(version) if version is not None else None

    def by_name(self, spec: str, user=None) -> FewShot | None:
        from annotations import policies

        version = version_from_spec(spec, versions=policies.visible_versions(user) if user is not None else None)
        return few_shot_for_version(version) if version is not None else None

    def default_for(self, database, *, use_evidence: bool = True) -> FewShot | None:
        from .paper_sets import default_version

        version = default_version(database=database, use_evidence=use_evidence)
        return few_shot_for_version(version) if version is not None else None

    def source_visible(self, source, user) -> bool:
        from annotations import policies

        return policies.can_see_exemplar_source(user, source)


def published_versions():
    """Every set version, newest first within each set: the choices of an "exemplar set" field on the Ask form."""
    return ExemplarSetVersion.objects.select_related("exemplar_set").order_by("exemplar_set__name", "-number")


def version_from_spec(spec: str, *, versions=None) -> ExemplarSetVersion | None:
    """``SET`` (its newest version) or ``SET:N`` / ``SET:vN``, as the command line takes it; None if absent.

    ``versions``: the versions to look in (what the user may see, from the policies); None: all (commands)."""
    name, _, number = spec.partition(":")
    versions = (ExemplarSetVersion.objects.all() if versions is None else versions).filter(
        exemplar_set__name=name).order_by("-number")
    if number:
        digits = number.lstrip("v")
        if not digits.isdigit():
            return None
        versions = versions.filter(number=int(digits))
    return versions.first()


def version_unrunnable(version: ExemplarSetVersion, *, user) -> list[dict[str, Any]]:
    """The version's exemplars whose tools cannot run here (for this user): no registered database, or one the
    user does not see. Each with its position, exemplar id and database name."""
    from agent import policies as agent_policies

    ids = [item.get("exemplar_id") for item in version.exemplars]
    linked = dict(Exemplar.objects.filter(pk__in=[i for i in ids if i]).values_list("pk", "database_id"))
    visible = set(agent_policies.visible_databases(user).filter(pk__in=[d for d in linked.values() if d])
                  .values_list("pk", flat=True))
    return [{"position": n, "exemplar_id": item.get("exemplar_id"), "database": item.get("database") or "no database"}
            for n, item in enumerate(version.exemplars, start=1)
            if linked.get(item.get("exemplar_id")) not in visible]
