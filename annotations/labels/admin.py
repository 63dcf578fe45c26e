"""Admin for taxonomies: a version is never edited; saving a version's form creates the next version.

Registered on the default admin site when imported (``annotations/admin.py`` imports this module).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages

from agent.admin import GrantScopedAdmin
from annotations import policies
from annotations.labels import services
from annotations.labels.models import (
    Category,
    Label,
    LabelReveal,
    Queue,
    Reservation,
    SuggestionEvent,
    Taxonomy,
    TaxonomyVersion,
)
from annotations.labels.version import labels_changed

FORMAT_HELP = ("One category per line: key | name | group | shortcut (1-9 or empty) | definition | "
               "corrected (yes if a label may carry a corrected gold query). Saving creates a new version; "
               "this one and the labels made with it stay as they are.")


def categories_as_text(version: TaxonomyVersion) -> str:
    return "\n".join(
        " | ".join([c.key, c.name, c.group, str(c.shortcut or ""), c.definition,
                    "yes" if c.accepts_corrected_gold else ""]).rstrip(" |")
        for c in version.categories.all())


def parse_categories(text: str) -> list[dict]:
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 5:
            raise forms.ValidationError(f"Line {number}: expected at least key | name | group | shortcut | "
                                        "definition.")
        key, name, group, shortcut, definition = parts[:5]
        if shortcut and not shortcut.isdigit():
            raise forms.ValidationError(f"Line {number}: the shortcut must be a digit 1-9 or empty.")
        out.append({"key": key, "name": name, "group": group, "shortcut": int(shortcut) if shortcut else None,
                    "definition": definition,
                    "accepts_corrected_gold": len(parts) > 5 and parts[5].lower() in ("yes", "true", "1")})
    if not out:
        raise forms.ValidationError("At least one category.")
    keys = [c["key"] for c in out]
    shortcuts = [c["shortcut"] for c in out if c["shortcut"] is not None]
    if len(set(keys)) != len(keys) or len(set(shortcuts)) != len(shortcuts):
        raise forms.ValidationError("Keys and shortcuts must be unique.")
    if any(not 1 <= s <= 9 for s in shortcuts):
        raise forms.ValidationError("Shortcuts are the keys 1 to 9.")
    return out


class TaxonomyVersionForm(forms.ModelForm):
    categories_text = forms.CharField(label="Categories", widget=forms.Textarea(attrs={"rows": 14, "cols": 120}),
                                      help_text=FORMAT_HELP)

    class Meta:
        model = TaxonomyVersion
        fields = ["taxonomy", "note"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["categories_text"].initial = categories_as_text(self.instance)
            self.fields["note"].initial = ""

    def clean_categories_text(self) -> list[dict]:
        return parse_categories(self.cleaned_data["categories_text"])


@admin.register(Taxonomy)
class TaxonomyAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "created_at")


@admin.register(TaxonomyVersion)
class TaxonomyVersionAdmin(admin.ModelAdmin):
    form = TaxonomyVersionForm
    list_display = ("__str__", "note", "created_by", "created_at")
    list_filter = ("taxonomy",)

    def save_model(self, request, obj, form, change) -> None:
        new = services.taxonomy_version_create(
            taxonomy=form.cleaned_data["taxonomy"], categories=form.cleaned_data["categories_text"],
            note=form.cleaned_data.get("note", ""), user=request.user)
        obj.pk, obj.number, obj.taxonomy = new.pk, new.number, new.taxonomy
        messages.info(request, f"Saved as a new version: {new}. Earlier versions are unchanged.")

    def save_related(self, request, form, formsets, change) -> None:
        """Categories were created with the version."""

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class LabelsChangedAdmin(GrantScopedAdmin):
    """A change made here changes what the cached label counts read (annotations.labels.version)."""

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        labels_changed()

    def delete_model(self, request, obj) -> None:
        super().delete_model(request, obj)
        labels_changed()

    def delete_queryset(self, request, queryset) -> None:
        super().delete_queryset(request, queryset)
        labels_changed()


@admin.register(Label)
class LabelAdmin(LabelsChangedAdmin):
    grant_scope = (("", policies.visible_labels),)

    def scope_rows(self, request, queryset):
        # and, as on every page, other annotators' labels in a blind queue stay hidden
        return policies.hide_blind_labels(request.user, super().scope_rows(request, queryset))

    list_display = ("item", "category", "annotator", "is_final", "updated_at")
    list_filter = ("category__key", "is_final", "taxonomy_version")
    raw_id_fields = ("item",)
    readonly_fields = ("item", "category", "taxonomy_version", "annotator", "corrected_ok", "corrected_row_count",
                       "corrected_preview", "corrected_error", "created_at", "updated_at")


@admin.register(Queue)
class QueueAdmin(LabelsChangedAdmin):
    grant_scope = (("", policies.visible_queues),)
    list_display = ("name", "run", "max_annotators", "created_by", "created_at")
    filter_horizontal = ("assignees",)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by the app itself: viewable (and deletable) in the admin, never edited by hand."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Category)
class CategoryAdmin(ReadOnlyAdmin):
    list_display = ("version", "position", "key", "name", "group", "shortcut")
    list_filter = ("group", "version__taxonomy")

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # part of an immutable taxonomy version: edit the taxonomy to make a new version


@admin.register(LabelReveal)
class LabelRevealAdmin(LabelsChangedAdmin, ReadOnlyAdmin):
    grant_scope = (("item__run", policies.visible_runs),)
    list_display = ("item", "user", "revealed_at")
    raw_id_fields = ("item",)


@admin.register(Reservation)
class ReservationAdmin(GrantScopedAdmin, ReadOnlyAdmin):
    grant_scope = (("item__run", policies.visible_runs),)
    list_display = ("item", "user", "expires_at", "created_at")
    raw_id_fields = ("item",)


@admin.register(SuggestionEvent)
class SuggestionEventAdmin(GrantScopedAdmin, ReadOnlyAdmin):
    grant_scope = (("item__run", policies.visible_runs),)

    def scope_rows(self, request, queryset):
        return policies.hide_blind_suggestion_events(request.user, super().scope_rows(request, queryset))

    list_display = ("item", "user", "category_key", "accepted", "shown_at")
    list_filter = ("category_key", "accepted")
    raw_id_fields = ("item",)
