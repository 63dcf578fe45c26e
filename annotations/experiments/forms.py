"""Forms of the experiment pages: suite sources, candidate edits, an experiment's launch, a candidate's publish."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms

from agent.forms import strategy_choices
from annotations import policies
from annotations.experiments.models import Candidate, Experiment, SuiteVersion
from annotations.runs.models import Dataset, Run

_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s*$")


def parse_indexes(text: str) -> list[int]:
    """``"3, 5-8, 12"`` as ``[3, 5, 6, 7, 8, 12]``; a malformed part is a form error naming it."""
    out: list[int] = []
    for part in (text or "").replace(";", ",").split(","):
        if not part.strip():
            continue
        match = _RANGE.match(part)
        if match is None:
            raise forms.ValidationError(f"{part.strip()!r} is not an index or a range like 5-8.")
        low, high = int(match.group(1)), int(match.group(2) or match.group(1))
        if high < low or high - low > 5000:
            raise forms.ValidationError(f"{part.strip()!r} is not a range from low to high (at most 5000).")
        out.extend(i for i in range(low, high + 1) if i not in out)
    return out


class SourcesForm(forms.Form):
    """The sources of a suite version: any of them, united in this order (sample, failures, picked, suite)."""

    sample_size = forms.IntegerField(min_value=1, max_value=5000, required=False, label="Random sample of N",
                                     help_text="Drawn with the seed below (a new one when empty), stored.")
    sample_seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, required=False, label="Seed")
    sample_db_ids = forms.CharField(required=False, label="Only these databases",
                                    help_text="Comma-separated db_ids; empty: all.")
    failures_run = forms.ModelChoiceField(queryset=Run.objects.none(), required=False, label="Failures of run",
                                          empty_label="none")
    failures_categories = forms.CharField(
        required=False, label="labelled", help_text='Label categories (names or keys), e.g. "Selected Column"; '
                                                    "empty: every failure.")
    picked = forms.CharField(required=False, label="Questions by index", help_text="e.g. 3, 5-8, 12")
    union = forms.ModelChoiceField(queryset=SuiteVersion.objects.none(), required=False, label="And suite",
                                   empty_label="none", help_text="Every question of another suite's version.")

    def __init__(self, *args, user=None, dataset: Dataset | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        runs = policies.visible_runs(user).exclude(totals={}).select_related("dataset")
        versions = SuiteVersion.objects.filter(suite__in=policies.visible_suites(user)).select_related("suite")
        if dataset is not None:
            runs, versions = runs.filter(dataset=dataset), versions.filter(suite__dataset=dataset)
        self.fields["failures_run"].queryset = runs
        self.fields["failures_run"].label_from_instance = lambda r: f"#{r.pk} {r.name} ({r.dataset.name})"
        self.fields["union"].queryset = versions.order_by("suite__name", "-number")

    def clean_picked(self) -> list[int]:
        return parse_indexes(self.cleaned_data.get("picked") or "")

    def sources(self) -> list[dict[str, Any]]:
        data = self.cleaned_data
        sources: list[dict[str, Any]] = []
        if data.get("sample_size"):
            sources.append({"kind": "sample", "size": data["sample_size"], "seed": data.get("sample_seed"),
                            "db_ids": [d.strip() for d in (data.get("sample_db_ids") or "").split(",") if d.strip()]})
        if data.get("failures_run"):
            sources.append({"kind": "failures", "run": data["failures_run"].pk, "categories": [
                c.strip() for c in (data.get("failures_categories") or "").split(",") if c.strip()]})
        if data.get("picked"):
            sources.append({"kind": "picked", "questions": data["picked"]})
        if data.get("union"):
            sources.append({"kind": "suite", "suite": data["union"].suite.name, "version": data["union"].number})
        return sources

    def clean(self):
        data = super().clean()
        if not self.errors and not self.sources():
            raise forms.ValidationError("Give at least one source: a sample, a run's failures, questions by index "
                                        "or another suite.")
        return data


class SuiteCreateForm(SourcesForm):
    name = forms.CharField(max_length=200)
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), to_field_name="name")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    field_order = ["name", "dataset", "description"]

    def __init__(self, *args, user=None, **kwargs) -> None:
        super().__init__(*args, user=user, **kwargs)
        self.fields["dataset"].queryset = policies.visible_datasets(user)


class CandidateEditForm(forms.Form):
    title = forms.CharField(max_length=200, required=False)
    tool_description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}),
                                       help_text="Empty: the agent's own tool description.")


class CandidateAddForm(forms.Form):
    exemplar = forms.IntegerField(min_value=1, label="Exemplar #")


class ExperimentForm(forms.Form):
    suite_version = forms.ModelChoiceField(queryset=SuiteVersion.objects.none(), required=False, label="Suite",
                                           empty_label="choose a suite")
    default_suite = forms.BooleanField(required=False, label="The failures with the same labels (new suite)")
    baseline = forms.ChoiceField(choices=(), label="Baseline")
    strategy = forms.ChoiceField(choices=())
    trials = forms.IntegerField(min_value=1, max_value=Experiment.MAX_TRIALS, initial=3, label="Trials",
                                help_text="Runs of each version; 3 or more show the run-to-run spread.")
    options = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Options (JSON)",
                              help_text='The strategy\'s options for every run, e.g. {"max_rounds": 8}.')
    max_concurrency = forms.IntegerField(min_value=1, max_value=256, required=False,
                                         help_text="Sessions at once over all the runs; empty: the endpoint's.")
    spend_cap = forms.FloatField(min_value=0, required=False, label="Spend cap (USD)",
                                 help_text="For the whole experiment, shared evenly between its runs.")
    name = forms.CharField(max_length=200, required=False)

    def __init__(self, *args, user=None, candidate: Candidate, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.candidate = candidate
        exemplar_set = candidate.exemplar_set
        self.fields["suite_version"].queryset = (SuiteVersion.objects.filter(
            suite__in=policies.visible_suites(user)).select_related("suite", "suite__dataset")
            .order_by("suite__name", "-number"))
        self.fields["suite_version"].label_from_instance = (
            lambda v: f"{v.suite.name} v{v.number} ({v.question_count} questions of {v.suite.dataset.name})")
        choices = [(f"v{v.pk}", f"{exemplar_set.name} v{v.number} (published)")
                   for v in policies.visible_versions(user).filter(exemplar_set=exemplar_set).order_by("-number")]
        choices += [(f"c{c.pk}", f"{c} (candidate{': ' + c.title if c.title else ''})")
                    for c in policies.visible_candidates(user).filter(exemplar_set=exemplar_set,
                                                                     state=Candidate.State.OPEN)
                    .exclude(pk=candidate.pk).order_by("-number")]
        self.fields["baseline"].choices = choices
        self.fields["strategy"].choices = strategy_choices()
        self.user = user

    def clean_options(self) -> dict[str, Any]:
        text = (self.cleaned_data.get("options") or "").strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except ValueError:
            raise forms.ValidationError("Write the options as a JSON object, e.g. {\"max_rounds\": 8}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("The options are a JSON object, e.g. {\"max_rounds\": 8}.")
        return value

    def clean_baseline(self) -> dict[str, Any]:
        value = self.cleaned_data["baseline"]
        kind, pk = value[:1], value[1:]
        if kind == "v":
            return {"baseline_version": policies.visible_versions(self.user).get(pk=int(pk))}
        return {"baseline_candidate": policies.visible_candidates(self.user).get(pk=int(pk))}

    def clean(self):
        data = super().clean()
        if not data.get("suite_version") and not data.get("default_suite"):
            self.add_error("suite_version", "Choose the suite to run on.")
        return data


class CandidatePublishForm(forms.Form):
    note = forms.CharField(required=False, max_length=2000)
    confirm_regression = forms.BooleanField(required=False, label="Publish it anyway")
