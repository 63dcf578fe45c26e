from django.http import HttpRequest

from agent.services.sessions import default_llm_endpoint


def studio(request: HttpRequest) -> dict:
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    # A callable: a template calls it only where it is shown (one page), not a query on every page.
    return {"llm_configured": lambda: default_llm_endpoint() is not None}
