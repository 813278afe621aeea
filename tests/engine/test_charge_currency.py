"""Charges are compared in the profile's charge currency, never as bare numbers across
currencies: UVA HPC charges Service Units (50.89 SU per BasePOD A100 GPU hour; purchased SUs
cost $0.01 each, so about $0.51), Rio's H200 a cloud-equivalent 12.29 USD."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from advisor.engine import estimate
from advisor.engine.models import (
    CatalogSpec,
    CurrencyValueSpec,
    EstimateRequest,
    NodeTypeSpec,
    SystemSpec,
)
from advisor.engine.ranking import charge_rate
from bench.engine_rankings import catalog_from_file
from catalog.data_file import validate_catalog_file

CONFIGS = Path(__file__).resolve().parent / "configs"
UVA_FILE = Path(__file__).resolve().parents[2] / "catalog" / "data" / "uva.json"
NOT_COMPARED = "charged in SU; no conversion to USD in the catalog: cost not compared."
# Fits one node of A100 80GB with room to spare; Rio's H200s fit it too. In bf16, as asked:
# left open, the V100s would run it in fp16 (test_precision_not_said.py).
FINE_TUNE_13B = EstimateRequest(
    params=13_000_000_000,
    task="full_finetune",
    precision="bf16",
    batch_size=8,
    seq_len=2048,
    tokens=20_000_000,
)


@cache
def uva() -> CatalogSpec:
    return validate_catalog_file(UVA_FILE).to_spec()


def without_conversion(catalog: CatalogSpec) -> CatalogSpec:
    systems = [
        s.model_copy(update={"currency_value": None}) if s.name == "uva-hpc" else s
        for s in catalog.systems
    ]
    return catalog.model_copy(update={"systems": systems})


def best(result, system: str, accelerator: str):
    return next(o for o in result.options if (o.system, o.accelerator) == (system, accelerator))


def test_the_uva_catalog_values_a_service_unit_at_a_cent_with_its_source():
    hpc = next(s for s in uva().systems if s.name == "uva-hpc")
    assert hpc.currency == "SU"
    assert hpc.currency_value.per_unit == 0.01
    assert hpc.currency_value.currency == "USD"
    assert hpc.currency_value.as_of.isoformat() == "2026-05-12"
    assert hpc.currency_value.source.endswith("(UVA-HW, UVA-ALLOC)")


def test_an_a100_job_runs_on_uva_hpcs_a100_before_rios_h200_because_a_su_is_a_cent():
    """50.89 SU x 0.01 = 0.51 USD per GPU hour against 12.29 USD: the A100 on UVA HPC ranks
    ahead of the flagship H200 (before the conversion the bare 50.89 > 12.29 put Rio first)."""
    result = estimate(FINE_TUNE_13B, uva())
    a100 = best(result, "uva-hpc", "a100-80-sxm4")
    h200 = best(result, "uva-rio", "h200-141-sxm")
    assert a100.eligible
    assert h200.eligible
    assert result.options.index(a100) < result.options.index(h200)
    assert (a100.charge.rate_per_gpu_hour, h200.charge.rate_per_gpu_hour) == (50.89, 12.29)

    # What the researcher will be charged stays in SU; the ranking compared it in USD.
    assert (a100.charge.currency, a100.charge.compared_currency) == ("SU", "USD")
    assert a100.charge.compared_total == round(a100.charge.total * 0.01, 2)
    assert a100.charge.compared_total < h200.charge.compared_total
    assert a100.charge.comparison.startswith("0.01 USD per SU: purchased Service Units cost")
    assert (h200.charge.currency, h200.charge.compared_total) == ("USD", h200.charge.total)

    rec = result.recommendation
    assert (rec.system, rec.accelerator) == ("uva-hpc", "a100-40-sxm4")
    runner_up = result.alternatives[0]
    assert result.why_first == (
        f"Cheapest to run: {rec.charge.total:,.2f} SU (about {rec.charge.compared_total:,.2f} "
        f"USD) against {runner_up.charge.total:,.2f} SU (about "
        f"{runner_up.charge.compared_total:,.2f} USD) on NVIDIA RTX A6000 48GB on UVA HPC "
        "(Rivanna and Afton)."
    )
    assert (
        f"Cost about {rec.cost:,.2f} SU; about {rec.charge.compared_total:,.2f} USD at 0.01 USD "
        "per SU: purchased Service Units cost $0.01 each"
    ) in " ".join(rec.reasons)


def test_without_a_conversion_su_charges_are_not_compared_by_number():
    """The SU options rank like unknown charges: after every option with a USD charge that
    meets the same earlier tests, and among themselves by GPU hours, not by the SU figure
    (those that keep the stated batch of 8 first: ranking.RankKey.larger_batch)."""
    result = estimate(FINE_TUNE_13B, without_conversion(uva()))
    su = [o for o in result.options if o.system == "uva-hpc" and o.eligible and o.headroom]
    usd = [o for o in result.options if o.system == "uva-rio" and o.eligible and o.headroom]
    assert su
    assert usd
    for option in su:
        assert (option.charge.currency, option.charge.total > 0) == ("SU", True)
        assert option.charge.compared_total is None
        assert option.charge.compared_currency == ""
        assert NOT_COMPARED in option.reasons
    assert max(map(result.options.index, usd)) < min(map(result.options.index, su))
    hours = [(o.recipe.global_batch > 8, o.requested_gpu_hours) for o in su]
    assert hours == sorted(hours)
    assert [o.charge.total for o in su] != sorted(o.charge.total for o in su)
    assert result.recommendation.system == "uva-rio"


@pytest.mark.parametrize(
    ("currency", "value", "compared", "why"),
    [
        ("USD", None, 2.0, ""),  # the profile's own currency: compared as it is
        ("SU", CurrencyValueSpec(per_unit=0.01, currency="USD"), 0.02, "0.01 USD per SU"),
        ("SU", None, None, NOT_COMPARED.removesuffix(".")),
        # A value in a third currency is no conversion to the profile's.
        ("SU", CurrencyValueSpec(per_unit=0.008, currency="GBP"), None, NOT_COMPARED[:-1]),
        ("", None, None, "P's price has no currency in the catalog: cost not compared"),
    ],
)
def test_a_priced_systems_rate_in_the_profiles_currency(currency, value, compared, why):
    node = NodeTypeSpec(name="n", count=1, gpus_per_node=1, accelerator="a", price_per_gpu_hour=2.0)
    system = SystemSpec(
        name="p", display_name="P", currency=currency, currency_value=value, node_types=[node]
    )
    rate = charge_rate(system, node, None, {}, "USD")
    assert rate.value == 2.0
    assert rate.currency == currency
    assert (None if rate.per_unit is None else rate.value * rate.per_unit) == compared
    assert rate.comparison == why


def test_a_known_charge_beats_one_that_is_not_compared_and_says_why():
    """Rio with its H200 alone, UVA HPC without a conversion: the H200's USD charge ranks
    before the A100's SU charge because only the first can be compared, and the line says so."""
    catalog = without_conversion(uva())
    systems = []
    for system in catalog.systems:
        if system.name == "uva-rio":
            h200 = [nt for nt in system.node_types if nt.accelerator == "h200-141-sxm"]
            system = system.model_copy(update={"node_types": h200, "partitions": []})
        systems.append(system)
    result = estimate(FINE_TUNE_13B, catalog.model_copy(update={"systems": systems}))
    rec = result.recommendation
    assert (rec.system, rec.accelerator) == ("uva-rio", "h200-141-sxm")
    assert result.why_first == (
        f"Its charge is known ({rec.charge.total:,.2f} USD); the next option's (NVIDIA A100 "
        "40GB SXM4 on UVA HPC (Rivanna and Afton)) is not comparable: charged in SU; no "
        "conversion to USD in the catalog."
    )


def test_charges_that_round_to_the_same_cent_after_conversion_still_rank_by_their_su():
    """BERT-base fine-tuning (about 100 M tokens) on UVA HPC costs about 8.6 SU on an RTX
    A6000 and 8.9 to 9.4 SU on the A100s: all about 0.09 USD. The ranking compares the
    unrounded conversion, so the cheaper A6000 wins (rounded to the cent, the tie went to the
    A100 40GB, a flagship card). The token count is the first near 100 M at which the two
    round to the same cent, so the case survives small changes to the speed model."""
    bert_config = json.loads(
        (CONFIGS / "google-bert__bert-base-uncased" / "config.json").read_text()
    )
    catalog = catalog_from_file(UVA_FILE)  # with the shared benchmarks, as the app loads them

    def ranked(tokens: int):
        # In bf16, as asked: left open, UVA's V100s would run it in fp16 for far less.
        bert = EstimateRequest(
            config=bert_config, task="full_finetune", precision="bf16", seq_len=512, tokens=tokens
        )
        result = estimate(bert, catalog)
        return result, result.options[0], best(result, "uva-hpc", "a100-40-sxm4")

    for tokens in range(100_000_000, 80_000_000, -1_000_000):
        result, rec, a100 = ranked(tokens)
        if rec.charge.compared_total == a100.charge.compared_total == 0.09:
            break
    else:
        raise AssertionError("no token count near 100 M rounds both charges to 0.09 USD")
    assert rec.charge.total < a100.charge.total
    assert result.options.index(rec) < result.options.index(a100)
    assert rec.accelerator not in ("a100-40-sxm4", "a100-80-sxm4")
    assert result.why_first.startswith(f"Cheapest to run: {rec.charge.total:,.2f} SU (about 0.09")
