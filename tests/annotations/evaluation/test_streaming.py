"""Spider and BIRD dev files are read as streams: the same entries as json.load, in bounded memory, with clear
errors for malformed or too deeply nested files."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.textclean import JSONTooDeep
from annotations.evaluation import iter_bird_dev, iter_json_array, iter_spider_dev, load_spider_dev

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(entries=st.lists(json_values, max_size=12), chunk=st.integers(min_value=1, max_value=64),
       indent=st.sampled_from([None, 1, 4]))
def test_streamed_entries_equal_json_load_for_any_chunk_size(tmp_path_factory, entries, chunk, indent):
    path = tmp_path_factory.mktemp("stream") / "a.json"
    path.write_text(json.dumps(entries, indent=indent))
    assert list(iter_json_array(path, chunk=chunk)) == entries


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": 1}', "expected a JSON array"),
    ('[{"a": 1}, {"b": ]', "entry 2: not JSON"),
    ('[{"a": 1} {"b": 2}]', "expected ',' or ']' after entry 1"),
    ('[{"a": 1},', "entry 2: not JSON"),
    ("[1, 2", "without ']'"),
])
def test_malformed_arrays_name_the_entry(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        list(iter_json_array(path, chunk=3))


def test_deep_nesting_is_refused_with_the_limit_not_a_recursion_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" + "[" * 200_000 + "]" * 200_000 + "]")
    with pytest.raises(JSONTooDeep, match="nested deeper than 100"):
        list(iter_json_array(path))
    path.write_text("[" + "[" * 150 + "]" * 150 + "]")
    with pytest.raises(JSONTooDeep):
        list(iter_json_array(path))


def test_an_entry_past_the_size_cap_is_refused_instead_of_buffered(tmp_path):
    path = tmp_path / "huge.json"
    path.write_text('[{"q": "' + "x" * 5000 + '"}]')
    with pytest.raises(ValueError, match="longer than 1000 characters"):
        list(iter_json_array(path, chunk=100, max_entry=1000))


def test_spider_and_bird_readers_stream_and_name_missing_fields(tmp_path):
    spider = tmp_path / "dev.json"
    spider.write_text(json.dumps([{"db_id": "a", "query": " SELECT 1 ", "question": "q"}] * 3))
    items = list(iter_spider_dev(spider))
    assert [(i.index, i.db_id, i.sql) for i in items] == [(0, "a", "SELECT 1"), (1, "a", "SELECT 1"),
                                                          (2, "a", "SELECT 1")]
    assert load_spider_dev(spider) == items
    spider.write_text(json.dumps([{"db_id": "a", "query": "SELECT 1"}, {"db_id": "a", "question": "q"}]))
    with pytest.raises(ValueError, match="entry 2: needs 'query'"):
        list(iter_spider_dev(spider))
    bird = tmp_path / "bird.jsonl"
    bird.write_text('{"db_id": "b", "SQL": "SELECT 2", "question": "q", "evidence": "e", "difficulty": "simple"}\n')
    (item,) = iter_bird_dev(bird)
    assert (item.sql, item.evidence, item.difficulty) == ("SELECT 2", "e", "simple")
