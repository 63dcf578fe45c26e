"""T2S_PRODUCTION=1: one switch for a site served over HTTPS, with `manage.py check --deploy` clean."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.test import Client

pytestmark = pytest.mark.django_db


def deploy_check(tmp_path, **env) -> subprocess.CompletedProcess:
    # Without what the test process set for itself (the browser fixtures' DJANGO_ALLOW_ASYNC_UNSAFE, when a
    # browser test ran earlier in this pytest-xdist process): a deployment has none of it.
    environ = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG", "T2S_PRODUCTION",
                                                                "SECURE_COOKIES", "DJANGO_SETTINGS_MODULE",
                                                                "DJANGO_ALLOW_ASYNC_UNSAFE")}
    environ.update(T2S_VAR_DIR=str(tmp_path / "var"), **env)
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=settings.BASE_DIR, env=environ, capture_output=True, text=True, timeout=300)


def test_check_deploy_is_clean_with_the_production_switch(tmp_path):
    result = deploy_check(tmp_path, T2S_PRODUCTION="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_without_the_switch_check_deploy_names_what_is_missing(tmp_path):
    result = deploy_check(tmp_path)
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr


def test_production_settings_redirect_to_https_and_send_hsts(settings, user):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SESSION_COOKIE_SECURE = True
    client = Client()  # a new client loads the middleware with these settings
    assert client.get("/accounts/login/").headers["Location"].startswith("https://")
    secure = client.get("/accounts/login/", secure=True)
    assert secure.headers["Strict-Transport-Security"].startswith("max-age=31536000")
    client.post("/accounts/login/", {"username": "ana", "password": "pw-ana-123"}, secure=True)
    assert client.cookies["sessionid"]["secure"]
