"""What the apps' admins share: Django's admin hooks only, no app's models."""

from __future__ import annotations


class ViewOnlyAdminMixin:
    """A record staff may look at but never add, change or delete in the admin: what the
    system wrote (an advisor session, an imported Slurm job) stays as it was written."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
