from django.apps import AppConfig


class AgentConfig(AppConfig):
    name = "agent"
    verbose_name = "Agent"

    def ready(self) -> None:
        from agent import tasks  # noqa: F401  registers the Celery tasks services enqueue by name
