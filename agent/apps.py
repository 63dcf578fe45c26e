from django.apps import AppConfig


class AgentConfig(AppConfig):
    name = "agent"
    verbose_name = "Agent"

    def ready(self) -> None:
        from django.db.models.signals import pre_save

        from agent import tasks  # noqa: F401  registers the Celery tasks services enqueue by name

        from .hygiene import clean_before_save

        pre_save.connect(clean_before_save, dispatch_uid="t2s-text-hygiene")
