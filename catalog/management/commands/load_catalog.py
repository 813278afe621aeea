"""python manage.py load_catalog [PROFILE | PATH.json]"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from catalog.data_schema import CatalogFileError
from catalog.services import catalog_load


class Command(BaseCommand):
    help = (
        "Load a catalog profile (catalog/data/<PROFILE>.json, default settings.CATALOG_PROFILE) "
        "or a JSON file. Validates everything first and writes in one transaction; re-running "
        "updates rows and never duplicates them. The loaded profile becomes the active one."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "profile",
            nargs="?",
            default=None,
            help="Profile name (default, lancaster, uva) or a path to a JSON file.",
        )
        parser.add_argument(
            "--no-activate",
            action="store_true",
            help="Load the profile without making it the active one.",
        )

    def handle(self, *args, profile=None, no_activate=False, **options):
        target = profile or settings.CATALOG_PROFILE
        try:
            summary = catalog_load(profile_or_path=target, activate=not no_activate)
        except CatalogFileError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(summary))
