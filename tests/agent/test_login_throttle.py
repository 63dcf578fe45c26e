"""Guessing passwords: the login page, the admin's login and /api/token/ lock an account or an address for a while."""

from __future__ import annotations

import pytest
from django.contrib.auth import SESSION_KEY

from agent.conf import agent_settings
from agent.services import login_throttle

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
TOKEN = "/api/token/"


@pytest.fixture(autouse=True)
def fast_hashing(settings):
    """Hundreds of password checks: a cheap hasher keeps the module quick (the throttle does not care)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def clock(monkeypatch):
    """The throttle's clock, moved forward by hand (no sleeping)."""
    now = [1_000_000.0]
    monkeypatch.setattr(login_throttle, "clock", lambda: now[0])

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


def log_in(client, username, password, address="10.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def token(client, username, password, address="10.0.0.1"):
    return client.post(TOKEN, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_forty_wrong_logins_lock_the_account_until_the_lockout_ends(client, user, clock, settings):
    for _ in range(40):
        assert SESSION_KEY not in log_in(client, "ana", "wrong").wsgi_request.session
    refused = log_in(client, "ana", "pw-ana-123")
    assert SESSION_KEY not in client.session
    assert "sign-in is locked for 15 more minutes" in refused.content.decode()
    # From another address too: the account itself is locked.
    log_in(client, "ana", "pw-ana-123", address="10.9.9.9")
    assert SESSION_KEY not in client.session
    # The admin's login and the token endpoint refuse it as well.
    assert "sign-in is locked" in client.post("/admin/login/", {"username": "ana", "password": "pw-ana-123"},
                                             REMOTE_ADDR="10.9.9.9").content.decode()
    assert token(client, "ana", "pw-ana-123", address="10.9.9.9").status_code == 429

    clock(agent_settings.LOGIN_LOCKOUT_S + 1)
    log_in(client, "ana", "pw-ana-123")
    assert client.session[SESSION_KEY] == str(user.pk)


def test_forty_wrong_token_requests_lock_the_account_until_the_lockout_ends(client, user, clock, settings):
    limit = agent_settings.LOGIN_FAILURES_PER_ACCOUNT
    codes = [token(client, "ana", "wrong").status_code for _ in range(40)]
    assert codes == [400] * limit + [429] * (40 - limit)  # wrong, then locked
    refused = token(client, "ana", "pw-ana-123")
    assert refused.status_code == 429
    assert "sign-in is locked" in refused.json()["detail"] and int(refused["Retry-After"]) > 0
    # The login page is locked for this account too.
    log_in(client, "ana", "pw-ana-123")
    assert SESSION_KEY not in client.session

    clock(agent_settings.LOGIN_LOCKOUT_S + 1)
    assert token(client, "ana", "pw-ana-123").json()["token"]


def test_an_address_guessing_many_accounts_is_locked_but_others_are_not(client, user, django_user_model, clock):
    django_user_model.objects.create_user("bob", "bob@example.com", "pw-bob-123")
    for i in range(40):  # a different account name each time: no account reaches its own limit
        log_in(client, f"guess{i}", "wrong", address="10.6.6.6")
    log_in(client, "bob", "pw-bob-123", address="10.6.6.6")
    assert SESSION_KEY not in client.session
    assert token(client, "bob", "pw-bob-123", address="10.6.6.6").status_code == 429
    # The same account from another address is fine.
    log_in(client, "bob", "pw-bob-123", address="10.7.7.7")
    assert SESSION_KEY in client.session


def test_normal_use_is_unaffected(client, user):
    for _ in range(15):  # more than any limit
        log_in(client, "ana", "pw-ana-123")
        assert SESSION_KEY in client.session
        client.post("/accounts/logout/")
    # A few typos, then the right password: signed in, and the typos are forgotten.
    for _ in range(3):
        log_in(client, "ana", "wrong")
    log_in(client, "ana", "pw-ana-123")
    assert SESSION_KEY in client.session
    for _ in range(12):
        assert token(client, "ana", "pw-ana-123").status_code == 200


def test_wrong_password_message_is_the_usual_one_below_the_limit(client, user):
    page = log_in(client, "ana", "wrong").content.decode()
    assert "Please enter a correct" in page and "locked" not in page


def test_api_requests_are_throttled_per_user_by_settings(client, user, django_user_model, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"user": "5/minute", "anon": "60/minute"}}
    other = django_user_model.objects.create_user("bob", "bob@example.com", "pw-bob-123")
    client.force_login(user)
    assert [client.get("/api/databases/").status_code for _ in range(6)] == [200] * 5 + [429]
    client.force_login(other)
    assert client.get("/api/databases/").status_code == 200
