"""Forms of the exemplar pages, and composing an action from a tool's argument fields."""

from __future__ import annotations

from collections.abc import Mapping

from django import forms

from agent.models import Database
from agent.tool_calls import action_text, call_from_fields
from agent.tools import TOOL_NAMES

STEP_TOOLS = (*TOOL_NAMES, "Done", "Raw")


def compose_action(tool: str, data: Mapping[str, str]) -> str:
    """The action text from the console's per-tool fields (``Raw``: the text as typed)."""
    if tool == "Done":
        return "Done"
    if tool == "Raw":
        return (data.get("action") or "").strip()
    try:
        args, kwargs = call_from_fields(tool, data)
    except ValueError as exc:
        raise forms.ValidationError(str(exc)) from None
    return action_text(tool, args, kwargs)


class ExemplarCreateForm(forms.Form):
    database = forms.ModelChoiceField(queryset=Database.objects.ready(), to_field_name="name")
    question = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    evidence = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class ExemplarEditForm(forms.Form):
    question = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    evidence = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    tags = forms.CharField(required=False, help_text='Comma separated, e.g. "empty result, 3 joins".')


class SetCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class PreviewForm(forms.Form):
    database = forms.ModelChoiceField(queryset=Database.objects.ready(), to_field_name="name")
    question = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    evidence = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    use_evidence = forms.BooleanField(required=False, label="Send the evidence (BIRD setting)")
    tools = forms.MultipleChoiceField(choices=[(t, t) for t in TOOL_NAMES], initial=list(TOOL_NAMES), required=False,
                                      widget=forms.CheckboxSelectMultiple, label="Enabled tools (none: all)")

    def clean_tools(self) -> list[str]:
        return self.cleaned_data.get("tools") or list(TOOL_NAMES)
