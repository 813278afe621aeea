from django.contrib.admin.apps import AdminConfig


class TriageAdminConfig(AdminConfig):
    default_site = "config.admin.TriageAdminSite"
