"""Signals the agent app sends, for apps above it (the agent app never imports them).

- ``session_finished``: a session ended (any final status) and its outcome is committed; sent in the process
  that ran it, with ``session_id``. ``annotations`` collects a run's session and fills its slot on it.
- ``sweep``: the recovery sweep of lost queued sessions ran (``agent.services.leases.sweep``, in one worker's
  lease keeper or Celery beat's task, every ``queued_sweep_period``); receivers add their own clean-up.

Both are sent with ``send_robust``: a receiver's error is logged and never reaches the session or the sweep.
"""

from django.dispatch import Signal

session_finished = Signal()
sweep = Signal()
