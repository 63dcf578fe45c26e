"""Run the whole app in the foreground: web server and Celery worker together; Ctrl-C stops both."""

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Bootstrap, then run the web server (gunicorn) and a Celery worker until interrupted."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("T2S_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("T2S_PORT", "8000")))
        parser.add_argument("--web-workers", type=int, default=int(os.environ.get("T2S_WEB_WORKERS", "2")))
        parser.add_argument("--concurrency", type=int, default=int(os.environ.get("T2S_WORKER_CONCURRENCY", "8")),
                            help="Celery worker threads; agent sessions mostly wait on the LLM, so threads suit them.")
        parser.add_argument("--no-bootstrap", action="store_true")

    def handle(self, *args, host, port, web_workers, concurrency, no_bootstrap, **options):
        if not no_bootstrap:
            call_command("bootstrap")
        python = sys.executable
        web = [python, "-m", "gunicorn", "t2s_site.wsgi:application", "--bind", f"{host}:{port}",
               "--workers", str(web_workers), "--threads", "4", "--access-logfile", "-", "--graceful-timeout", "5"]
        # No -Q: this one worker consumes every queue of t2s_site.celery (sessions, dispatch, indexes, ...).
        worker = [python, "-m", "celery", "-A", "t2s_site", "worker", "--pool", "threads",
                  "--concurrency", str(concurrency), "--loglevel", "INFO", "--without-gossip", "--without-mingle",
                  "--beat", "--schedule", str(settings.CELERY_BEAT_SCHEDULE_FILENAME)]
        procs = [subprocess.Popen(worker), subprocess.Popen(web)]
        self.stdout.write(self.style.SUCCESS(f"t2s-studio is running at http://{host}:{port}/  (Ctrl-C stops it)"))
        self.stdout.flush()

        stopping = False

        def stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping and all(p.poll() is None for p in procs):
                time.sleep(0.3)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 15
            for p in procs:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
        failed = [p for p in procs if p.returncode not in (0, -signal.SIGTERM, -signal.SIGINT, None)]
        if failed and not stopping:
            raise SystemExit(f"a child process exited with status {failed[0].returncode}")
        self.stdout.write("Stopped.")
