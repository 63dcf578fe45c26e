"""Import an exemplar set: the paper authors' prompt folders, or a JSON file from export_exemplars."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from agent.management.acting import on_behalf_of
from annotations import policies
from annotations.exemplars.importer import TOOL_DESC, ImportProblem, import_interactive_t2s, import_json


class Command(BaseCommand):
    help = ("Import exemplars as a new set with its first version. --format interactive-t2s reads a dataset "
            "folder (tool_desc.txt + database folders with schema.txt and trajectory files), or a folder of "
            "such folders (one set each); --format json reads a file written by export_exemplars. Imported "
            "exemplars are approved on import (the importing user is their reviewer). All or nothing.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("path")
        parser.add_argument("--format", choices=["interactive-t2s", "json"], required=True)
        parser.add_argument("--name", help="Name of the new set (default: the folder name, or the set name in the JSON).")
        parser.add_argument("--database", action="append", default=[], metavar="DB",
                            help="Link the exemplars of source database DB to the registered database DB "
                                 "(repeatable). Without it imported exemplars keep their schema text and no link.")
        parser.add_argument("--tool-desc", default=TOOL_DESC,
                            help="interactive-t2s: the tool description file to use (e.g. tool_desc_no_findpath.txt).")
        parser.add_argument("--workspace", metavar="SLUG",
                            help="Put the new set in this workspace (its members see it); with --user, one the "
                                 "account belongs to. Default: with --user, its only workspace; otherwise none.")
        parser.add_argument("--user", help="Username recorded as author and reviewer of the import; it must be a "
                                           "Curator (the rule of the pages). Without it: a trusted operator import.")

    def handle(self, *args, **opts) -> None:
        with on_behalf_of(opts["user"]) as user:
            if user is not None:
                policies.check_can_import_exemplars(user)
            self._import(user, opts)

    def _import(self, user, opts) -> None:
        path = Path(opts["path"])
        if not path.exists():
            raise CommandError(f"{path}: not found.")
        try:
            if opts["format"] == "json":
                result = import_json(path, user=user, name=opts["name"], databases=opts["database"],
                                     workspace=opts["workspace"])
            else:
                result = import_interactive_t2s(path, user=user, name=opts["name"], databases=opts["database"],
                                                tool_desc=opts["tool_desc"], workspace=opts["workspace"])
        except ImportProblem as exc:
            raise CommandError("Nothing was imported:\n" + "\n".join(exc.problems)) from None
        for line in result.report:
            self.stdout.write(line)
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
        for skipped in result.skipped:
            self.stderr.write(f"skipped: {skipped}")
        for version in result.versions:
            self.stdout.write(f"Imported set {version.exemplar_set.name!r} v{version.number}: "
                              f"{version.exemplar_count} exemplars.")
