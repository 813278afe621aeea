"""The catalog version follows every row write, wherever it comes from.

The admin, the loader and services save and delete model instances; those fire Django's model
signals, which land here. Bulk writes (`update()`, `bulk_create()`, ...) fire no signals and
are covered by `CatalogQuerySet`. Either way the stamp changes in the writer's transaction.
Like django.contrib.sites' cache, this is cache bookkeeping, not business logic.
"""

from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import m2m_changed, post_delete, post_save


def catalog_changed(sender, **kwargs) -> None:
    from catalog.models import CatalogVersion

    if kwargs.get("raw"):  # loaddata: the fixture's rows are written as they are
        return
    action = kwargs.get("action")
    if action is not None and not action.startswith("post_"):
        return  # m2m_changed fires pre_ and post_; one bump is enough
    CatalogVersion.objects.bump()


def connect(app_config: AppConfig) -> None:
    from catalog.models import CatalogVersion

    for model in app_config.get_models(include_auto_created=True):
        if model is CatalogVersion:
            continue
        uid = f"catalog-version-{model._meta.label_lower}"
        post_save.connect(catalog_changed, sender=model, dispatch_uid=f"{uid}-save")
        post_delete.connect(catalog_changed, sender=model, dispatch_uid=f"{uid}-delete")
        if model._meta.auto_created:  # a ManyToMany table: Partition.node_types
            m2m_changed.connect(catalog_changed, sender=model, dispatch_uid=f"{uid}-m2m")
