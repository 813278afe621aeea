"""python manage.py load_benchmarks FILE.json|FILE.csv"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from catalog.benchmarks import benchmarks_load
from catalog.data_schema import CatalogFileError


class Command(BaseCommand):
    help = (
        "Load published benchmark measurements shared by every profile from a JSON file "
        "(catalog/data/shared/benchmarks.json: sources + benchmarks) or a CSV file (a header of "
        "benchmark fields, the citation in 'source'). Every row is checked first; a bad row is "
        "refused with the file, row and field named, and nothing changes."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="Path to a .json or .csv benchmark file.")

    def handle(self, *args, file: str, **options):
        try:
            summary = benchmarks_load(path=Path(file))
        except CatalogFileError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(summary))
