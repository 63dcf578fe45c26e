import datetime
import functools
from dataclasses import fields

from django import forms
from django.core.exceptions import ValidationError
from django.urls import reverse

from agent import policies
from agent.models import AgentSession, AuditEntry, Database, WorkspaceMembership, name_validator
from agent.services import few_shot
from agent.services.sessions import NEEDS_POOL_SHORT, pool_refusal
from agent.strategies import STRATEGIES, FewShot
from agent.tools import tool_names

STRATEGY_LABELS = {
    "interactive_t2s": "Interactive-T2S (ReAct agent with tools)",
    "dart_sql": "DART-SQL (question rewriting + execution-guided refinement)",
    "scl_sql": "SCL-SQL (self-contrastive loop)",
    "hdsp": "HDSP (step-by-step prompt + SQL quality feedback)",
}


def add_service_errors(form: forms.Form, exc: ValidationError) -> None:
    """A service's refusal shown on the form: errors keyed by a form field go beside it, the rest on top."""
    errors = exc.message_dict if hasattr(exc, "error_dict") else {None: exc.messages}
    for field, messages in errors.items():
        form.add_error(field if field in form.fields else None, messages)


def few_shot_choices(user=None, database=None) -> list[tuple[object, str]]:
    """The sets ``user`` may pick; for a database, only those usable on it (no BIRD set for Chinook)."""
    return [("", "the paper's set for this database (default)"), *few_shot.choices(user, database)]


def tool_choices() -> list[tuple[str, str]]:
    """The registered tools, read when a form is built (so a tool registered later is offered)."""
    return [(t, t) for t in tool_names()]


def strategy_choices() -> list[tuple[str, str]]:
    return [(name, STRATEGY_LABELS.get(name, name)) for name in STRATEGIES]


def single_question_strategy_choices() -> list[tuple[str, str]]:
    """The strategies for a question asked on its own; one that needs an example pool keeps its place, labelled
    with why it cannot run here (``StrategySelect`` disables it)."""
    return [(name, label if not STRATEGIES[name].needs_pool else f"{STRATEGIES[name].display_name()} — "
             f"{NEEDS_POOL_SHORT}") for name, label in strategy_choices()]


class StrategySelect(forms.Select):
    """A strategy select that shows the strategies a single question cannot run as disabled options."""

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):
        option = super().create_option(name, value, label, selected, index, subindex=subindex, attrs=attrs)
        if value in STRATEGIES and STRATEGIES[value].needs_pool:
            option["attrs"]["disabled"] = True
        return option


class DatabaseRegisterForm(forms.Form):
    name = forms.CharField(max_length=100, validators=[name_validator],
                           help_text="Short name used in URLs and on the command line, e.g. chinook.")
    location = forms.CharField(
        max_length=2000,
        help_text="Absolute path of a SQLite file on the server, or a PostgreSQL DSN "
        "(postgresql://reader:password@host:5432/dbname). Passwords are never shown back.",
        widget=forms.TextInput(attrs={"placeholder": "/data/shop.sqlite or postgresql://reader@host/db"}),
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class DatabaseUploadForm(forms.Form):
    name = forms.CharField(max_length=100, validators=[name_validator],
                           help_text="Short name used in URLs and on the command line, e.g. shop.")
    file = forms.FileField(label="SQLite file", help_text="A SQLite database file (.sqlite, .sqlite3, .db).")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (Django's documented pattern); cleans to a list, empty when none."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        if isinstance(data, list | tuple):
            return [super(MultipleFileField, self).clean(d, initial) for d in data if d]
        return [super().clean(data, initial)] if data else []


class OnceModelChoiceIterator(forms.models.ModelChoiceIterator):
    """A select's choices read once per form: rendering one iterates them twice (the ``required`` attribute looks
    at the first choice), a query each time."""

    def __iter__(self):
        if not hasattr(self, "_rows"):
            self._rows = list(super().__iter__())
        return iter(self._rows)


class AskForm(forms.Form):
    database = forms.ModelChoiceField(queryset=Database.objects.ready(), to_field_name="name", empty_label=None)
    question = forms.CharField(max_length=4000, widget=forms.Textarea(
        attrs={"rows": 3, "placeholder": "e.g. Which five artists have the most tracks in the Rock genre?",
               "autofocus": True}))
    evidence = forms.CharField(required=False, max_length=4000, widget=forms.Textarea(attrs={"rows": 1}),
                               help_text="Optional hint or external knowledge (as in BIRD).")
    strategy = forms.ChoiceField(choices=single_question_strategy_choices, widget=StrategySelect)
    exemplar_set_version = forms.TypedChoiceField(
        choices=few_shot_choices, coerce=int, required=False, empty_value=None, label="Exemplar set",
        error_messages={"invalid_choice": "This exemplar set is not usable on this database (the paper's BIRD "
                                          "sets are for BIRD databases); choose another."},
        help_text="Few-shot trajectories from a published set version. Interactive-T2S uses the paper's 2-shot "
                  "set (Spider, or BIRD for a BIRD database) unless you pick another or ask for zero-shot.")
    zero_shot = forms.BooleanField(required=False, label="Zero-shot (no exemplars)")
    paper_replica = forms.BooleanField(
        required=False, label="Paper replica",
        help_text="The agent as the paper's authors ran it: their exemplars, their observation formats, their "
                  "code's SQL rules and case retry (see README, Fidelity to the paper).")
    max_rounds = forms.IntegerField(min_value=1, max_value=30, required=False,
                                    widget=forms.NumberInput(attrs={"placeholder": "paper default"}))
    temperature = forms.FloatField(min_value=0, max_value=2, required=False,
                                   widget=forms.NumberInput(attrs={"placeholder": "paper default", "step": "0.05"}))
    tools = forms.MultipleChoiceField(choices=tool_choices, initial=tool_names,
                                      widget=forms.CheckboxSelectMultiple,
                                      help_text="Switch tools off for ablations (the paper's run without FindShortestPath).")

    def __init__(self, *args, user=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["database"].iterator = OnceModelChoiceIterator
        self.fields["database"].queryset = policies.visible_databases(user).ready()
        # Choosing another database re-reads the exemplar sets usable on it (the Ask page, by htmx).
        self.fields["database"].widget.attrs.update({
            "hx-get": reverse("ask"), "hx-trigger": "change", "hx-target": "#exemplar-set-field",
            "hx-select": "#exemplar-set-field", "hx-swap": "outerHTML"})
        # Read once per form, when first needed (a callable's choices are read again at every look: rendering,
        # validation); each form has its own cache, so a version published since shows on the next page.
        self.user = user
        self.fields["exemplar_set_version"].choices = functools.cache(
            functools.partial(few_shot_choices, user, self._chosen_database()))

    def _chosen_database(self) -> Database | None:
        """The database the form is on (posted, else initial): the exemplar sets offered are those usable on it."""
        name = self.data.get("database") if self.is_bound else self.initial.get("database")
        if not name:
            return None
        return self.fields["database"].queryset.filter(name=name).first()

    def clean_strategy(self) -> str:
        strategy = self.cleaned_data["strategy"]
        refusal = pool_refusal(strategy)  # a disabled option can still be posted
        if refusal:
            raise ValidationError(refusal)
        return strategy

    def few_shot(self) -> FewShot | None:
        """The chosen version's exemplars as the session takes them (None: zero-shot)."""
        pk = self.cleaned_data.get("exemplar_set_version")
        return few_shot.by_id(pk, self.user) if pk is not None else None

    def options(self) -> dict:
        """The form's knobs that the chosen strategy's config has (the others keep the paper's defaults)."""
        wanted = {"max_rounds": self.cleaned_data["max_rounds"], "temperature": self.cleaned_data["temperature"],
                  "enabled_tools": list(self.cleaned_data["tools"])}
        known = {f.name for f in fields(STRATEGIES[self.cleaned_data["strategy"]].config_class)}
        # Empty knobs keep the strategy's own defaults (the papers' values differ per method).
        return {k: v for k, v in wanted.items() if k in known and v not in (None, "")}


class SessionFilterForm(forms.Form):
    database = forms.ModelChoiceField(queryset=Database.objects.all(), to_field_name="name", required=False,
                                      empty_label="any")
    status = forms.ChoiceField(choices=[("", "Any status"), *AgentSession.Status.choices], required=False)
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    q = forms.CharField(required=False, label="Question contains", max_length=500)
    strategy = forms.ChoiceField(required=False)
    model = forms.CharField(required=False, max_length=200, label="Model")

    def __init__(self, *args, user=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["database"].queryset = policies.visible_databases(user)
        self.fields["strategy"].choices = [("", "Any strategy"), *((name, name) for name in STRATEGIES)]


class AuditFilterForm(forms.Form):
    action = forms.ChoiceField(choices=[("", "Any action"), *AuditEntry.Action.choices], required=False)
    actor = forms.CharField(required=False, label="Who (username, or 'system')")
    target = forms.CharField(required=False, label="Target contains")
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}),
                            help_text="Up to and including this day.")

    def criteria(self) -> dict:
        """The selector's filters: dates as UTC day bounds (``until`` includes its day)."""
        if not self.is_valid():
            return {}
        data = {k: v for k, v in self.cleaned_data.items() if v}
        for key, extra in (("since", 0), ("until", 1)):
            if key in data:
                day = data[key] + datetime.timedelta(days=extra)
                data[key] = datetime.datetime.combine(day, datetime.time(), tzinfo=datetime.UTC)
        return data


class WorkspaceCreateForm(forms.Form):
    slug = forms.CharField(label="Short name", max_length=100, validators=[name_validator],
                           help_text="Letters, digits, '_', '.' or '-': used in URLs and commands.")
    name = forms.CharField(label="Title", max_length=200, required=False)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class WorkspaceMemberForm(forms.Form):
    kind = forms.ChoiceField(choices=[("user", "Account"), ("group", "Group")], initial="user")
    name = forms.CharField(label="User name or group name", max_length=150)
    role = forms.ChoiceField(choices=WorkspaceMembership.Role.choices, initial=WorkspaceMembership.Role.MEMBER)
