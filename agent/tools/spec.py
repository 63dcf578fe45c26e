"""What a tool is, in one frozen record: the contract every caller derives from.

A ``ToolSpec`` holds a tool's name, its parameters (with the other names
models use for them), the fields a person fills in to call it by hand, the
model-facing description, how it runs against a database and how what it
found is rendered as the Observation. Dispatch (``ToolBox``), the tool and
exemplar consoles, the prompt's tool description, the action parser's
rendering of a call and the API's list of tools all read these records from
``agent.tools.registry``; adding a tool is one module with a ``SPEC`` and one
line in the registry.

No Django here.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agent.sql import QueryResult

from .errors import ToolError

if TYPE_CHECKING:
    from agent.sql import Connector, Limits

    from .toolbox import LoadedIndexes

DONE = "Done"  # the action that ends a trajectory; not a tool, but written like a call

# Observation profiles: named ways of rendering what a tool found. "default" is the
# app's own format (see each tool module's docstring); a spec's ``observe`` hook gets
# the profile name and must render every profile listed in ``profiles``.
DEFAULT_PROFILE = "default"

_MISSING: Any = inspect.Parameter.empty


@dataclass(frozen=True)
class Param:
    """One parameter as the model writes it. ``type`` is the model-facing annotation text."""

    name: str
    type: str = "str"
    default: Any = _MISSING
    aliases: tuple[str, ...] = ()  # other keyword names models (and the paper's text) use for it

    @property
    def required(self) -> bool:
        return self.default is _MISSING


@dataclass(frozen=True)
class FormField:
    """One input of the by-hand call form (tool console, exemplar console).

    ``kind``: ``line`` (one input), ``text`` (a text area) or ``lines`` (a text
    area whose lines become a list; one line stays a plain string).
    ``suggest`` names the completion list the page offers: ``tables``,
    ``columns`` or ``qualified`` (``table.column``). ``keyword`` writes the
    argument as ``name=value`` in the call text.
    """

    name: str
    label: str
    param: str
    kind: Literal["line", "text", "lines"] = "line"
    required: bool = False
    placeholder: str = ""
    suggest: Literal["tables", "columns", "qualified"] | None = None
    keyword: bool = False
    rows: int = 3
    mono: bool = False


@dataclass(frozen=True)
class ToolOutput:
    """What one call found, before it is rendered as an Observation."""

    data: Any
    ok: bool = True
    sql: str | None = None  # ExecuteSQL: the query as run
    result: QueryResult | None = None  # ExecuteSQL: the rows, when it succeeded


class ToolContext(Protocol):
    """What a tool may use when it runs: the target, its limits, its built indexes, per-tool settings."""

    connector: Connector
    limits: Limits | None
    column_k: int
    column_ranking: str  # "index" (the column index's backend) or "embedding" (embeddings alone, when built)
    value_limit: int
    show_rows: int
    profile: str  # the observation profile; the paper profile also runs some tools as the authors' did
    database_name: str

    @property
    def indexes(self) -> LoadedIndexes: ...


Execute = Callable[[ToolContext, Mapping[str, Any]], ToolOutput]
Observe = Callable[[ToolOutput, str], str]


@dataclass(frozen=True)
class ToolSpec:
    """One tool's whole contract. ``execute`` gets the bound arguments by parameter name (defaults applied)."""

    name: str
    params: tuple[Param, ...]
    description: str  # for the model; ``{dialect}`` is replaced by the target's SQL dialect
    guidance: str  # its line under "How to proceed" in the prompt
    execute: Execute
    observe: Observe  # (what the call found, profile name) -> the Observation text
    fields: tuple[FormField, ...]
    example: str = ""  # a call shown in the prompt's format section, e.g. SearchColumn(["a", "b"])
    example_rank: int = 100  # lower wins when several enabled tools have an example
    when_disabled: str = ""  # a prompt line added when this tool is switched off (ablations)
    profiles: tuple[str, ...] = (DEFAULT_PROFILE,)
    signature: inspect.Signature = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        object.__setattr__(self, "signature", inspect.Signature(
            [inspect.Parameter(p.name, kind, default=p.default) for p in self.params]))
        names = {p.name for p in self.params}
        stray = [f.param for f in self.fields if f.param not in names]
        if stray:
            raise ValueError(f"{self.name}: form fields for unknown parameters {stray}")
        if DEFAULT_PROFILE not in self.profiles:
            raise ValueError(f"{self.name}: every tool renders the {DEFAULT_PROFILE!r} observation profile")

    # --- the call as text ----------------------------------------------------------

    def usage(self) -> str:
        """``SearchValue(query, table=None, column=None)``: for error messages."""
        parts = [p.name if p.required else f"{p.name}={p.default!r}" for p in self.params]
        return f"{self.name}({', '.join(parts)})"

    def heading(self) -> str:
        """``SearchValue(query: str | list[str], table: str | None = None, ...)``: the prompt's first line."""
        parts = [f"{p.name}: {p.type}" + ("" if p.required else f" = {p.default!r}") for p in self.params]
        return f"{self.name}({', '.join(parts)})"

    # --- binding ------------------------------------------------------------------

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Arguments by parameter name, aliases resolved and defaults applied; ToolError tells the model why not."""
        aliases = {a: p.name for p in self.params for a in p.aliases}
        kw = {aliases.get(str(k), str(k)): v for k, v in kwargs.items()}
        try:
            bound = self.signature.bind(*args, **kw)
        except TypeError as exc:
            raise ToolError(f"Wrong arguments for {self.name}: {exc}. Usage: {self.usage()}.") from None
        bound.apply_defaults()
        return dict(bound.arguments)

    # --- by-hand calls ------------------------------------------------------------

    def call_from_fields(self, data: Mapping[str, str]) -> tuple[list[Any], dict[str, Any]]:
        """(args, kwargs) from the form's fields; empty optional fields are left out."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for f in self.fields:
            raw = str(data.get(f.name) or "")
            value: Any
            if f.kind == "lines":
                lines = [line.strip() for line in raw.splitlines() if line.strip()]
                value = lines[0] if len(lines) == 1 else lines
            else:
                value = raw.strip()
            if not f.required and value in ("", []):
                continue
            if f.keyword:
                kwargs[f.param] = value
            else:
                args.append(value)
        return args, kwargs

    def observation(self, output: ToolOutput, profile: str = DEFAULT_PROFILE) -> str:
        if profile not in self.profiles:
            raise ValueError(f"{self.name} has no observation profile {profile!r}; it has {list(self.profiles)}")
        return self.observe(output, profile)


def render_value(value: Any) -> str:
    """A literal as the agent writes it: strings in double quotes, other literals in Python syntax."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        inner = ", ".join(render_value(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{render_value(k)}: {render_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def render_call(name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> str:
    """The one text form of a call, e.g. ``SearchValue("France", table="Customer")``; ``Done`` bare.

    The parser reads this text back to the same call.
    """
    parts = [render_value(a) for a in args] + [f"{k}={render_value(v)}" for k, v in (kwargs or {}).items()]
    if name == DONE and not parts:
        return DONE
    return f"{name}({', '.join(parts)})"
