"""Give a database loaded before the data files carried charge rates the files' defaults.

Until 0008 the engine kept the cloud-equivalent rates in code; they now come from the catalog,
so a database loaded earlier would charge every HPC GPU as "unknown" and rank on that. This
fills, once, each loaded profile that has no rate at all from its own data file (the file it
was loaded from, else catalog/data/<profile>.json), for the accelerators the database has.
Profiles with any rate (staff's) are left alone; a missing or unreadable file changes nothing.
The file is read as plain JSON on purpose: a migration must not depend on today's loader.
"""

import datetime
import json
import uuid
from pathlib import Path

from django.db import migrations

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def _rates_in(profile) -> list[dict]:
    for candidate in (Path(profile.source_file or ""), DATA_DIR / f"{profile.name}.json"):
        try:
            if candidate.is_file():
                rates = json.loads(candidate.read_text(encoding="utf-8")).get("charge_rates")
                if isinstance(rates, list):
                    return [rate for rate in rates if isinstance(rate, dict)]
        except (OSError, ValueError, AttributeError):
            continue
    return []


def _as_of(text):
    try:
        return datetime.date.fromisoformat(text)
    except (TypeError, ValueError):
        return None


def fill_default_rates(apps, schema_editor):
    Profile = apps.get_model("catalog", "Profile")
    Accelerator = apps.get_model("catalog", "Accelerator")
    ChargeRate = apps.get_model("catalog", "ChargeRate")
    CatalogVersion = apps.get_model("catalog", "CatalogVersion")
    accelerators = {acc.name: acc for acc in Accelerator.objects.all()}
    written = 0
    for profile in Profile.objects.all():
        if ChargeRate.objects.filter(profile=profile).exists():
            continue
        for rate in _rates_in(profile):
            accelerator = accelerators.get(rate.get("accelerator"))
            value = rate.get("rate_per_gpu_hour")
            if accelerator is None or not isinstance(value, (int, float)) or value < 0:
                continue
            ChargeRate.objects.create(
                profile=profile,
                accelerator=accelerator,
                rate_per_gpu_hour=float(value),
                source=f"{rate.get('basis', '')} ({rate.get('source', '')})"[:300],
                as_of=_as_of(rate.get("as_of")),
            )
            written += 1
    if written:
        # Historical models send no signals: replace the stamp so cached catalogs rebuild.
        CatalogVersion.objects.update_or_create(pk=1, defaults={"stamp": uuid.uuid4().hex})


class Migration(migrations.Migration):
    dependencies = [("catalog", "0008_charge_rate_as_of")]

    operations = [migrations.RunPython(fill_default_rates, migrations.RunPython.noop)]
