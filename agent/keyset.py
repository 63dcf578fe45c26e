"""Keyset (cursor) pagination for list pages: deep pages cost what the first page costs.

OFFSET pagination reads and throws away every row before the page, and its page count needs a COUNT over
the whole filtered table; at 100k sessions ``?page=last`` took half a second. Here a page is "the next
``size`` rows after this (sort value, id)", which an index on (sort column, id) answers by a range scan.

The sort column may be nullable: NULLs always come last, in either direction (a session still running has no
latency yet; an endpoint without prices gives no cost). Rows with a value and rows without are read by two
range scans rather than one condition with ``OR ... IS NULL``, which no index answers.

Each condition repeats a plain range on the sort column (``value <= v``) beside the exact tie-break
(``value < v OR (value = v AND id < pk)``): PostgreSQL uses the first as the index range and checks the second
on the few rows at the boundary.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django.db.models import Q, QuerySet

# Counting every match of a filter over 200k rows costs more than the page itself (each match is a row read):
# past this, the page says "more than".
COUNT_CAP = 1_000


@dataclass(frozen=True)
class SortKey:
    """One way to order a list: a column (or an annotation named ``name``), its direction, NULLs or not."""

    name: str
    descending: bool = True
    nullable: bool = False
    expression: Any = None  # an expression to annotate as ``name`` (e.g. a sum of two columns)

    def annotate(self, qs: QuerySet) -> QuerySet:
        return qs.annotate(**{self.name: self.expression}) if self.expression is not None else qs


@dataclass
class KeysetPage:
    """One page: its rows and the cursors of the pages before and after it (None at either end)."""

    object_list: list
    next_cursor: str | None
    previous_cursor: str | None
    count: int | None = None  # capped at COUNT_CAP; None when not asked for
    count_capped: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def has_next(self) -> bool:
        return self.next_cursor is not None

    @property
    def has_previous(self) -> bool:
        return self.previous_cursor is not None

    @property
    def has_other_pages(self) -> bool:
        return self.has_next or self.has_previous


def encode_cursor(value: Any, pk: int, *, backwards: bool = False) -> str:
    raw = json.dumps({"v": _jsonable(value), "id": pk, "b": backwards}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(token: str | None, model_field: models.Field | None) -> tuple[Any, int, bool] | None:
    """(value, id, backwards) from a cursor, or None for a missing or malformed one (the first page then)."""
    if not token:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        pk = int(data["id"])
        value = data["v"]
        if value is not None and model_field is not None:
            value = model_field.to_python(value)
        return value, pk, bool(data.get("b"))
    except (ValueError, KeyError, TypeError, binascii.Error, ValidationError):
        return None


def _jsonable(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def _after(key: SortKey, value: Any, pk: int) -> Q:
    """Rows strictly after (value, pk) among the rows that have a value, in the key's order."""
    if key.descending:
        return Q(**{f"{key.name}__lte": value}) & (Q(**{f"{key.name}__lt": value}) | Q(**{key.name: value, "pk__lt": pk}))
    return Q(**{f"{key.name}__gte": value}) & (Q(**{f"{key.name}__gt": value}) | Q(**{key.name: value, "pk__gt": pk}))


def _before(key: SortKey, value: Any, pk: int) -> Q:
    """Rows strictly before (value, pk) among the rows that have a value, in the key's order."""
    flipped = SortKey(key.name, descending=not key.descending)
    return _after(flipped, value, pk)


def _order(key: SortKey, *, reverse: bool = False) -> list:
    descending = key.descending != reverse
    column = models.F(key.name)
    if descending:
        return [column.desc(), models.F("pk").desc()]
    return [column.asc(), models.F("pk").asc()]


def _values_part(qs: QuerySet, key: SortKey) -> QuerySet:
    return qs.filter(**{f"{key.name}__isnull": False}) if key.nullable else qs


def _nulls_part(qs: QuerySet, key: SortKey) -> QuerySet:
    return qs.filter(**{f"{key.name}__isnull": True})


def _pk_order(key: SortKey, *, reverse: bool = False) -> list[str]:
    return ["-pk"] if key.descending != reverse else ["pk"]


def paginate(qs: QuerySet, *, key: SortKey, cursor: str | None, size: int, count: bool = False) -> KeysetPage:
    """The page of ``qs`` (already filtered) that ``cursor`` points at, ordered by ``key`` then id."""
    plain = qs
    qs = key.annotate(qs)
    model_field = _model_field(qs.model, key.name)
    position = decode_cursor(cursor, model_field)
    if position is not None and position[2]:
        rows, more = _fetch_backwards(qs, key=key, value=position[0], pk=position[1], size=size)
        rows.reverse()
        has_previous, has_next = more, True
    else:
        rows, more = _fetch_forwards(qs, key=key, position=position, size=size)
        has_previous, has_next = position is not None, more
    next_cursor = encode_cursor(_value(rows[-1], key), rows[-1].pk) if rows and has_next else None
    previous_cursor = (encode_cursor(_value(rows[0], key), rows[0].pk, backwards=True)
                       if rows and has_previous else None)
    page = KeysetPage(rows, next_cursor, previous_cursor)
    if count:
        page.count = plain.select_related(None).order_by().values("pk")[: COUNT_CAP + 1].count()
        page.count_capped = page.count > COUNT_CAP
        page.count = min(page.count, COUNT_CAP)
    return page


def _fetch_forwards(qs: QuerySet, *, key: SortKey, position, size: int) -> tuple[list, bool]:
    """Up to ``size`` rows after ``position`` (None: from the start) and whether more follow."""
    rows: list = []
    in_nulls = position is not None and position[0] is None
    if not in_nulls:
        part = _values_part(qs, key)
        if position is not None:
            part = part.filter(_after(key, position[0], position[1]))
        rows = list(part.order_by(*_order(key))[: size + 1])
    if key.nullable and len(rows) <= size:
        part = _nulls_part(qs, key)
        if in_nulls:
            part = part.filter(**({"pk__lt": position[1]} if key.descending else {"pk__gt": position[1]}))
        rows += list(part.order_by(*_pk_order(key))[: size + 1 - len(rows)])
    return rows[:size], len(rows) > size


def _fetch_backwards(qs: QuerySet, *, key: SortKey, value, pk: int, size: int) -> tuple[list, bool]:
    """Up to ``size`` rows just before (value, pk), nearest first, and whether more precede them."""
    rows: list = []
    if value is None:  # inside the NULLs: earlier NULLs first, then the last rows with a value
        part = _nulls_part(qs, key).filter(**({"pk__gt": pk} if key.descending else {"pk__lt": pk}))
        rows = list(part.order_by(*_pk_order(key, reverse=True))[: size + 1])
        if len(rows) <= size:
            rows += list(_values_part(qs, key).order_by(*_order(key, reverse=True))[: size + 1 - len(rows)])
    else:
        part = _values_part(qs, key).filter(_before(key, value, pk))
        rows = list(part.order_by(*_order(key, reverse=True))[: size + 1])
    return rows[:size], len(rows) > size


def _value(row, key: SortKey) -> Any:
    return getattr(row, key.name)


def _model_field(model, name: str) -> models.Field | None:
    try:
        return model._meta.get_field(name)
    except FieldDoesNotExist:  # an annotation: its value is a plain JSON number
        return None
