"""Create the local staff account for the embedded default setup (never in production)."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

USERNAME = "admin"
PASSWORD = "admin"  # noqa: S105 - local-only account, refused when DEBUG is off


class Command(BaseCommand):
    help = "Create a local staff superuser admin/admin. Refused unless DJANGO_DEBUG is true."

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError(
                "Refusing to create the local admin/admin account with DJANGO_DEBUG=false. "
                "In production use `manage.py createsuperuser`."
            )
        user_model = get_user_model()
        if user_model.objects.filter(username=USERNAME).exists():
            self.stdout.write(f"Local staff account '{USERNAME}' already exists.")
            return
        user_model.objects.create_superuser(USERNAME, "admin@localhost", PASSWORD)
        self.stdout.write(f"Created local staff account '{USERNAME}' (password '{PASSWORD}').")
