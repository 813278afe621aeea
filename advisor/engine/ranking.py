"""Ranking by what the job costs the institute.

Order (docs/engine.md, "Ranking"): feasible and supported -> available (limited-availability
systems after available ones) -> fits with headroom -> no CPU offload -> the profile's
tie-breakers, by default: meets the deadline -> least charged cost (GPU hours x charge rate;
unknown never wins) -> smallest sufficient GPU class -> shortest expected queue -> fewest GPUs.
Staff reorder the tie-breakers per profile (RankingPolicySpec.tie_breakers).

The charge rate of an option: the VM size's or system's own price where it has one (cloud, or
an HPC service that publishes a charge); else the profile's rate for the accelerator
(RankingPolicySpec.charge_rates: defaults from the catalog's data file, with their source and
date, which staff change in the admin); else "unknown", never 0 (an unknown charge never wins).
Charges are compared in the profile's charge currency (RankingPolicySpec.currency): a price in
another currency (UVA's Service Units) is converted by the system's `currency_value` from the
catalog; without one it is "not compared" and ranks like an unknown charge, never as a bare
number against another currency's.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import NamedTuple

from advisor.engine import constants as c
from advisor.engine.models import (
    DEFAULT_TIE_BREAKERS,
    AcceleratorSpec,
    ChargeRateSpec,
    NodeTypeSpec,
    RankingPolicySpec,
    SystemSpec,
)


@dataclass(frozen=True, slots=True)
class Rate:
    value: float | None  # None: unknown
    currency: str
    source: str
    # Per unit of `currency`, in the profile's charge currency (1.0 in that currency itself);
    # None: unknown, or no conversion in the catalog (`comparison` says so): not compared.
    per_unit: float | None = 1.0
    comparison: str = ""  # how the rate was converted, or why it was not compared


def charge_rate(
    system: SystemSpec,
    node: NodeTypeSpec,
    acc: AcceleratorSpec,
    profile_rates: dict[str, ChargeRateSpec],
    policy_currency: str,
) -> Rate:
    if node.price_per_gpu_hour is not None:
        return _priced(node.price_per_gpu_hour, system, f"price of {node.name}", policy_currency)
    if system.price_per_gpu_hour is not None:
        source = f"{system.display_name}'s price"
        return _priced(system.price_per_gpu_hour, system, source, policy_currency)
    if system.kind == "cloud":
        return Rate(None, system.currency, f"no price for {node.name} in the catalog")
    rate = profile_rates.get(acc.name)
    if rate is None:
        return Rate(
            None,
            policy_currency,
            f"no charge rate for the {acc.display_name} in the catalog (staff can set the "
            "profile's rate in the admin)",
        )
    source = rate.source or "the profile's charge rate"
    if rate.as_of is not None:
        source += f", as of {rate.as_of.isoformat()}"
    return Rate(rate.rate_per_gpu_hour, rate.currency or policy_currency, source)


NOT_COMPARED = ": cost not compared"


def _priced(value: float, system: SystemSpec, source: str, policy_currency: str) -> Rate:
    """A system's own price, with what one unit of its currency is worth in the profile's."""
    currency = system.currency
    if currency == policy_currency:
        return Rate(value, currency, source)
    conversion = system.currency_value
    if conversion is not None and conversion.currency == policy_currency:
        how = f"{conversion.per_unit:g} {policy_currency} per {currency}"
        if conversion.source:
            how += f": {conversion.source}"
        if conversion.as_of is not None:
            how += f", as of {conversion.as_of.isoformat()}"
        return Rate(value, currency, source, conversion.per_unit, how)
    why = (
        f"charged in {currency}; no conversion to {policy_currency} in the catalog"
        if currency
        else f"{system.display_name}'s price has no currency in the catalog"
    )
    return Rate(value, currency, source, None, why + NOT_COMPARED)


class RankKey(NamedTuple):
    """What the ranking sorts by, in order, named. Candidates carry it flattened into one
    plain tuple (`flat_key`; sorting nested tuples costs several times more) and
    `RankKey.from_flat` names it again where the ranking is explained."""

    ineligible: bool  # infeasible, unsupported, ruled out by a constraint
    limited: bool  # limited availability: only when no available system serves the job
    # Spans nodes with no cluster network between them: it may not run at all (options.py).
    no_network: bool
    no_headroom: bool  # fits, but within the memory margin
    offload: bool  # CPU offload: only when nothing on-GPU fits
    # The profile's tie-breakers in its order, each (name, values): deadline (misses it?,
    # then trains a larger global batch than the researcher stated?), cost (unknown?, charged
    # total), gpu_class (memory GB, dense 16-bit TFLOP/s), queue (typical wait h), gpus
    # (GPUs, nodes).
    tie_breakers: tuple[tuple[str, tuple], ...]
    complexity: int  # equal in all of that: the simpler setup (DDP before ZeRO)
    memory: int
    system: str
    accelerator: str

    @classmethod
    def from_flat(cls, flat: tuple, tie_order: tuple[str, ...]) -> RankKey:
        ties = []
        at = 5
        for name in tie_order:
            size = TIE_BREAKER_SIZE[name]
            ties.append((name, tuple(flat[at : at + size])))
            at += size
        return cls(*flat[:5], tuple(ties), *flat[at:])


# The tie-breakers' values, flattened in the default order: deadline (2 values: misses it,
# then enlarges the stated global batch), cost (2), gpu_class (2), queue (1), gpus (2). A
# stated batch is the researcher's constraint like the deadline, and ranks right after it:
# an option that trains the batch asked for comes first among those equal on the deadline,
# while a batch no option can keep within the deadline (26B tokens at batch 1 on one GPU)
# gives way to options that meet it.
TIE_BREAKER_SIZE = {"deadline": 2, "cost": 2, "gpu_class": 2, "queue": 1, "gpus": 2}
_POSITIONS = {
    "deadline": (0, 1),
    "cost": (2, 3),
    "gpu_class": (4, 5),
    "queue": (6,),
    "gpus": (7, 8),
}


def tie_picker(tie_order: tuple[str, ...]):
    """A function from the nine tie-breaker values in the default order (slow, larger batch,
    cost unknown, cost, GPU memory, GPU peak, queue, GPUs, nodes) to them in the profile's
    order."""
    return itemgetter(*(i for name in tie_order for i in _POSITIONS[name]))


def order(policy: RankingPolicySpec) -> tuple[str, ...]:
    """The profile's tie-breakers; any it leaves out follow in the default order."""
    chosen = list(dict.fromkeys(policy.tie_breakers))
    return tuple(chosen + [t for t in DEFAULT_TIE_BREAKERS if t not in chosen])


WORDS = {
    "deadline": "those that meet your deadline, or failing that finish within an allocation "
    "period of six months",
    "cost": "the least charged cost (GPU hours x the system's charge rate, compared in one "
    "currency; more GPUs of the same kind on a system must save more than "
    f"{c.FEWER_GPUS_COST_BAND.value:.0%} to come before fewer)",
    "gpu_class": "the smallest GPU that is enough",
    "queue": "the shortest expected queue",
    "gpus": "the fewest GPUs",
}


# Where the request states a global batch, the deadline tie-breaker's second value.
KEEPS_BATCH_WORDS = " (and among them those that train the global batch you stated)"


def objective(tie_order: tuple[str, ...], stated_batch: bool = False) -> str:
    parts = ", then ".join(
        WORDS[t] + (KEEPS_BATCH_WORDS if t == "deadline" and stated_batch else "")
        for t in tie_order
    )
    return (
        "Ranked by what the job costs the institute: options that fit and whose software runs "
        "there come first (fully available systems before limited ones), then " + parts + "."
    )


def why_first(best, runner_up, tie_order: tuple[str, ...]) -> str:
    """One line: the first thing in the ranking's order where the winner beats the next."""
    if runner_up is None:
        return "The only system and GPU that fit and run within your constraints."
    a = RankKey.from_flat(best.sort_key, tie_order)
    b = RankKey.from_flat(runner_up.sort_key, tie_order)
    other = f"{runner_up.accelerator.display_name} on {runner_up.system.display_name}"
    if a.limited != b.limited:
        return f"Fully available, unlike the next option ({other}), whose system is limited."
    if a.no_network != b.no_network:
        return (
            f"Needs no network between nodes, unlike the next option ({other}), which spans "
            "nodes with no cluster network between them."
        )
    if a.no_headroom != b.no_headroom:
        return f"Fits with memory to spare; the next option ({other}) is close to its capacity."
    if a.offload != b.offload:
        return f"Runs without CPU offload, unlike the next option ({other})."
    fa, fb = best.option, runner_up.option
    for (name, va), (_, vb) in zip(a.tie_breakers, b.tie_breakers, strict=True):
        if va == vb:
            continue
        if name == "deadline":
            if va[0] == vb[0]:
                return (
                    f"Trains the global batch you asked for ({fa.recipe.global_batch}); the "
                    f"next option ({other}) would train {fb.recipe.global_batch}."
                )
            if va[0] == 0:
                return f"Meets the wall-time target; the next option ({other}) would not."
            wall = f" (about {fb.wall_hours:,.0f} h)" if fb.wall_hours is not None else ""
            return (
                f"Misses the wall-time target but finishes within an allocation period of six "
                f"months; the next option ({other}) would not{wall}."
            )
        if name == "cost":
            if fa.gpu_hours is None and va[0] is False:
                # No token count: ranked by the charge of a nominal one (options.RANKING_TOKENS).
                return (
                    f"Cheapest per token processed: you gave no token count, so the GPU hours "
                    f"and charges are not estimated, but each token costs less here than on "
                    f"{other} (its GPU time x the charge rate)."
                )
            if _compared(fa) is None:
                hours_a, hours_b = fa.requested_gpu_hours, fb.requested_gpu_hours
                figures = (
                    f" ({hours_a:,.0f} against {hours_b:,.0f})"
                    if hours_a is not None and hours_b is not None
                    else ""
                )
                # Unknown, or known but in a currency the ranking cannot compare.
                unknown = _money(fa) == _money(fb) == "unknown"
                lead = "No known price" if unknown else "No price to compare"
                return f"{lead} here or on {other}; it needs fewer GPU hours{figures}."
            if _compared(fb) is None:
                if fb.charge is not None and fb.charge.total is not None:
                    why_not = fb.charge.comparison.removesuffix(NOT_COMPARED)
                    return (
                        f"Its charge is known ({_money(fa)}); the next option's ({other}) is "
                        f"not comparable: {why_not}."
                    )
                return (
                    f"Its charge is known ({_money(fa)}); the next option ({other}) has no "
                    "known price."
                )
            return f"Cheapest to run: {_money(fa)} against {_money(fb)} on {other}."
        if name == "gpu_class":
            return (
                f"The smallest GPU that is enough ({best.accelerator.memory_gb:g} GB); "
                f"{other} costs the same but uses a larger card."
            )
        if name == "queue":
            return f"Shortest expected queue of the options that cost the same as {other}."
        if name == "gpus":
            return f"Needs fewer GPUs ({fa.num_gpus}) than {other} ({fb.num_gpus})."
    return f"Equal to {other} in cost and speed; the simpler setup ({fa.strategy})."


def _compared(option) -> float | None:
    charge = option.charge
    return None if charge is None else charge.compared_total


def _money(option) -> str:
    """The charge in its own currency, and in the compared one where it was converted."""
    charge = option.charge
    if charge is None or charge.total is None:
        return "unknown"
    money = f"{charge.total:,.2f} {charge.currency}".strip()
    if charge.compared_total is not None and charge.compared_currency != charge.currency:
        money += f" (about {charge.compared_total:,.2f} {charge.compared_currency})"
    return money


def alternatives(options: list, recommendation, limit: int = 8) -> list:
    """The best option per system and GPU other than the recommendation's, in ranking order.
    `options` are ranked already (EstimateResult.options), so the first of each pair is its
    best; nothing is re-ranked here."""
    seen = set()
    if recommendation is not None:
        seen.add((recommendation.system, recommendation.accelerator))
    out = []
    for option in options:
        key = (option.system, option.accelerator)
        if key in seen:
            continue
        seen.add(key)
        out.append(option)
        if len(out) == limit:
            break
    return out
