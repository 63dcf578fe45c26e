"""Editing a taxonomy version in the admin saves a new version."""

import pytest
from django.contrib.admin.sites import AdminSite
from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import RequestFactory

from annotations.labels.admin import TaxonomyVersionAdmin, TaxonomyVersionForm
from annotations.labels.models import TaxonomyVersion
from annotations.labels.selectors import default_taxonomy_version

pytestmark = pytest.mark.django_db


def test_saving_a_version_in_the_admin_creates_the_next_version(staff):
    old = default_taxonomy_version()
    form = TaxonomyVersionForm(instance=old)
    text = form.fields["categories_text"].initial
    assert text.splitlines()[0].startswith("golden_wrong | Golden Wrong | Mismatch | 1 | ")
    assert text.splitlines()[0].endswith("| yes")
    edited = text.replace("Reasoning | Error | 9", "Reasoning | Error | 9 | Wrong joins, grouping or nesting.", 1)
    edited = edited.replace("| Wrong joins, grouping or nesting. | The SQL structure is wrong, beyond column choice.",
                            "| Wrong joins, grouping or nesting.")
    form = TaxonomyVersionForm({"taxonomy": old.taxonomy_id, "note": "sharper Reasoning", "categories_text": edited},
                               instance=old)
    assert form.is_valid(), form.errors
    request = RequestFactory().post("/")
    request.user = staff
    request.session = {}
    request._messages = FallbackStorage(request)
    obj = form.save(commit=False)
    TaxonomyVersionAdmin(TaxonomyVersion, AdminSite()).save_model(request, obj, form, change=True)
    new = default_taxonomy_version()
    old = TaxonomyVersion.objects.get(number=1)  # the form's instance now points at the new version
    assert new.number == 2 and obj.pk == new.pk
    assert new.categories.get(key="reasoning").definition == "Wrong joins, grouping or nesting."
    assert old.categories.get(key="reasoning").definition.startswith("The SQL structure is wrong")
    assert new.categories.get(key="golden_empty").accepts_corrected_gold


def test_malformed_category_lines_are_refused():
    form = TaxonomyVersionForm({"taxonomy": default_taxonomy_version().taxonomy_id, "note": "",
                                "categories_text": "only | two"})
    assert not form.is_valid() and "Line 1" in str(form.errors)


@pytest.mark.django_db
def test_every_model_is_in_the_admin_and_its_list_loads(staff_client):
    from django.apps import apps
    from django.contrib import admin
    from django.urls import reverse

    for app in ("agent", "annotations"):
        for model in apps.get_app_config(app).get_models():
            assert model in admin.site._registry, f"{model.__name__} is not in the admin"
            url = reverse(f"admin:{app}_{model._meta.model_name}_changelist")
            assert staff_client.get(url).status_code == 200, url
