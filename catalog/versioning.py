"""The catalog's version stamp: one row replaced by every write to a catalog table.

Readers that cache what they built from the catalog (advisor.engine_catalog) compare stamps to
know when to build it again. Model saves, deletes and M2M changes bump it through
catalog/signals.py; bulk writes skip those signals, so `CatalogQuerySet` bumps it itself.
The catalog's models use `CatalogManager`; `catalog.models` re-exports all of these.
"""

from __future__ import annotations

import uuid

from django.db import models


class CatalogVersionManager(models.Manager):
    def current(self) -> str | None:
        """The stamp of the catalog as it is now; None before the first catalog write."""
        return self.filter(pk=CatalogVersion.SINGLETON).values_list("stamp", flat=True).first()

    def bump(self) -> str:
        """A new stamp, in the caller's transaction: a rollback restores the old stamp with the
        old rows, and a random stamp is never reused, so a cache keyed by it is never stale."""
        stamp = uuid.uuid4().hex
        if not self.filter(pk=CatalogVersion.SINGLETON).update(stamp=stamp):
            self.update_or_create(pk=CatalogVersion.SINGLETON, defaults={"stamp": stamp})
        return stamp


class CatalogVersion(models.Model):
    """One row whose stamp changes with every write to the catalog's tables."""

    SINGLETON = 1
    stamp = models.CharField(max_length=32)
    objects = CatalogVersionManager()

    def __str__(self) -> str:
        return self.stamp


class CatalogQuerySet(models.QuerySet):
    """Bulk writes skip the model signals, so they change the catalog version here."""

    def update(self, **kwargs):
        rows = super().update(**kwargs)
        if rows:
            CatalogVersion.objects.bump()
        return rows

    update.alters_data = True

    def delete(self):
        deleted = super().delete()
        if deleted[0]:
            CatalogVersion.objects.bump()
        return deleted

    delete.alters_data = True
    delete.queryset_only = True

    def bulk_create(self, objs, *args, **kwargs):
        created = super().bulk_create(objs, *args, **kwargs)
        if created:
            CatalogVersion.objects.bump()
        return created

    def bulk_update(self, objs, fields, *args, **kwargs):
        rows = super().bulk_update(objs, fields, *args, **kwargs)
        if rows:
            CatalogVersion.objects.bump()
        return rows


CatalogManager = models.Manager.from_queryset(CatalogQuerySet)
