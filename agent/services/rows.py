"""Model instances from rows read with a plain cursor, as the ORM would have built them.

For statements that run so often that building them through the ORM cost more CPU than the database spent
answering (a run's dispatch pass): the caller writes the SQL, this turns its row into the instance
``Model.objects.only(...)`` would give, each column converted as the ORM converts it (a JSON text into its value
on any database, an integer into a boolean or a text into a datetime on SQLite).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Model

M = TypeVar("M", bound=Model)

_Plan = tuple[list[str], list[tuple[int, list[Callable[..., Any]], Any]]]
_plans: dict[tuple[type[Model], tuple[str, ...], str], _Plan] = {}


def instance_from_row(model: type[M], values: Mapping[str, Any]) -> M:
    """An instance of ``model`` with the given field values (by attribute name: ``created_by_id``), as read from
    the database; the fields not given are deferred (loaded when first used)."""
    names = tuple(values)
    key = (model, names, connection.alias)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _plan(model, names)
    ordered, converters = plan
    row = [values[name] for name in ordered]
    for index, functions, column in converters:
        value = row[index]
        for convert in functions:
            value = convert(value, column, connection)
        row[index] = value
    return model.from_db(connection.alias, ordered, row)


def _plan(model: type[Model], names: tuple[str, ...]) -> _Plan:
    """The names in the model's field order (``from_db`` takes them so) and each field's converters with the
    column expression they are called with (looked up once: a few microseconds a field, at every row)."""
    meta = model._meta
    fields = [f for f in meta.concrete_fields if f.attname in names]
    if len(fields) != len(names):
        unknown = set(names) - {f.attname for f in fields}
        raise ValueError(f"{model.__name__} has no concrete field {', '.join(sorted(unknown))}")
    converters = []
    for index, field in enumerate(fields):
        column = field.get_col(meta.db_table)
        functions = [*connection.ops.get_db_converters(column), *field.get_db_converters(connection)]
        if functions:
            converters.append((index, functions, column))
    return [f.attname for f in fields], converters
