import json
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotations.runs import selectors, services
from annotations.runs.models import Dataset


class Command(BaseCommand):
    help = ("Evaluate a prediction file against an imported dataset: EX (and Soft-F1), by difficulty and by "
            "number of tables joined. --save NAME keeps it as a run to browse, compare and label.")

    def add_arguments(self, parser):
        parser.add_argument("--dataset", required=True)
        parser.add_argument("--predictions", required=True)
        parser.add_argument("--format", choices=["spider", "bird"], default=None,
                            help="Prediction file format (default: the dataset's).")
        parser.add_argument("--save", metavar="RUN_NAME", help="Store the evaluated predictions as a run.")
        parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--missing", choices=["wrong", "subset"], default=None,
                            help="When the file has fewer predictions than the dataset has questions: score the "
                                 "missing ones as wrong, or score only the given subset. Required then: a short "
                                 "file is never scored silently.")

    def handle(self, *args, dataset, predictions, format, save, json: bool, workers, missing,  # noqa: A002
               **options):
        ds = Dataset.objects.filter(name=dataset).first()
        if ds is None:
            raise CommandError(f"No dataset named {dataset!r}; import it with import_dataset.")
        path = Path(predictions)
        if not path.is_file():
            raise CommandError(f"No such file: {path}")
        fmt = format or ds.eval_mode
        try:
            with transaction.atomic(), path.open(encoding="utf-8") as handle:  # read as a stream
                run = services.run_import_predictions(dataset=ds, text=handle, fmt=fmt,
                                                      name=save or f"evaluate {path.name}", source_file=path.name,
                                                      missing=missing)
                if services.run_awaits_missing_choice(run):
                    counts = selectors.prediction_counts(run=run)
                    self._write_issues(path, run.import_issues)
                    raise CommandError(
                        f"{path.name}: {counts['text']}. Choose how to score them: --missing wrong (they count as "
                        f"wrong) or --missing subset (only the {counts['given']} predicted questions are scored).")
                run = services.run_evaluate(run=run, workers=workers)
                summary = selectors.run_summary(run=run)
                if not save:
                    transaction.set_rollback(True)  # figures only: nothing kept
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        if json:
            self.stdout.write(_json_dumps(summary))
            return
        self._write_issues(path, summary["import_issues"])
        self.stdout.write(selectors.render_summary(summary))
        if save:
            self.stdout.write(self.style.SUCCESS(f"Saved as run #{run.pk} ({run.name})."))

    def _write_issues(self, path: Path, issues: list[dict]) -> None:
        for issue in issues:
            where = f"line {issue['line']}: " if issue["line"] else ""
            self.stderr.write(f"{path.name}: {where}{issue['message']}")


def _json_dumps(data) -> str:
    return json.dumps(data, indent=2, default=str)
