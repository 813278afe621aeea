"""Give a database loaded before the data files carried `currency_value` the files' values.

Without one, a system charging in its own unit (UVA's Service Units) has its charges "not
compared" by the ranking; the value is a fact the file has cited since (catalog/data/uva.json).
This fills, once, each system with no value whose profile's data file (the file it was loaded
from, else catalog/data/<profile>.json) gives one for the system's own currency. A system staff
gave a value is left alone; a missing or unreadable file, or a value the loader would refuse,
changes nothing. The file is read as plain JSON on purpose: a migration must not depend on
today's loader.
"""

import datetime
import json
import re
import uuid
from pathlib import Path

from django.db import migrations

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def _systems_in(profile) -> dict[str, dict]:
    for candidate in (Path(profile.source_file or ""), DATA_DIR / f"{profile.name}.json"):
        try:
            if candidate.is_file():
                systems = json.loads(candidate.read_text(encoding="utf-8")).get("systems")
                if isinstance(systems, list):
                    return {s.get("name"): s for s in systems if isinstance(s, dict)}
        except (OSError, ValueError, AttributeError):
            continue
    return {}


def _value(record: dict, currency: str) -> dict | None:
    value = record.get("currency_value")
    if not isinstance(value, dict) or not currency or record.get("currency") != currency:
        return None
    per_unit, to = value.get("per_unit"), value.get("currency")
    if not isinstance(per_unit, (int, float)) or not per_unit > 0:
        return None
    if not isinstance(to, str) or not re.fullmatch(r"[A-Z]{3}", to) or to == currency:
        return None
    try:
        as_of = datetime.date.fromisoformat(value.get("as_of"))
    except (TypeError, ValueError):
        as_of = None
    return {
        "currency_value_per_unit": float(per_unit),
        "currency_value_currency": to,
        "currency_value_source": f"{value.get('basis', '')} ({value.get('source', '')})"[:300],
        "currency_value_as_of": as_of,
    }


def fill_currency_values(apps, schema_editor):
    Profile = apps.get_model("catalog", "Profile")
    System = apps.get_model("catalog", "System")
    CatalogVersion = apps.get_model("catalog", "CatalogVersion")
    written = 0
    for profile in Profile.objects.all():
        records = _systems_in(profile)
        for system in System.objects.filter(profile=profile, currency_value_per_unit=None):
            values = _value(records.get(system.name) or {}, system.currency)
            if values is not None:
                System.objects.filter(pk=system.pk).update(**values)
                written += 1
    if written:
        # Historical models send no signals: replace the stamp so cached catalogs rebuild.
        CatalogVersion.objects.update_or_create(pk=1, defaults={"stamp": uuid.uuid4().hex})


class Migration(migrations.Migration):
    dependencies = [("catalog", "0010_system_currency_value")]

    operations = [migrations.RunPython(fill_currency_values, migrations.RunPython.noop)]
