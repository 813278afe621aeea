"""What one unit of a system's charge currency is worth (UVA's Service Unit: 0.01 USD): loaded
from the data file, refused when malformed, edited by staff in the admin, and reaching the
ranking, which compares charges in the profile's currency."""

from __future__ import annotations

import copy
import datetime as dt
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from advisor.engine import estimate
from advisor.engine_catalog import engine_catalog
from catalog.models import System
from tests.catalog.conftest import DATA
from tests.catalog.test_load_catalog import load, snapshot
from tests.engine.test_charge_currency import FINE_TUNE_13B

pytestmark = pytest.mark.django_db


@pytest.fixture
def uva_data() -> dict:
    return json.loads((DATA / "uva.json").read_text(encoding="utf-8"))


def _hpc(doc: dict) -> dict:
    hpc = doc["systems"][0]
    assert hpc["name"] == "uva-hpc"
    return hpc


def test_the_uva_file_loads_the_service_units_value_with_its_source_and_date():
    load("uva")
    hpc = System.objects.get(name="uva-hpc")
    assert (hpc.currency, hpc.currency_value_per_unit, hpc.currency_value_currency) == (
        "SU",
        0.01,
        "USD",
    )
    assert hpc.currency_value_source == (
        "purchased Service Units cost $0.01 each; Standard allocations are free (UVA-HW, UVA-ALLOC)"
    )
    assert hpc.currency_value_as_of == dt.date(2026, 5, 12)
    assert "0 values differ from the file" in load("uva")


def _break(doc: dict, how: str) -> dict:
    doc = copy.deepcopy(doc)
    hpc = _hpc(doc)
    value = hpc["currency_value"]
    if how == "negative":
        value["per_unit"] = -0.01
    elif how == "zero":
        value["per_unit"] = 0
    elif how == "lower-case code":
        value["currency"] = "usd"
    elif how == "not a code":
        value["currency"] = "DOLLARS"
    elif how == "to itself":
        hpc["currency"] = "USD"
    elif how == "no currency to convert from":
        hpc["currency"] = ""
    elif how == "no date":
        del value["as_of"]
    elif how == "unknown source":
        value["source"] = "UVA-HW, NOWHERE"
    elif how == "unknown field":
        value["rate"] = 0.01
    return doc


WHERE = "systems[0] (uva-hpc)"


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("negative", f"{WHERE}.currency_value.per_unit: Input should be greater than 0"),
        ("zero", f"{WHERE}.currency_value.per_unit: Input should be greater than 0"),
        (
            "lower-case code",
            f"{WHERE}.currency_value.currency: String should match pattern '^[A-Z]{{3}}$'",
        ),
        (
            "not a code",
            f"{WHERE}.currency_value.currency: String should match pattern '^[A-Z]{{3}}$'",
        ),
        (
            "to itself",
            f"{WHERE}.currency_value.currency: converts USD to itself; give its value in "
            "another currency",
        ),
        (
            "no currency to convert from",
            f"{WHERE}.currency: a currency_value needs the currency it converts from",
        ),
        ("no date", f"{WHERE}.currency_value.as_of: Field required"),
        (
            "unknown source",
            f"{WHERE}.currency_value.source: unknown source key 'NOWHERE' (add it to 'sources')",
        ),
        ("unknown field", f"{WHERE}.currency_value.rate: Extra inputs are not permitted"),
    ],
)
def test_a_bad_currency_value_names_file_entry_and_field_and_changes_nothing(
    how, message, uva_data, write_catalog
):
    load("uva")
    before = snapshot()
    path = write_catalog(_break(uva_data, how))
    with pytest.raises(CommandError) as excinfo:
        load(str(path))
    assert str(excinfo.value) == f"{path}: {message}"
    assert snapshot() == before


def test_a_reload_keeps_the_value_staff_changed_and_says_it_differs():
    load("uva")
    System.objects.filter(name="uva-hpc").update(currency_value_per_unit=0.02)
    summary = load("uva")
    assert "systems[0] (uva-hpc).currency_value_per_unit: 0.02 here, 0.01 in the file" in summary
    assert System.objects.get(name="uva-hpc").currency_value_per_unit == 0.02


def _admin_form_data(page) -> dict:
    """The change form's values as the browser would post them, inlines included."""
    forms = [page.context["adminform"].form]
    data = {}
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        management = formset.management_form
        data.update({bf.html_name: bf.value() for bf in management})
        forms += formset.forms[: formset.initial_form_count()]
    for form in forms:
        for bf in form:
            value = bf.value()
            if value is None or value is False:
                continue
            if value is True:
                value = "on"
            elif isinstance(value, dt.date):
                value = value.isoformat()
            data[bf.html_name] = value
    return data


def test_staff_set_the_service_units_value_in_the_admin_and_the_ranking_follows(admin_client):
    """Staff remove UVA's conversion: the SU charges are not compared and Rio (priced in USD)
    ranks first; staff give it back in the admin: UVA HPC's A100s rank first again. A value in
    the system's own currency is refused with the reason, and nothing changes."""
    load("uva")
    hpc = System.objects.get(name="uva-hpc")
    url = reverse("admin:catalog_system_change", args=[hpc.pk])
    page = admin_client.get(url)
    assert 'name="currency_value_per_unit"' in page.content.decode()
    data = _admin_form_data(page)

    cleared = {**data, "currency_value_per_unit": "", "currency_value_currency": ""}
    response = admin_client.post(url, cleared)
    assert response.status_code == 302, response.context and response.context["errors"]
    without = estimate(FINE_TUNE_13B, engine_catalog())
    assert without.recommendation.system == "uva-rio"
    su = [o for o in without.options if o.system == "uva-hpc" and o.eligible]
    assert all(o.charge.compared_total is None for o in su)

    itself = {**data, "currency_value_currency": "USD", "currency": "USD"}
    response = admin_client.post(url, itself)
    assert response.status_code == 200
    assert "a currency other than that one" in response.content.decode()
    assert System.objects.get(pk=hpc.pk).currency == "SU"

    response = admin_client.post(url, {**data, "currency_value_source": "RC price list"})
    assert response.status_code == 302, response.context and response.context["errors"]
    after = estimate(FINE_TUNE_13B, engine_catalog()).recommendation
    assert (after.system, after.accelerator) == ("uva-hpc", "a100-40-sxm4")
    assert after.charge.comparison == "0.01 USD per SU: RC price list, as of 2026-05-12"


def test_upgrading_a_database_loaded_without_values_gives_it_the_files_value():
    """Migration 0011 fills a system's value from its profile's file once; a value staff set
    stays."""
    from importlib import import_module

    from django.apps import apps

    fill = import_module("catalog.migrations.0011_fill_currency_values").fill_currency_values
    call_command("load_catalog", "uva", stdout=io.StringIO())
    System.objects.filter(name="uva-hpc").update(
        currency_value_per_unit=None, currency_value_currency="", currency_value_source=""
    )
    assert estimate(FINE_TUNE_13B, engine_catalog()).recommendation.system == "uva-rio"

    fill(apps, None)

    hpc = System.objects.get(name="uva-hpc")
    assert (hpc.currency_value_per_unit, hpc.currency_value_currency) == (0.01, "USD")
    after = estimate(FINE_TUNE_13B, engine_catalog()).recommendation  # the stamp was replaced
    assert after.system == "uva-hpc"

    System.objects.filter(pk=hpc.pk).update(currency_value_per_unit=0.02)
    fill(apps, None)
    assert System.objects.get(pk=hpc.pk).currency_value_per_unit == 0.02
