"""python manage.py load_benchmarks FILE.json|FILE.csv"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from catalog.benchmarks import benchmarks_load, benchmarks_shared_exist
from catalog.data_schema import CatalogFileError


class Command(BaseCommand):
    help = (
        "Load published benchmark measurements shared by every profile from a JSON file "
        "(catalog/data/shared/benchmarks.json: sources + benchmarks) or a CSV file (a header of "
        "benchmark fields, the citation in 'source'). Every row is checked first; a bad row is "
        "refused with the file, row and field named, and nothing changes. Values staff changed in "
        "the admin are kept and reported unless --reset."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="Path to a .json or .csv benchmark file.")
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Replace values staff changed in the admin with the file's.",
        )
        parser.add_argument(
            "--if-empty",
            action="store_true",
            help="Load only when there are no shared benchmarks yet (a fresh deployment).",
        )

    def handle(self, *args, file: str, reset=False, if_empty=False, **options):
        if reset and if_empty:
            raise CommandError("--reset and --if-empty contradict each other; choose one.")
        if if_empty and benchmarks_shared_exist():
            self.stdout.write("Shared benchmarks are already loaded; staff edits are kept.")
            return
        try:
            summary = benchmarks_load(path=Path(file), reset=reset)
        except CatalogFileError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(summary))
