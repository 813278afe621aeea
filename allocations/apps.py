from django.apps import AppConfig


class AllocationsConfig(AppConfig):
    name = "allocations"
    default_auto_field = "django.db.models.BigAutoField"
