"""Set up a run for a fault test, in a process of its own pointed at the test's private services.

``python -m tests.faults.scenario migrate`` migrates the database of ``DATABASE_URL``;
``python -m tests.faults.scenario setup N LLM_URL CONCURRENCY`` builds an N-question dataset (tests/support/
run_dataset.py), an endpoint on the replay server and a run over it, and prints the run's id. Its
dispatch message goes to ``CELERY_BROKER_URL``; the test then starts workers and injects faults.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "t2s_site.settings")
    import django

    django.setup()
    if argv[0] == "migrate":
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        return 0
    if argv[0] == "setup":
        n, llm_url, concurrency = int(argv[1]), argv[2], int(argv[3])
        from agent.models import LLMEndpoint
        from annotations.runs import services
        from tests.support.run_dataset import write_dataset

        path = write_dataset(Path(tempfile.mkdtemp(prefix="t2s-faults-data-")), n)
        dataset = services.dataset_import(kind="jsonl", path=path, name="faults", build_indexes=True)
        LLMEndpoint.objects.create(name="replay", base_url=llm_url, model="replay-model", api_key_env="",
                                   is_default=True, max_concurrency=64, timeout_s=20, max_retries=3)
        run = services.run_create_agent(dataset=dataset, name="faults", max_concurrency=concurrency, zero_shot=True)
        print(run.pk)
        return 0
    raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
