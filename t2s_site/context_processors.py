from django.http import HttpRequest

from .conf import studio_settings


def studio(request: HttpRequest) -> dict:
    return {"llm_configured": bool(studio_settings.LLM_BASE_URL or studio_settings.LLM_MODEL)}
