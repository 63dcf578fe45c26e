"""The action parser under hostile input: linear time, never raises, always a readable error.

Property-based (Hypothesis) over random and adversarial strings, plus the issue's findings
as plain tests: ``ExecuteSQL("`` followed by 200,000 ``)``, 100k-term expressions, 1 MB inputs.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.strategies.parsing import FORMAT_HINT, MAX_PARSE_CHARS, ParsedStep, parse_step

FUZZ = settings(max_examples=150, deadline=500, suppress_health_check=[HealthCheck.too_slow])

MB = 1_000_000


def best_time(fn, *args, runs=3):
    """The fastest of a few runs: the machine running the suite is shared, and preemption is not the parser."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - started)
    return best

HOSTILE = {
    "unclosed-string-many-parens": 'Thought: t\nAction: ExecuteSQL("' + ")" * 200_000,
    "many-parens-1mb": 'Action: ExecuteSQL("' + ")" * MB,
    "sum-100k-terms": "Action: ExecuteSQL(" + "+".join(["1"] * 100_000) + ")",
    "sum-1mb": "Action: ExecuteSQL(" + "1+" * (MB // 2) + "1)",
    "deep-brackets": "Action: SearchColumn(" + "[" * 100_000 + "]" * 100_000 + ")",
    "deep-parens-unbalanced": "Action: SearchColumn(" + "(" * MB,
    "quotes-1mb": "Action: ExecuteSQL(" + '"' * MB,
    "single-quotes-1mb": "Action: ExecuteSQL('" + "\\'" * (MB // 2),
    "triple-quote-unclosed": 'Action: ExecuteSQL("""' + "x" * MB,
    "stars-and-spaces": "*" * MB + "action" + " " * 1000,
    "spaces-thought": "Thought" + " " * MB + "x",
    "label-lines": "Action:\n" * (MB // 8),
    "nul-and-surrogates": "Thought: \x00\ud800\nAction: ExecuteSQL(\"SELECT '\x00\udfff'\")" + "\x00" * MB,
    "unicode": "Thought: " + "é€𝄞" * (MB // 4) + '\nAction: SearchValue("名前")',
    "comment-no-newline": "Action: ExecuteSQL(# " + "x" * MB,
    "call-after-1mb-thought": "x" * MB + '\nAction: SearchValue("late")',
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_completion_parses_fast_and_never_raises(text):
    step = parse_step(text)
    elapsed = best_time(parse_step, text)
    assert isinstance(step, ParsedStep)
    assert elapsed < 0.5, f"{elapsed * 1000:.1f} ms"  # 50 ms idle: make bench-limits measures it
    assert step.action is not None or (step.error and len(step.error) < 2000)


def test_unbalanced_call_gets_a_message_the_model_can_act_on():
    step = parse_step('Thought: t\nAction: ExecuteSQL("' + ")" * 10_000)
    assert step.action is None
    assert "well-formed call" in step.error and FORMAT_HINT in step.error
    step = parse_step('Thought: t\nAction: ExecuteSQL("' + ")" * 200_000)
    assert step.action is None
    assert "longer than 20,000 characters" in step.error and FORMAT_HINT in step.error


def test_deep_nesting_is_refused_with_the_limit():
    step = parse_step("Action: SearchColumn(" + "[" * 1000 + "]" * 1000 + ")")
    assert step.action is None and "nests brackets more than 50 deep" in step.error


def test_long_completion_is_read_up_to_the_cap_and_says_so():
    step = parse_step("x" * (MAX_PARSE_CHARS + 10) + '\nAction: SearchValue("late")')
    assert step.action is None
    assert f"longer than {MAX_PARSE_CHARS:,} characters" in step.error
    ok = parse_step("Thought: " + "y" * 50_000 + '\nAction: SearchValue("fine")')
    assert ok.action is not None and ok.action.args == ("fine",)


def test_parse_time_is_linear_in_input_size():
    def timed(n):
        return best_time(parse_step, 'Thought: t\nAction: ExecuteSQL("' + ")" * n)

    small, large = timed(10_000), timed(100_000)
    # The 50 ms figure is measured by `make bench-limits`; here only a bound that a loaded CI machine
    # keeps and the old quadratic parser (130 s for 200 KB) breaks by far.
    assert large < 0.5 and large < small * 40  # quadratic would be ~100x


# --- property-based --------------------------------------------------------------------------

_pieces = st.sampled_from([
    "Action:", "Thought:", "ExecuteSQL(", "SearchValue(", "Done", "(", ")", "[", "]", "{", "}", '"', "'",
    '"""', "'''", "\\", "#", "\n", " ", ",", "=", "*", "`", "```", "\x00", "\ud800", "é", "𝄞", "1", "+",
    "SELECT", "None", "x",
])
adversarial = st.lists(_pieces, max_size=200).map("".join)


@FUZZ
@given(st.text(max_size=2000))
def test_random_text_never_raises(text):
    step = parse_step(text)
    assert step.action is not None or step.error


@FUZZ
@given(adversarial)
def test_adversarial_fragments_never_raise(text):
    step = parse_step(text)
    assert step.action is not None or step.error


@FUZZ
@given(st.lists(_pieces, min_size=1, max_size=8), st.integers(min_value=1_000, max_value=50_000))
def test_repeated_fragments_stay_fast(fragments, repeats):
    text = ("".join(fragments) * max(1, repeats // len("".join(fragments))))[:MB]
    step = parse_step(text)
    assert best_time(parse_step, text, runs=2) < 0.5  # 50 ms on an idle machine: see make bench-limits
    assert step.action is not None or step.error


@FUZZ
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300))
def test_any_string_argument_round_trips(value):
    step = parse_step(f"Thought: t\nAction: SearchValue({value!r})")
    assert step.action is not None and step.action.args == (value,)
