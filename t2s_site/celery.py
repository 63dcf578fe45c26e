"""The Celery app; tasks live in each Django app's ``tasks.py``."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "t2s_site.settings")

app = Celery("t2s_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
