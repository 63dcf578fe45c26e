"""Writes of datasets and runs, one module per job (HackSoft style: views, tasks and commands call these).

- ``datasets``: importing a dataset's questions and registering its databases;
- ``predictions``: another system's prediction file as a run;
- ``launch``: a run of one of our strategies;
- ``dispatch``: starting a run's sessions and collecting them;
- ``control``: cancel, resume, progress;
- ``evaluation``: scoring a run.
"""

from .control import run_cancel, run_progress, run_resume
from .datasets import IMPORT_BATCH, dataset_import, db_resolver_for
from .dispatch import (
    DEFAULT_RUN_CONCURRENCY,
    RETRYABLE_SESSION,
    UNFINISHED_SESSION,
    run_dispatch,
    run_dispatch_queue,
    run_session_finished,
    runs_poll,
)
from .evaluation import run_awaits_missing_choice, run_evaluate, run_evaluate_queue
from .launch import questions_for, run_create_agent, run_pool_needed
from .predictions import run_choose_missing, run_import_predictions

__all__ = [
    "DEFAULT_RUN_CONCURRENCY", "IMPORT_BATCH", "RETRYABLE_SESSION", "UNFINISHED_SESSION", "dataset_import",
    "db_resolver_for", "questions_for", "run_awaits_missing_choice", "run_cancel", "run_choose_missing",
    "run_create_agent", "run_pool_needed", "run_dispatch", "run_dispatch_queue", "run_evaluate", "run_evaluate_queue",
    "run_import_predictions", "run_progress", "run_resume", "run_session_finished", "runs_poll",
]
