"""The OpenAPI schema is complete and clean: every resource listed, no warning from drf-spectacular."""

from io import StringIO

import pytest
import yaml
from django.core.management import call_command


def test_openapi_schema_validates_without_warnings(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out), stdout=StringIO())
    schema = yaml.safe_load(out.read_text())
    paths = set(schema["paths"])
    for route in ("/api/databases/", "/api/databases/upload/", "/api/sessions/", "/api/imports/{id}/",
                  "/api/exemplars/", "/api/exemplars/{id}/steps/", "/api/exemplars/{id}/review/",
                  "/api/exemplar-sets/", "/api/exemplar-sets/{id}/publish/", "/api/exemplar-sets/upload/",
                  "/api/exemplar-set-versions/", "/api/datasets/", "/api/datasets/{name}/questions/", "/api/runs/",
                  "/api/runs/{id}/items/", "/api/runs/compare/", "/api/runs/{id}/agreement/", "/api/runs/{id}/cancel/",
                  "/api/queues/", "/api/labels/", "/api/labels/final/", "/api/datasets/{name}/predictions/",
                  "/api/runs/{id}/missing/"):
        assert route in paths, route
    run_create = schema["components"]["schemas"]["RunCreate"]["properties"]
    assert "pool" in run_create and "exemplar_set_version" in run_create


@pytest.mark.django_db
def test_schema_page_needs_a_role(client, user):
    assert client.get("/api/schema/").status_code in (401, 403)
    client.force_login(user)
    assert client.get("/api/schema/").status_code == 200
