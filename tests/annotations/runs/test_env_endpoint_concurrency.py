"""The endpoint configured by environment variables (no record) allows T2S_LLM_MAX_CONCURRENCY sessions at once,
as a record allows its max_concurrency: `manage.py run --concurrency 16` works with it."""

import pytest
from django.core.management import CommandError, call_command

from annotations.runs.models import Run

pytestmark = pytest.mark.django_db


def test_run_command_at_concurrency_16_on_the_environment_endpoint(built_dataset, replay_llm, capsys):
    dataset = built_dataset(20)
    replay_llm(["Thought: x\nAction: Done"])  # OPENAI_BASE_URL and T2S_LLM_MODEL, no record
    call_command("run", "--dataset", dataset.name, "--concurrency", "16")
    assert "Run #" in capsys.readouterr().out
    run = Run.objects.get()
    assert run.config["max_concurrency"] == 16 and run.config["llm"]["endpoint"] == "environment"


def test_the_environment_endpoints_bound_is_its_setting(built_dataset, replay_llm, settings):
    dataset = built_dataset(20)
    replay_llm(["Thought: x\nAction: Done"])
    settings.T2S = {**settings.T2S, "LLM_MAX_CONCURRENCY": 8}
    with pytest.raises(CommandError, match="At most 8 concurrent sessions on endpoint environment"):
        call_command("run", "--dataset", dataset.name, "--concurrency", "16")
    call_command("run", "--dataset", dataset.name)
    assert Run.objects.get().config["max_concurrency"] == 8  # without --concurrency: the endpoint's bound
