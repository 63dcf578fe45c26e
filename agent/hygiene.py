"""Every text and JSON field of the app's models is cleaned (``agent.textclean``) before it is saved.

Connected once in ``AgentConfig.ready``, for every model of the project's apps, so a NUL
in a completion, a result cell, a column name, an exemplar step, an imported question or a
label note never fails a save on PostgreSQL (and a lone surrogate never fails one anywhere).
``bulk_create``/``bulk_update`` send no signal: their callers use ``clean_instance``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.db import models

from agent.textclean import clean_json, clean_text, is_clean

APPS = {"agent", "annotations", "labels", "runs", "exemplars"}


def clean_instance(instance: models.Model, *, clean_already: Collection[str] = ()) -> models.Model:
    """Clean the instance's text and JSON field values in place; returns it. ``clean_already``: fields the
    caller cleaned itself (e.g. one JSON value shared by many instances, checked once)."""
    for field in instance._meta.concrete_fields:
        if field.attname in clean_already:
            continue
        if isinstance(field, (models.CharField, models.TextField)):
            value = getattr(instance, field.attname)
            if isinstance(value, str) and not is_clean(value):
                setattr(instance, field.attname, clean_text(value))
        elif isinstance(field, models.JSONField):
            value = getattr(instance, field.attname)
            cleaned = cleaned_json(value)
            if cleaned is not value:
                setattr(instance, field.attname, cleaned)
    return instance


def cleaned_json(value: Any) -> Any:
    """``value`` itself when clean, else a cleaned copy (``clean_json``)."""
    return value if value is None or _json_is_clean(value) else clean_json(value)


def _json_is_clean(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not is_clean(item):
                return False
        elif isinstance(item, dict):
            for k, v in item.items():
                if isinstance(k, str) and not is_clean(k):
                    return False
                stack.append(v)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return True


def clean_before_save(sender: type[models.Model], instance: models.Model, raw: bool = False, **kwargs: Any) -> None:
    if sender._meta.app_label in APPS:
        clean_instance(instance)
