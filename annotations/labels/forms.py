from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from annotations.labels.models import Queue, TaxonomyVersion
from annotations.runs.models import Run


class QueueForm(forms.ModelForm):
    run = forms.ModelChoiceField(queryset=Run.objects.all())
    taxonomy_version = forms.ModelChoiceField(queryset=TaxonomyVersion.objects.select_related("taxonomy"))
    assignees = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.filter(is_active=True).order_by("username"), required=False,
        help_text="Empty: anyone who may label.")

    class Meta:
        model = Queue
        fields = ["name", "run", "taxonomy_version", "db_id", "difficulty", "join_count", "max_annotators",
                  "blind", "assignees", "guidelines"]
        labels = {"db_id": "Database", "join_count": "JOINs written in the gold query", "blind": "Blind double annotation"}
        widgets = {"guidelines": forms.Textarea(attrs={"rows": 4, "placeholder": "e.g. Label Golden Wrong only when "
                                                                                 "you can write the right query."})}

    def __init__(self, *args, user=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from annotations import policies

        self.fields["run"].queryset = policies.visible_runs(user)


class CorrectedGoldForm(forms.Form):
    corrected_sql = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False, strip=True)
