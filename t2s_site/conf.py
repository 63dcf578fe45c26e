"""Namespaced access to the app's own settings (``settings.T2S``), DRF ``api_settings`` style."""

from __future__ import annotations

from typing import Any

from django.conf import settings


class _StudioSettings:
    def __getattr__(self, name: str) -> Any:
        try:
            return settings.T2S[name]
        except KeyError:
            raise AttributeError(f"settings.T2S has no {name!r}") from None


studio_settings = _StudioSettings()
