"""The one figure filter: every page writes percentages, counts, costs and durations the same way."""

import pytest
from django.template import Context, Template

from agent.templatetags.studio import format_figure


@pytest.mark.parametrize(("value", "kind", "text"), [
    (82.20164609053498, "percent", "82.20%"),
    (82.20164609053498, "percent:1", "82.2%"),
    (100, "percent", "100.00%"),
    (1034, "count", "1,034"),
    (12345.6, "count", "12,346"),
    (0.00123456, "cost", "$0.0012"),
    (3.5, "cost", "$3.50"),
    (0.0123, "cost", "$0.0123"),
    (0, "cost", "$0.00"),
    (0.0000234, "cost", "$0.000023"),  # a cost per LLM call stays visible
    (0.4, "ms", "0.4 ms"),
    (37.2, "ms", "37 ms"),
    (2500, "ms", "2.5 s"),
    (0.25, "duration", "250 ms"),
    (12.34, "duration", "12.3 s"),
    (125, "duration", "2 min 05 s"),
    (3725, "duration", "1 h 02 min"),
    (0.74343, "fixed:3", "0.743"),
    (-0.1, "fixed:3", "-0.100"),
    (7, "number", "7"),
    (2.3456, "number", "2.35"),
    (None, "percent", "–"),
    ("", "count", "–"),
    ("n/a", "percent", "–"),
    (float("nan"), "fixed:3", "–"),
])
def test_format_figure(value, kind, text):
    assert format_figure(value, kind) == text


def test_the_filter_in_a_template():
    rendered = Template('{% load studio %}{{ ex|figure:"percent" }} of {{ n|figure:"count" }}').render(
        Context({"ex": 82.20164609053498, "n": 1034}))
    assert rendered == "82.20% of 1,034"
