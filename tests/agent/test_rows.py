"""Instances built from a plain cursor's row are those the ORM would have read."""

from __future__ import annotations

import pytest
from django.db import connection

from agent.models import LLMEndpoint
from agent.services.rows import instance_from_row

pytestmark = pytest.mark.django_db


def test_an_instance_from_a_raw_row_is_converted_column_by_column_as_the_orm_reads_it():
    saved = LLMEndpoint.objects.create(name="rows", model="m", allowed_models=["a", "b"], is_default=False,
                                       input_price_per_mtok="1.25")
    names = ["id", "name", "allowed_models", "is_default", "input_price_per_mtok"]
    columns = ", ".join(connection.ops.quote_name(LLMEndpoint._meta.get_field(n).column) for n in
                        ["id", "name", "allowed_models", "is_default", "input_price_per_mtok"])
    with connection.cursor() as cursor:  # in another order than the model's fields
        cursor.execute(f"SELECT {columns} FROM {LLMEndpoint._meta.db_table} WHERE id = %s", [saved.pk])
        row = cursor.fetchone()
    built = instance_from_row(LLMEndpoint, dict(zip(reversed(names), reversed(row), strict=True)))
    read = LLMEndpoint.objects.only(*names).get(pk=saved.pk)
    for name in names:
        assert getattr(built, name) == getattr(read, name) and type(getattr(built, name)) is type(getattr(read, name))
    assert built.get_deferred_fields() == read.get_deferred_fields()
    assert built.model == "m"  # a deferred field loads when used
    with pytest.raises(ValueError, match="no concrete field"):
        instance_from_row(LLMEndpoint, {"id": saved.pk, "nonsense": 1})
