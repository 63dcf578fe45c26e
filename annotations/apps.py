from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate


def _publish_paper_sets(sender, using="default", **kwargs) -> None:
    """After every migrate (first run, a fresh test database, a flushed one): the paper's exemplar sets."""
    from django.db import router

    from annotations.models import ExemplarSet

    if not router.allow_migrate_model(using, ExemplarSet):
        return
    from annotations.exemplars.importer import ensure_paper_sets

    ensure_paper_sets()


def _labels_changed(**_signal) -> None:
    from annotations.labels.version import labels_changed

    labels_changed()


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
        # Receivers of the agent app's signals: a finished session dispatches its run, the sweep cleans uploads.
        from annotations import signals  # noqa: F401

        post_migrate.connect(_publish_paper_sets, sender=self, dispatch_uid="annotations_paper_sets")
        # Label counts are cached under a version every change of what they count replaces: the services that
        # write labels, reveals, queues, evaluations and questions replace it themselves (annotations.labels.version).
        # Deletes cascading from a run, a dataset or a question reach it here, through the items (once per
        # transaction): a receiver on the labels would make Django load and delete them one by one.
        from annotations.labels.models import Queue
        from annotations.runs.models import RunItem

        for model in (RunItem, Queue):
            post_delete.connect(_labels_changed, sender=model,
                                dispatch_uid=f"labels_changed_delete_{model.__name__}")
