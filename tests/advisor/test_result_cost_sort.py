"""The result page's alternatives sort by the charge the ranking compared (in the profile's
currency): UVA HPC's Service Units by their USD value, and a charge with no conversion last,
never by its bare number against another currency's."""

from __future__ import annotations

from django.template.loader import render_to_string

from advisor.engine import estimate
from advisor.engine.models import EstimateResult
from advisor.result_views import _alternatives
from tests.engine.test_charge_currency import FINE_TUNE_13B, uva, without_conversion


def test_the_cost_sort_uses_the_usd_value_of_service_units():
    result = estimate(FINE_TUNE_13B, uva())
    shown = _alternatives(result, "cost")
    compared = [o.charge.compared_total for o in shown]
    known = [value for value in compared if value is not None]
    assert compared[: len(known)] == sorted(known)  # unknown ones (no GPU hours) last
    shown = shown[: len(known)]
    currencies = [o.charge.currency for o in shown]
    # Rio's USD charges sort after UVA HPC's cheaper SU ones, though their bare numbers are smaller.
    assert currencies.index("USD") > currencies.index("SU")
    assert any(o.charge.total > shown[-1].charge.total for o in shown if o.charge.currency == "SU")


def test_without_a_conversion_su_charges_sort_last_as_not_compared():
    result = estimate(FINE_TUNE_13B, without_conversion(uva()))
    shown = _alternatives(result, "cost")
    currencies = [o.charge.currency for o in shown]
    assert "SU" in currencies
    assert "USD" in currencies
    first_su = currencies.index("SU")
    assert set(currencies[first_su:]) == {"SU"}


def test_a_result_stored_before_charges_were_compared_sorts_by_its_totals():
    """An old stored result has no compared figure: it sorts as it was ranked then, by total."""
    stored = estimate(FINE_TUNE_13B, uva()).model_dump(mode="json")
    for option in stored["alternatives"]:
        for name in ("compared_total", "compared_currency", "comparison"):
            option["charge"].pop(name)
    old = EstimateResult.model_validate(stored)
    totals = [o.charge.total for o in _alternatives(old, "cost")]
    known = [value for value in totals if value is not None]
    assert totals[: len(known)] == sorted(known)
    assert "SU" in [o.charge.currency for o in old.alternatives]


def test_the_charge_cell_shows_the_compared_figure_or_that_it_was_not_compared():
    converted = estimate(FINE_TUNE_13B, uva()).recommendation.charge
    html = render_to_string("advisor/_compared_charge.html", {"charge": converted})
    assert f"(about {converted.compared_total:g} USD)" in html
    usd = next(
        o.charge
        for o in estimate(FINE_TUNE_13B, uva()).options
        if o.charge.currency == "USD" and o.charge.total is not None
    )
    assert render_to_string("advisor/_compared_charge.html", {"charge": usd}).strip() == ""
    su = estimate(FINE_TUNE_13B, without_conversion(uva())).options
    not_compared = next(o.charge for o in su if o.charge.currency == "SU")
    html = render_to_string("advisor/_compared_charge.html", {"charge": not_compared})
    assert "(not compared: no conversion in the catalog)" in html
