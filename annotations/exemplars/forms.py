"""Forms of the exemplar pages, and composing an action from a tool's argument fields."""

from __future__ import annotations

from collections.abc import Mapping

from django import forms

from agent import policies
from agent.forms import tool_choices
from agent.models import Database
from agent.tools import registry, render_call, tool_names
from agent.tools.spec import DONE
from annotations import policies as annotation_policies

RAW = "Raw"  # the action typed as text


def step_tools() -> tuple[str, ...]:
    """What a step of the exemplar console can be: a registered tool, Done, or a raw action."""
    return (*tool_names(), DONE, RAW)


def compose_action(tool: str, data: Mapping[str, str]) -> str:
    """The action text from the console's per-tool fields (``Raw``: the text as typed)."""
    if tool == DONE:
        return DONE
    if tool == RAW:
        return (data.get("action") or "").strip()
    spec = registry.find(tool)
    if spec is None:
        raise forms.ValidationError(f"Unknown tool {tool!r}.")
    return render_call(tool, *spec.call_from_fields(data))


class _GrantedDatabaseForm(forms.Form):
    """A form whose ``database`` choices are the ready databases the user was granted."""

    def __init__(self, *args, user=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["database"].queryset = policies.visible_databases(user).ready()


class ExemplarCreateForm(_GrantedDatabaseForm):
    database = forms.ModelChoiceField(queryset=Database.objects.none(), to_field_name="name")
    question = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    evidence = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class ExemplarEditForm(forms.Form):
    question = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    evidence = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    tags = forms.CharField(required=False, help_text='Comma separated, e.g. "empty result, 3 joins".')


class _SetWorkspaceForm(forms.Form):
    """A new set's workspace: one the creator belongs to (its members see the set), preselected when they have
    exactly one. Offered as a choice, taken as a slug: the service checks it and refuses any other in the same
    words as a missing one (a choice field would answer differently for a workspace one cannot see)."""

    workspace = forms.CharField(required=False, max_length=100, widget=forms.Select,
                                help_text="Its members see the set; with none, whoever sees one of its versions.")

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        field = self.fields["workspace"]
        mine = annotation_policies.set_workspace_choices(user) if user is not None else []
        field.widget.choices = [("", "none (every reader)")] + [(w.slug, w.name) for w in mine]
        field.initial = getattr(annotation_policies.default_set_workspace(user), "slug", "")

    def clean_workspace(self) -> str | None:
        """The slug chosen ("" for none); None when the request did not name one (the creator's default)."""
        return self.cleaned_data["workspace"] if self.add_prefix("workspace") in self.data else None


class SetCreateForm(_SetWorkspaceForm):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    field_order = ["name", "description", "workspace"]


class SetUploadForm(_SetWorkspaceForm):
    file = forms.FileField(label="Zip or JSON file",
                           help_text="A .zip of the authors' prompt folder (tool_desc.txt and one folder per database "
                                     "with schema.txt and trajectory files), or a .json set exported here.")
    name = forms.CharField(max_length=200, required=False,
                           help_text="Name of the new set; empty: the folder name, or the set's name in the JSON.")


class PreviewForm(_GrantedDatabaseForm):
    database = forms.ModelChoiceField(queryset=Database.objects.none(), to_field_name="name")
    question = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    evidence = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    use_evidence = forms.BooleanField(required=False, label="Send the evidence (BIRD setting)")
    tools = forms.MultipleChoiceField(choices=tool_choices, initial=tool_names, required=False,
                                      widget=forms.CheckboxSelectMultiple, label="Enabled tools (none: all)")

    def clean_tools(self) -> list[str]:
        return self.cleaned_data.get("tools") or list(tool_names())
