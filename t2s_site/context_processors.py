from django.http import HttpRequest

from agent.services.sessions import default_llm_endpoint


def studio(request: HttpRequest) -> dict:
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    return {"llm_configured": default_llm_endpoint() is not None}
