"""Sign-in that holds against guessing: a throttled backend, the login forms and the token endpoint that say
why a locked account is refused (rules in ``agent.services.login_throttle``; API rates: ``agent.api_throttles``).
"""

from __future__ import annotations

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import PermissionDenied, ValidationError
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import Throttled

from agent.services import login_throttle


class ThrottledModelBackend(ModelBackend):
    """Django's backend, refusing a locked account or address before the password is even checked."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        name = username if username is not None else kwargs.get(self._username_field())
        if login_throttle.locked_for(username=name, address=login_throttle.client_address(request)):
            raise PermissionDenied("sign-in locked")  # authenticate() stops here: no other backend is asked
        return super().authenticate(request, username=username, password=password, **kwargs)

    @staticmethod
    def _username_field() -> str:
        from django.contrib.auth import get_user_model

        return get_user_model().USERNAME_FIELD


class _LockoutMessage:
    """Says plainly that sign-in is locked (and for how long) instead of "wrong password"."""

    def clean(self):
        wait = login_throttle.locked_for(username=self.data.get("username"),
                                         address=login_throttle.client_address(self.request))
        if wait:
            raise ValidationError(login_throttle.lockout_message(wait), code="locked")
        return super().clean()


class ThrottledAuthenticationForm(_LockoutMessage, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(_LockoutMessage, AdminAuthenticationForm):
    pass


class ThrottledObtainAuthToken(ObtainAuthToken):
    """``POST /api/token/``: 429 with Retry-After while the account or address is locked."""

    def post(self, request, *args, **kwargs):
        username = request.data.get("username") if hasattr(request.data, "get") else None
        wait = login_throttle.locked_for(username=username, address=login_throttle.client_address(request))
        if wait:
            raise Throttled(wait=wait, detail=login_throttle.lockout_message(wait))
        return super().post(request, *args, **kwargs)
