"""python manage.py load_catalog [PROFILE | PATH.json] [--reset | --if-empty] [--no-activate]"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from catalog.data_schema import CatalogFileError
from catalog.services import catalog_is_empty, catalog_load


class Command(BaseCommand):
    help = (
        "Load a catalog profile (catalog/data/<PROFILE>.json, default settings.CATALOG_PROFILE) "
        "or a JSON file. Validates everything first and writes in one transaction. Creates what "
        "is missing and never overwrites what staff edited: values that differ from the file, "
        "and rows it does not list, are reported and kept. --reset makes the file win. The "
        "loaded profile becomes the active one."
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
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Replace the database's values with the file's and remove the profile's rows "
            "the file does not list, staff edits included.",
        )
        parser.add_argument(
            "--if-empty",
            action="store_true",
            help="Load only into a database with no catalog yet (a fresh deployment's start).",
        )

    def handle(
        self, *args, profile=None, no_activate=False, reset=False, if_empty=False, **options
    ):
        if reset and if_empty:
            raise CommandError("--reset and --if-empty contradict each other; choose one.")
        target = profile or settings.CATALOG_PROFILE
        if if_empty and not catalog_is_empty():
            self.stdout.write("The catalog is already loaded; staff edits are kept. Not loading.")
            return
        try:
            summary = catalog_load(profile_or_path=target, activate=not no_activate, reset=reset)
        except CatalogFileError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(summary))
