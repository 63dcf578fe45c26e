"""agent.jsonstream reads a JSON document a value at a time: whatever the chunk size, the values and their
lines are those of json.loads; past the length or depth limit it says so instead of buffering or recursing."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.jsonstream import JSONStream, JSONValueTooLong, iter_array, iter_members
from agent.textclean import JSONTooDeep

FUZZ = settings(max_examples=80, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
scalars = st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False) | st.text(max_size=30)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                             max_size=4), max_leaves=20)


@FUZZ
@given(items=st.lists(values, max_size=12), chunk=st.integers(1, 64), indent=st.sampled_from([None, 1, 4]))
def test_an_array_streams_as_json_loads_reads_it_whatever_the_chunk(items, chunk, indent):
    text = json.dumps(items, indent=indent)
    assert list(iter_array(JSONStream(io.StringIO(text), chunk=chunk))) == json.loads(text)
    assert list(iter_array(JSONStream(text.splitlines(keepends=True), chunk=chunk))) == json.loads(text)


@FUZZ
@given(members=st.dictionaries(st.text(max_size=8), values, max_size=8), chunk=st.integers(1, 64))
def test_an_object_streams_member_by_member(members, chunk):
    text = json.dumps(members, indent=1)
    stream = JSONStream(io.StringIO(text), chunk=chunk)
    read = {}
    for key, line in iter_members(stream):
        assert text.splitlines()[line - 1].lstrip().startswith(json.dumps(key))  # the key's own line
        read[key] = stream.value(depth=1)
    assert read == members and stream.peek() == ""


def test_a_number_cut_by_the_chunk_end_is_read_whole():
    assert list(iter_array(JSONStream(io.StringIO("[12345.678e-2, 99999999999]"), chunk=3))) == [123.45678,
                                                                                                 99999999999]


def test_200k_deep_nesting_and_overlong_values_are_errors_not_buffers():
    with pytest.raises(JSONTooDeep, match="line 2: JSON nested deeper than 100 levels"):
        list(iter_array(JSONStream(io.StringIO("[1,\n" + "[" * 200_000 + "]" * 200_000 + "]"), chunk=4096)))
    with pytest.raises(JSONTooDeep, match="nested deeper than 100 levels"):  # under the recursion limit
        list(iter_array(JSONStream(io.StringIO("[" + "[" * 150 + "]" * 150 + "]"))))
    with pytest.raises(JSONValueTooLong, match="longer than 1,000 characters"):
        list(iter_array(JSONStream(io.StringIO('[1, "' + "x" * 5_000 + '"]'), chunk=100, max_value=1_000)))
    with pytest.raises(JSONValueTooLong, match="more than 2 entries"):
        list(iter_array(JSONStream(io.StringIO("[1, 2, 3]")), max_items=2))


def test_malformed_input_names_its_line():
    with pytest.raises(ValueError, match="line 3: not JSON"):
        list(iter_array(JSONStream(io.StringIO('[1,\n2,\n{"a": nope}]'), chunk=4)))
    with pytest.raises(ValueError, match="line 2: expected ',' or ']'"):
        list(iter_array(JSONStream(io.StringIO('[1,\n2 3]'))))
