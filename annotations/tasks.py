"""Celery tasks of the annotations app: ids in, a service call, nothing returned."""

from celery import shared_task
from celery.signals import worker_ready

from annotations.conf import annotations_settings
from annotations.runs import services
from annotations.runs.models import Run


@shared_task(acks_late=True, ignore_result=True)
def evaluate_run(run_id: int) -> None:
    run = Run.objects.filter(pk=run_id).select_related("dataset").first()
    if run is not None:
        services.run_evaluate(run=run)


@shared_task(bind=True, acks_late=True, ignore_result=True)
def dispatch_run(self, run_id: int) -> None:
    # Finished sessions dispatch their run themselves (run_session_finished); this poll is the safety net for
    # a lost wake-up and for databases still being indexed, so it comes back only every DISPATCH_POLL_S.
    run = Run.objects.filter(pk=run_id).first()
    if run is not None and services.run_dispatch(run=run):
        self.apply_async((run_id,), countdown=annotations_settings.DISPATCH_POLL_S)


@shared_task(ignore_result=True)
def revive_run_dispatchers() -> None:
    services.runs_revive_dispatch()


@shared_task(acks_late=True, ignore_result=True)
def import_uploaded_dataset(job_id: int) -> None:
    from agent.models import ImportJob
    from annotations.runs import uploads

    job = ImportJob.objects.filter(pk=job_id).select_related("created_by").first()
    if job is not None:
        uploads.dataset_upload_run(job=job)


@worker_ready.connect
def _revive_on_start(sender=None, **kwargs) -> None:
    # A worker that starts after a crash dispatches the running runs at once: the poll's message may have
    # died with the previous process (held unacknowledged until the broker's visibility timeout).
    services.runs_revive_dispatch(idle_s=0)
