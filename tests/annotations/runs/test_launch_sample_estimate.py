"""The run launch form: a seeded random sample (or the first N, chosen explicitly), visible help texts, and an
estimate of tokens and cost before launching."""

import pytest
from django.urls import reverse

from agent.models import LLMEndpoint
from agent.roles import OPERATOR
from agent.strategies import build_messages, estimate_message_tokens
from annotations.exemplars.paper_sets import default_version
from annotations.exemplars.selectors import few_shot_for_version
from annotations.runs import estimates, services
from annotations.runs.forms import RunLaunchForm
from annotations.runs.sampling import sample_questions
from tests.conftest import give_roles

pytestmark = pytest.mark.django_db


def test_a_random_sample_is_repeatable_from_its_seed_and_differs_from_the_first_n(built_dataset):
    dataset = built_dataset(40)
    pick = lambda seed: [q.index for q in sample_questions(dataset.questions.all(), limit=5, mode="random",  # noqa: E731
                                                            seed=seed)]
    assert pick(7) == pick(7) and len(pick(7)) == 5 and pick(7) == sorted(pick(7))
    assert pick(7) != [0, 1, 2, 3, 4] and pick(7) != pick(8)
    first = sample_questions(dataset.questions.all(), limit=5, mode="first")
    assert [q.index for q in first] == [0, 1, 2, 3, 4]


def test_the_launched_run_stores_its_sample_and_seed(built_dataset, replay_llm):
    dataset = built_dataset(40)
    replay_llm(["Thought: x\nAction: Done"])
    run = services.run_create_agent(dataset=dataset, name="r", limit=5, sample="random", seed=7)
    expected = [q.index for q in sample_questions(dataset.questions.all(), limit=5, mode="random", seed=7)]
    assert sorted(run.items.values_list("question__index", flat=True)) == expected
    assert run.config["sample"] == {"db_ids": [], "limit": 5, "mode": "random", "seed": 7}
    drawn = services.run_create_agent(dataset=dataset, name="s", limit=5, sample="random")
    assert isinstance(drawn.config["sample"]["seed"], int)  # drawn and stored when none is given


def test_the_form_needs_n_for_a_sample_and_draws_a_seed():
    form = RunLaunchForm({"launch-name": "r", "launch-strategy": "interactive_t2s", "launch-sample": "random"},
                         prefix="launch")
    assert not form.is_valid() and "Give the sample size N" in str(form.errors["limit"])
    form = RunLaunchForm({"launch-name": "r", "launch-strategy": "interactive_t2s", "launch-sample": "random",
                          "launch-limit": "5"}, prefix="launch")
    assert form.is_valid() and isinstance(form.cleaned_data["seed"], int)
    form = RunLaunchForm({"launch-name": "r", "launch-strategy": "interactive_t2s", "launch-sample": "all",
                          "launch-limit": "5", "launch-seed": "3"}, prefix="launch")
    assert form.is_valid() and form.cleaned_data["limit"] is None and form.cleaned_data["seed"] is None


def test_estimate_counts_the_first_prompt_with_the_paper_set_and_prices_it(built_dataset):
    dataset = built_dataset(10)
    endpoint = LLMEndpoint(name="e", model="gpt-4o", input_price_per_mtok=2.5, output_price_per_mtok=10)
    e = estimates.run_estimate(dataset=dataset, strategy="interactive_t2s", endpoint=endpoint, limit=4,
                               sample="first")
    question = dataset.questions.get(index=0)
    version = default_version(dataset=dataset)
    shots = few_shot_for_version(version)
    first = estimate_message_tokens(build_messages(
        schema=question.database.schema_info(), question=question.question, exemplars=shots.exemplars,
        use_evidence=True, dialect="SQLite", custom_tool_description=shots.tool_description,
        custom_tool_description_no_findpath=shots.tool_description_no_findpath))
    assert e["questions"] == 4 and e["exemplars"] == f"paper-spider v{version.number}"
    assert abs(e["first_call"] - first) <= 2  # the questions differ by a digit or two
    assert e["low_prompt"] == 4 * e["first_call"] and e["high_prompt"] == 4 * e["first_call"] * 12
    assert e["low_cost"] == pytest.approx(e["low_prompt"] * 2.5 / 1e6)
    zero = estimates.run_estimate(dataset=dataset, strategy="interactive_t2s", endpoint=endpoint, limit=4,
                                  sample="first", zero_shot=True)
    assert zero["first_call"] < e["first_call"] / 2 and zero["exemplars"] == "none (zero-shot)"


def test_launch_form_shows_help_texts_and_the_estimate_partial(client, user, built_dataset, replay_llm):
    dataset = built_dataset(10)
    replay_llm(["Thought: x\nAction: Done"])
    give_roles(user, OPERATOR)
    client.force_login(user)
    page = client.get(dataset.get_absolute_url()).content.decode()
    assert "a random sample of N questions (seeded, repeatable)" in page
    assert "the same seed gives the same questions again" in page and "Stop starting sessions once" in page
    partial = client.get(reverse("runs:run_estimate", args=[dataset.name]), {
        "launch-strategy": "interactive_t2s", "launch-sample": "random", "launch-limit": "3",
        "launch-seed": "5"}).content.decode()
    assert "3 questions</strong> would run" in partial and "prompt tokens per question" in partial
    assert "has no prices" in partial  # the environment's endpoint has none
    missing_n = client.get(reverse("runs:run_estimate", args=[dataset.name]),
                           {"launch-sample": "first"}).content.decode()
    assert "Give the sample size N" in missing_n


def test_run_command_takes_a_random_sample_with_a_seed(built_dataset, replay_llm, capsys):
    from django.core.management import call_command

    from annotations.runs.models import Run

    dataset = built_dataset(40)
    replay_llm(["Thought: x\nAction: Done"])
    call_command("run", "--dataset", dataset.name, "--limit", "5", "--sample", "random", "--seed", "11")
    assert "5 questions (random sample, seed 11)." in capsys.readouterr().out
    assert Run.objects.get().config["sample"]["seed"] == 11
