"""Write one version of an exemplar set as JSON (to stdout), for import_exemplars --format json."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from annotations.exemplars.importer import export_version
from annotations.models import ExemplarSet


class Command(BaseCommand):
    help = "Export a set's version (default: the latest) as JSON on stdout."

    def add_base_argument(self, parser, *args, **kwargs) -> None:
        if "--version" in args:  # ours is the set's version number, not Django's version
            return
        super().add_base_argument(parser, *args, **kwargs)

    def add_arguments(self, parser) -> None:
        parser.add_argument("set", help="Name of the exemplar set.")
        parser.add_argument("--version", type=int, dest="number", help="Version number (default: the latest).")

    def handle(self, *args, **opts) -> None:
        exemplar_set = ExemplarSet.objects.filter(name=opts["set"]).first()
        if exemplar_set is None:
            raise CommandError(f"No exemplar set named {opts['set']!r}.")
        versions = exemplar_set.versions.order_by("-number")
        version = versions.filter(number=opts["number"]).first() if opts["number"] else versions.first()
        if version is None:
            raise CommandError(f"{exemplar_set.name} has no version {opts['number'] or ''}".strip() + ".")
        self.stdout.write(json.dumps(export_version(version), ensure_ascii=False, indent=2))
