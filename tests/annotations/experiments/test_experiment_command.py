"""``manage.py experiment ... --wait`` on a real worker: both EX figures with the flips and the spread."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.experiments import services
from annotations.experiments.models import Candidate, Experiment
from annotations.runs.models import Run
from tests.annotations.experiments.conftest import helped_script
from tests.support.worker import WorkerProcess, purge_broker

pytestmark = pytest.mark.django_db(transaction=True)


def test_experiment_wait_prints_both_ex_figures_the_flips_and_the_spread(shop, team, make_exemplar, annotator, curator,
                                                                         replay_llm, tmp_path):
    b = make_exemplar("MARK-B", author=annotator)
    services.suite_create(name="all", dataset=shop, user=curator,
                          sources=[{"kind": "picked", "questions": list(range(8))}])
    replay_llm(helped_script({1: "MARK-B", 4: "MARK-B", 6: "MARK-A"}, always_right={0, 2}))
    with pytest.raises(CommandError, match="ana may not do this: .* needs the Curator role"):
        call_command("experiment", "--set", "team", "--candidate", "new", "--add", str(b.pk), "--suite", "all",
                     "--user", "ana")
    assert not Candidate.objects.exists()  # refused: the new candidate is not kept either
    purge_broker()
    worker = WorkerProcess(tmp_path).start()
    try:
        out = io.StringIO()
        call_command("experiment", "--set", "team", "--candidate", "new", "--add", str(b.pk), "--suite", "all",
                     "--trials", "2", "--options", '{"max_rounds": 4}', "--wait", "--poll", "0.5", "--user", "cleo",
                     stdout=out)
    finally:
        worker.stop()
    text = out.getvalue()
    experiment = Experiment.objects.get()
    assert f"Experiment #{experiment.pk} started: team candidate 1 against team v1 on all v1 (8 questions), 4 runs." \
        in text
    lines = text.split("\r")[-1]
    assert re.search(r"candidate team candidate 1: EX 62\.50% \(5/8\), 62\.50% \(5/8\)   mean 62\.50%, "
                     r"min 62\.50%, max 62\.50%   \d+ tokens, 2\.0 rounds per question", lines)
    assert re.search(r"baseline  team v1: EX 37\.50% \(3/8\), 37\.50% \(3/8\)   mean 37\.50%, min 37\.50%, "
                     r"max 37\.50%", lines)
    assert (f"interactive_t2s, sampling seed {experiment.options['sampling_seed']} for both versions "
            "(+1000 per trial after the first)") in lines
    assert "2 gained (right more often with the candidate):" in lines
    assert "  #1 shop: candidate 2/2, baseline 0/2" in lines and "  #4 shop: candidate 2/2, baseline 0/2" in lines
    assert "0 lost (right less often with the candidate)" in lines
    assert "No clear difference: +25.0 points" in lines
    assert all(r.status == Run.Status.DONE and r.created_by.username == "cleo"
               for r in Run.objects.filter(experiment_run__experiment=experiment))
