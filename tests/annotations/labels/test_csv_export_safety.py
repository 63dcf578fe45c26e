"""CSV exports never carry a live spreadsheet formula (OWASP CSV injection), through one function."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from agent.textclean import csv_cell, csv_writer
from annotations.labels import services

from .test_labels import category as category_for
from .test_labels import item

FORMULAS = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+1+2", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd"]


@pytest.mark.parametrize("value", FORMULAS)
def test_formula_cells_are_quoted_text(value):
    assert csv_cell(value) == "'" + value
    buffer = io.StringIO()
    csv_writer(buffer).writerow([value, 5, -3, None])
    cells = next(csv.reader(io.StringIO(buffer.getvalue())))
    assert cells[0] == "'" + value and cells[1:] == ["5", "-3", ""]


def test_plain_text_and_numbers_are_unchanged():
    assert csv_cell("Golden Wrong") == "Golden Wrong" and csv_cell(-1.5) == -1.5 and csv_cell("a=b") == "a=b"


@pytest.mark.django_db
def test_label_note_with_a_formula_is_exported_as_text(tiny_run, staff, client):
    category = category_for("distinct")
    label = services.label_toggle(item=item(tiny_run, 1), category=category, user=staff)
    services.label_update(label=label, user=staff, note='=HYPERLINK("http://evil.example","click")')
    client.force_login(staff)
    body = b"".join(client.get(reverse("labels:export", args=[tiny_run.pk, "csv"])).streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    notes = [r["note"] for r in rows if r["note"]]
    assert notes == ["'=HYPERLINK(\"http://evil.example\",\"click\")"]
