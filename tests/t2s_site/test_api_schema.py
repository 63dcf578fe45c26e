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
                  "/api/runs/{id}/missing/", "/api/sessions/{id}/feedback/", "/api/sessions/{id}/rows/",
                  "/api/sessions/{id}/follow-up/"):
        assert route in paths, route
    turns = schema["paths"]["/api/sessions/{id}/turns/"]["get"]["parameters"]
    assert "after" in {p["name"] for p in turns}
    run_create = schema["components"]["schemas"]["RunCreate"]["properties"]
    assert "pool" in run_create and "exemplar_set_version" in run_create


@pytest.mark.django_db
def test_schema_page_needs_a_role(client, user):
    assert client.get("/api/schema/").status_code in (401, 403)
    client.force_login(user)
    assert client.get("/api/schema/").status_code == 200


@pytest.mark.django_db
def test_the_api_root_lists_tools_token_and_account_beside_the_resources(client, user):
    client.force_login(user)
    root = client.get("/api/", HTTP_ACCEPT="application/json").json()
    for key in ("tools", "token", "account", "sessions", "runs", "exemplars-from-failures"):
        assert key in root, key
    assert root["tools"].endswith("/api/tools/") and root["token"].endswith("/api/token/")
    assert client.get(root["account"]).status_code == 200
