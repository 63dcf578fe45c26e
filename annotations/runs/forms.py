import io

from django import forms

from agent import policies as agent_policies
from agent.forms import MultipleFileField, strategy_choices, tool_choices
from agent.models import Workspace
from annotations.exemplars.selectors import published_versions
from annotations.runs.models import Dataset, Run
from annotations.runs.pools import POOL_HELP
from annotations.runs.sampling import SAMPLE_MODES, SEEDED_MODES, TABLE10_PER_BUCKET, new_seed

MAX_PREDICTION_BYTES = 20 * 1024 * 1024


class DatasetUploadForm(forms.Form):
    kind = forms.ChoiceField(choices=Dataset.Kind.choices)
    name = forms.CharField(max_length=100, help_text="The new dataset's name, e.g. spider-dev.")
    archive = forms.FileField(
        required=False, label="Zip archive",
        help_text="Spider: dev.json and database/<db_id>/<db_id>.sqlite. BIRD: dev.json and dev_databases/ "
                  "(or BIRD's own dev.zip). JSONL/CSV: the questions file and database/<db_id>/<db_id>.sqlite.")
    questions = forms.FileField(
        required=False, label="Or a questions file",
        help_text="Spider or BIRD dev.json, or JSONL/CSV with question, SQL and database per record.")
    databases = MultipleFileField(required=False, label="with its database files",
                                  help_text="One SQLite file per database, named <db_id>.sqlite.")
    workspace = forms.ModelChoiceField(
        queryset=Workspace.objects.none(), required=False, to_field_name="slug", empty_label="none (only you)",
        help_text="Its members see the dataset, its databases and its runs at once. A database already registered "
                  "under a db_id (and visible to you) is used as it is when the upload's copy has the same tables, "
                  "or when the upload has no file for it.")

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        if user is not None:
            self.fields["workspace"].queryset = agent_policies.member_workspaces(user)

    def clean(self):
        data = super().clean()
        if bool(data.get("archive")) == bool(data.get("questions")):
            raise forms.ValidationError("Upload either a zip archive, or a questions file with its database files.")
        return data


class PredictionImportForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="e.g. the system that produced the predictions")
    format = forms.ChoiceField(choices=[("spider", "Spider text (one SQL per line, optional tab + db_id)"),
                                        ("bird", 'BIRD JSON ({"0": "SQL\\t----- bird -----\\tdb_id"})')])
    file = forms.FileField()

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_PREDICTION_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size // (1024 * 1024)} MB; prediction files up to "
                f"{MAX_PREDICTION_BYTES // (1024 * 1024)} MB are accepted.")
        # A text stream over the upload, read a line at a time by the importer (which reports bad UTF-8).
        upload.seek(0)
        return io.TextIOWrapper(upload.file, encoding="utf-8", newline=None)


class CompareForm(forms.Form):
    a = forms.ModelChoiceField(queryset=Run.objects.none(), label="Run A", empty_label="choose a run")
    b = forms.ModelChoiceField(queryset=Run.objects.none(), label="Run B", empty_label="choose a run")

    def __init__(self, *args, user=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from annotations import policies

        self.fields["a"].queryset = self.fields["b"].queryset = policies.visible_runs(user)


class RunLaunchForm(forms.Form):
    name = forms.CharField(max_length=200)
    strategy = forms.ChoiceField(choices=())
    exemplar_set_version = forms.ModelChoiceField(
        queryset=None, required=False, empty_label="the paper's set for this dataset (default)", label="Exemplar set",
        help_text="Interactive-T2S: the paper's 2-shot set for Spider or BIRD (with or without evidence) unless you "
                  "pick another; the other strategies use a set only when one is picked.")
    zero_shot = forms.BooleanField(required=False, label="Zero-shot (no exemplars)")
    paper_replica = forms.BooleanField(
        required=False, label="Paper replica",
        help_text="Interactive-T2S as the paper's authors ran it: their exemplars, observation formats, SQL "
                  "rules and case retry (README, Fidelity to the paper).")
    sample = forms.ChoiceField(
        choices=list(SAMPLE_MODES.items()), initial="random", widget=forms.RadioSelect, label="Questions",
        help_text="A random sample is drawn with the seed below, stored on the run: the same seed gives the same "
                  "questions again.")
    limit = forms.IntegerField(min_value=1, required=False, label="Sample size N",
                               help_text="How many questions a random or first-N sample takes (per bucket for the "
                                         "join-bucket sample; 50 when empty).")
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, required=False, label="Seed",
                              help_text="For a random sample; a new one is drawn when empty.")
    executable_only = forms.BooleanField(
        required=False, initial=True, label="Executable questions only",
        help_text="Leave out questions whose database is not available here: they cannot run and are not scored.")
    db_ids = forms.CharField(required=False, label="Databases",
                             help_text="Comma-separated db_ids to restrict to; empty: all.")
    max_concurrency = forms.IntegerField(min_value=1, max_value=64, required=False,
                                         help_text="Sessions at once; empty: the LLM endpoint's limit.")
    spend_cap = forms.FloatField(min_value=0, required=False, label="Spend cap (USD)",
                                 help_text="Stop starting sessions once the run has cost this much.")
    pool = forms.CharField(max_length=300, required=False, label="Example pool", help_text=POOL_HELP)
    without = forms.MultipleChoiceField(
        choices=(), required=False, widget=forms.CheckboxSelectMultiple, label="Without (ablation)",
        help_text="Tools switched off for every question, e.g. FindShortestPath as in the paper's Table 10 "
                  "(Interactive-T2S).")

    def __init__(self, *args, user=None, **kwargs) -> None:
        from annotations import policies

        super().__init__(*args, **kwargs)
        self.fields["strategy"].choices = strategy_choices()
        self.fields["without"].choices = tool_choices()
        self.fields["exemplar_set_version"].queryset = published_versions().filter(
            pk__in=policies.visible_versions(user).values("pk"))
        self.fields["exemplar_set_version"].label_from_instance = lambda v: f"{v.exemplar_set.name} v{v.number}"
        if not self.is_bound:
            self.initial.setdefault("seed", new_seed())  # shown, so the estimate and the run use the same sample

    def clean_db_ids(self) -> list[str]:
        return [d.strip() for d in self.cleaned_data["db_ids"].split(",") if d.strip()]

    def clean(self):
        data = super().clean()
        if data.get("sample") == "join-buckets" and not data.get("limit"):
            data["limit"] = TABLE10_PER_BUCKET
        if data.get("sample") in ("random", "first") and not data.get("limit"):
            self.add_error("limit", "Give the sample size N, or choose every question.")
        if data.get("sample") == "all":
            data["limit"] = data["seed"] = None
        elif data.get("sample") in SEEDED_MODES and data.get("seed") is None:
            data["seed"] = new_seed()
        return data
