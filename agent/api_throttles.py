"""The API's rate limits per signed-in user (per address when anonymous), from ``REST_FRAMEWORK`` settings.

Its own module: DRF imports throttle classes while ``rest_framework.views`` is still loading.
"""

from __future__ import annotations

from rest_framework import throttling
from rest_framework.settings import api_settings


class _RatesFromSettings:
    """DRF binds ``THROTTLE_RATES`` when it is imported; read them per request so settings changes apply."""

    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)


class UserRateThrottle(_RatesFromSettings, throttling.UserRateThrottle):
    pass


class AnonRateThrottle(_RatesFromSettings, throttling.AnonRateThrottle):
    pass
