from django.http import HttpRequest

from agent.services.sessions import default_llm_endpoint
from annotations import policies as annotation_policies


def studio(request: HttpRequest) -> dict:
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    user = request.user
    # Callables: a template calls one only where it is shown (one page), not a query on every page.
    return {"llm_configured": lambda: default_llm_endpoint() is not None,
            # agent's pages offer annotations' actions (Promote to exemplar) only to those who may use them
            "can_author_exemplars": lambda: annotation_policies.can_author_exemplars(user)}
