"""More GPUs for a training run that would take longer than the target wall time, while they
pay. (An inference job is split into a job array instead: options.inference_shards.)

recommend.Evaluation.plan sizes an option to the fewest GPUs that fit; when the run on them
would take longer than the target (a week, or the researcher's max_wall_hours less
contingency), `widen` tries the larger counts the partition allows, each with its own recipe
(a larger count often allows less recomputation or a bigger micro-batch, so it can meet the
target where the fitting count's recipe would not), and takes the smallest that meets the
target. It stops short of the target, and the option says why, where more GPUs stop paying:

- across nodes that have no cluster network (`inter_node_interconnect: none`, e.g. Azure's
  single-GPU NC-series VMs): nobody spreads data parallelism over hundreds of VMs that talk
  over their front-end Ethernet, so the job keeps the nodes it fits on;
- where a count would cost more than 1 / WIDENING_EFFICIENCY_FLOOR times the GPU hours of the
  fitting count (parallel efficiency below 50 %): the default week is not worth doubling an
  allocation. A researcher's max_wall_hours is: the scan goes on past the floor to the count
  that meets it (the option says at what cost), and where no count does, the option keeps
  the count that pays and says how long even the widest would take. GPU hours grow with the
  count (the exchange and the stragglers grow, scale_cost.py), so the floor is read at the
  first count past it.

An option that stops short keeps its honest wall time; the ranking's deadline tie-breaker
and the researcher's wall-time limit (options.schedule_reasons) judge it.

A cloud VM is rented whole (option_writing.costs bills every GPU of each VM a job occupies), so
a training job sized to fewer GPUs than its VMs hold leaves paid GPUs idle: `fill_vms` takes
all of them where that shortens the run, which makes it cheaper too (the same VMs, rented for
less time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from advisor.engine import constants as c
from advisor.engine.models import NodeTypeSpec
from advisor.engine.options import nodes_for
from advisor.engine.recipe import Choice
from advisor.engine.words import plural


class Widened(NamedTuple):
    n: int  # GPUs the option uses
    choice: Choice  # their own recipe
    gpu_hours: float | None  # None: no token count (fill_vms)
    reason: str  # what the widening did, or why it stopped short of the target


def widen(
    node: NodeTypeSpec,
    allowed: tuple[int, ...],
    n: int,
    choice: Choice,
    gpu_hours: float,
    *,
    target: float,
    deadline: bool,
    recipe_at: Callable[[int], Choice],
    hours_at: Callable[[int, Choice], float],
) -> Widened:
    """The smallest of the `allowed` counts above `n` whose own recipe (`recipe_at`) brings
    the wall time (`hours_at` / count) within `target`, or the widest that still pays (see
    the module docstring). `deadline`: the target is the researcher's max_wall_hours."""
    reach = allowed
    if node.inter_node_interconnect == "none":
        most = nodes_for(node, n) * max(node.gpus_per_node, 1)  # the fitting count's nodes
        reach = tuple(k for k in allowed if k <= most)
    floor = c.WIDENING_EFFICIENCY_FLOOR.value
    best = paying = Widened(n, choice, gpu_hours, "")
    costly = None  # (count, GPU hours) of the first count past the floor
    slower = None  # (count, wall hours) of the first count that would not shorten the run
    for k in reach:
        if k <= n:
            continue
        recipe = recipe_at(k)
        hours = hours_at(k, recipe)
        if hours * floor > gpu_hours:
            costly = costly or (k, hours)
            if not deadline:
                break
        if hours / k >= best.gpu_hours / best.n:
            # What the extra GPUs add, the exchange between them takes back (a batch too
            # small to split, a slow network): never more GPUs for a longer run.
            slower = slower or (k, hours / k)
            continue
        best = Widened(k, recipe, hours, "")
        if costly is None:
            paying = best
        if hours / k <= target:
            said = f"uses {k} GPUs to bring the wall time to about {hours / k:,.0f} h"
            if costly is not None:  # past the floor, for the researcher's own deadline
                said += f", at {hours / gpu_hours:.1f} x the GPU hours of {plural(n, 'GPU')}"
            return best._replace(reason=f"{said} (target {_hours(target)} h).")
    if costly is not None or slower is not None:
        if slower is not None and (costly is None or slower[0] < costly[0]):
            k, wall = slower
            why = (
                f"{plural(k, 'GPU')} would take longer (about {wall:,.0f} h): the exchange "
                "between them grows faster than the work they share"
            )
        else:
            k, hours = costly
            why = (
                f"{plural(k, 'GPU')} would cost {hours / gpu_hours:.1f} x the GPU hours of {n} "
                f"(parallel efficiency below {floor:.0%}), more than a shorter run is worth"
            )
        if costly is None:
            return best._replace(reason=_short(best, n, target, why))
        if deadline:  # widened past the floor and still too slow: the count that pays
            why += f"; even {best.n} would take about {best.gpu_hours / best.n:,.0f} h"
        return paying._replace(reason=_short(paying, n, target, why))
    if len(reach) < len(allowed):
        why = (
            f"more {node.name} nodes would not pay: they have no cluster network between them "
            "(inter-node interconnect: none)"
        )
    else:
        why = f"{plural(best.n, 'GPU')} is the most this layout may use here"
    return best._replace(reason=_short(best, n, target, why))


def _short(best: Widened, n: int, target: float, why: str) -> str:
    """The reason for an option that stays above the target wall time."""
    wall = best.gpu_hours / best.n
    if best.n > n:
        said = f"uses {best.n} GPUs to bring the wall time to about {wall:,.0f} h"
    else:
        said = f"about {wall:,.0f} h of wall time"
    return f"{said}, above the target of {_hours(target)} h: {why}."


def _hours(value: float) -> str:
    """A target in hours as a researcher reads it: 168, 333 (not 333.333), 0.83."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def fill_vms(
    node: NodeTypeSpec,
    allowed: tuple[int, ...],
    n: int,
    choice: Choice,
    gpu_hours: float | None,
    *,
    recipe_at: Callable[[int], Choice],
    hours_at: Callable[[int, Choice], float],
) -> Widened | None:
    """Every GPU of the cloud VMs `n` GPUs occupy, with its own recipe, where the layout may
    use that count, it trains the same global batch (a batch too small to give every GPU a
    sample would grow) and the run is shorter on it; else None (module docstring).
    `gpu_hours` None (no token count): judged on `hours_at`'s nominal hours, and the result
    keeps them unknown and its reason gives none."""
    vms = nodes_for(node, n)
    full = vms * max(node.gpus_per_node, 1)
    if full <= n or full not in allowed:
        return None
    recipe = recipe_at(full)
    if recipe.global_batch > choice.global_batch:
        return None
    base = gpu_hours if gpu_hours is not None else hours_at(n, choice)
    hours = hours_at(full, recipe)
    if hours / full >= base / n:
        return None
    rented = f"{node.name} VM" if vms == 1 else f"{vms} {node.name} VMs"
    shorter = (
        f"about {hours / full:,.0f} h of wall time instead of {base / n:,.0f} h on {n}"
        if gpu_hours is not None
        else f"a shorter run than on {n}"
    )
    return Widened(
        full,
        recipe,
        hours if gpu_hours is not None else None,
        f"uses all {full} GPUs of the {rented} it rents (billed whole): {shorter}, for the "
        "same VMs rented for less time.",
    )
