from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    name = "annotations"
    verbose_name = "Annotations"

    def ready(self) -> None:
        # The agent app never imports this one: exemplar set versions reach its Ask form, API and
        # `ask` command through the few-shot source registered here.
        from agent.services import few_shot
        from annotations import tasks  # noqa: F401  registers the Celery tasks services enqueue by name
        from annotations.exemplars.selectors import VersionFewShotSource

        few_shot.register_source(VersionFewShotSource())
