"""The annotations app's receivers of the agent app's signals (connected in ``AnnotationsConfig.ready``).

The agent app never imports this one: it announces what happened (``agent.signals``) and runs learn it here.
"""

from django.dispatch import receiver

from agent import signals as agent_signals


@receiver(agent_signals.session_finished, dispatch_uid="annotations.run_session_finished")
def _session_finished(sender, *, session_id: int, **kwargs) -> None:
    from annotations.runs.services import dispatch

    dispatch.run_session_finished(session_id=session_id)  # a run's session frees its slot


@receiver(agent_signals.sweep, dispatch_uid="annotations.abandoned_uploads")
def _sweep(sender, **kwargs) -> None:
    from annotations.runs.uploads import abandoned_uploads_sweep_if_due

    abandoned_uploads_sweep_if_due()  # what uploads that never finished left behind (once an hour)
