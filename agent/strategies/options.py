"""Every option of every strategy, declared once, and its checks as a request gives it (JSON).

Each config dataclass declares its fields with ``option(...)``: the default, bounds (``min``, ``max``) or
``choices``, and a help text, in the field's metadata. From that one declaration come the type check of a
request's options (``option_errors``, before any config is built: ``max_rounds: "8"`` gets a field error naming
the type, not a Python message), the bounds check every config runs when it is built (``check_bounds``, so no
path that builds a config, whether a page, the API, a command or an experiment, stores an out-of-range value),
and the listing the API and the forms show (``option_specs``).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

_NAMES = {int: "a whole number", float: "a number", bool: "true or false", str: "a string"}
_KEY = "t2s_option"


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """One option as it is declared: bounds apply to numbers (inclusive), choices to strings or to each item
    of a list."""

    min: float | None = None
    max: float | None = None
    choices: tuple[Any, ...] | None = None
    help: str = ""


def option(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING,
           min: float | None = None, max: float | None = None,  # noqa: A002 (the names the API shows)
           choices: Any = None, help: str = "") -> Any:  # noqa: A002
    """A config field with its bounds and help (``dataclasses.field`` with the declaration in its metadata)."""
    spec = OptionSpec(min, max, tuple(choices) if choices is not None else None, help)
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata={_KEY: spec})
    return dataclasses.field(default=default, metadata={_KEY: spec})


def _spec(field: dataclasses.Field) -> OptionSpec | None:
    return field.metadata.get(_KEY)


def _bound_error(name: str, value: Any, spec: OptionSpec) -> str | None:
    """Why ``value`` is outside ``spec`` (None when it is inside, or when it is None: "not set")."""
    if value is None:
        return None
    if spec.choices is not None:
        items = list(value) if isinstance(value, list | tuple) else [value]
        wrong = [v for v in items if v not in spec.choices]
        if wrong:
            return (f"{name} must be {'each ' if isinstance(value, list | tuple) else ''}one of "
                    f"{', '.join(map(str, spec.choices))}; {', '.join(map(repr, wrong))} is not.")
    if isinstance(value, int | float) and not isinstance(value, bool):
        low = spec.min if spec.min is not None else float("-inf")
        high = spec.max if spec.max is not None else float("inf")
        if not low <= value <= high:
            where = (f"from {spec.min:g} to {spec.max:g}" if spec.min is not None and spec.max is not None
                     else f"at least {spec.min:g}" if spec.min is not None else f"at most {spec.max:g}")
            return f"{name} must be {where}, not {value:g}."
    return None


def check_bounds(config: Any) -> None:
    """ValueError naming every field of ``config`` outside its declared bounds (called by each config's
    ``__post_init__``)."""
    errors = [e for f in dataclasses.fields(config) if (spec := _spec(f)) is not None
              and (e := _bound_error(f.name, getattr(config, f.name), spec))]
    if errors:
        raise ValueError(" ".join(errors))


def option_specs(config_class: type) -> list[dict[str, Any]]:
    """The declared options of a config class, in field order, as the API lists them and the forms show them."""
    hints = _type_hints(config_class)
    out = []
    for field in dataclasses.fields(config_class):
        spec = _spec(field) or OptionSpec()
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        if isinstance(default, tuple):
            default = list(default)
        out.append({"name": field.name, "type": _describe(hints[field.name]), "default": default,
                    "min": spec.min, "max": spec.max,
                    "choices": list(spec.choices) if spec.choices is not None else None, "help": spec.help})
    return out


def _describe(hint: Any) -> str:
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _describe(a) for a in args)
    if origin in (tuple, list):
        return f"a list of {_describe(args[0]).removeprefix('a ')}s" if args else "a list"
    if origin is dict or hint is dict:
        return "an object"
    return _NAMES.get(hint, getattr(hint, "__name__", str(hint)))


def _fits(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    if origin in (tuple, list):
        item = args[0] if args else Any
        return isinstance(value, list | tuple) and all(_fits(v, item) for v in value)
    if origin is dict or hint is dict:
        return isinstance(value, Mapping)
    if origin is typing.Literal:
        return value in args
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True  # a type this check does not know: the config's own validation decides


@functools.lru_cache(maxsize=64)
def _type_hints(config_class: type) -> dict[str, Any]:
    # Once per class, not at every session start: resolving string annotations is not free.
    return typing.get_type_hints(config_class)


def option_errors(config_class: type, options: Mapping[str, Any]) -> list[str]:
    """One readable message per option whose value has the wrong type for ``config_class`` (a dataclass), or
    lies outside its declared bounds or choices.

    Options the config does not know are left alone (snapshots of older versions carry such keys)."""
    hints = _type_hints(config_class)
    errors = []
    for field in dataclasses.fields(config_class):
        if field.name not in options:
            continue
        value = options[field.name]
        if not _fits(value, hints[field.name]):
            errors.append(f"{field.name} must be {_describe(hints[field.name])}, "
                          f"not {type(value).__name__.replace('NoneType', 'null')}.")
        elif (spec := _spec(field)) is not None and (error := _bound_error(field.name, value, spec)):
            errors.append(error)
    return errors


SEED_MAX = 2**31 - 1


def sampling_seed_option() -> Any:
    """The ``sampling_seed`` option every strategy declares (one wording, one bound)."""
    return option(None, min=0, max=SEED_MAX,
                  help="Sent with each LLM call as the endpoint's seed (OpenAI's seed), plus the call's turn "
                       "index; empty: none, as in the papers. Reproducible only where the provider honours it.")


def call_seed(base: int | None, turn_index: int) -> int | None:
    """The seed of the LLM call made at ``turn_index``: calls of one session with the same prompt (samples of
    a vote, loops) must not all draw the same completion, yet a session run again draws the same ones."""
    return None if base is None else (base + turn_index) % (SEED_MAX + 1)
