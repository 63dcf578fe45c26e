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
        # A finished session of a run frees its slot: the run's next questions start (run_session_finished).
        from agent.services import sessions
        from annotations.runs.services import run_session_finished

        sessions.on_session_finished("runs", lambda session_id: run_session_finished(session_id=session_id))
        # Every worker's lease keeper also revives runs nobody dispatched for three polls (a worker died with
        # the poll's message), so a run never waits for beat's sweep.
        from agent.services import leases
        from annotations.conf import annotations_settings
        from annotations.runs.services import runs_revive_dispatch

        leases.on_sweep("runs", lambda: runs_revive_dispatch(idle_s=3 * annotations_settings.DISPATCH_POLL_S))
        # ... and removes what uploads that never finished left behind (once an hour, in one process).
        from annotations.runs.uploads import abandoned_uploads_sweep_if_due

        leases.on_sweep("uploads", abandoned_uploads_sweep_if_due)

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
