"""Celery tasks of the annotations app: ids in, a service call, nothing returned."""

from celery import shared_task
from celery.signals import worker_ready

from agent.services.jobs import enqueue_now
from annotations.runs import services
from annotations.runs.models import Run


@shared_task(acks_late=True, ignore_result=True)
def evaluate_run(run_id: int) -> None:
    run = Run.objects.filter(pk=run_id).select_related("dataset").first()
    if run is not None:
        services.run_evaluate(run=run)


# Acknowledged on receipt, like the poll below: a pass is quick and idempotent, and a message lost with a
# worker or a broker is made up for by beat's next poll (no worker holds one unacknowledged).
@shared_task(acks_late=False, ignore_result=True)
def dispatch_run(run_id: int) -> None:
    services.run_dispatch(run=Run(pk=run_id))


@shared_task(acks_late=False, ignore_result=True)
def poll_runs() -> None:
    services.runs_poll()


@shared_task(acks_late=True, ignore_result=True)
def import_uploaded_dataset(job_id: int) -> None:
    from agent.models import ImportJob
    from annotations.runs import uploads

    job = ImportJob.objects.filter(pk=job_id).select_related("created_by").first()
    if job is not None:
        uploads.dataset_upload_run(job=job)


@worker_ready.connect
def _poll_on_start(sender=None, **kwargs) -> None:
    # A worker that starts after a crash passes over the running runs at once, not at beat's next poll.
    enqueue_now("annotations.tasks.poll_runs", robust=True)
