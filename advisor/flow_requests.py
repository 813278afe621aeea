"""From a session's answers to the engine's request: fields, the outcome's systems, sizing.

`estimate_request_for` turns the chart's answer fields into an EstimateRequest; the outcome
limits the systems to those the catalog says the institute can use (`outcome_systems`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from advisor.engine.constants import TARGET_WALL_HOURS
from advisor.engine.models import CatalogSpec, Constraints, EstimateRequest, EstimateResult
from advisor.flowchart import Node
from advisor.selectors import hf_model_lookup_metadata, local_model_config
from catalog_schema import TASK_LABELS

if TYPE_CHECKING:
    from advisor.flow_services import FlowState

GPU_TASKS = set(TASK_LABELS)


def sized_on_secure_hardware(outcome: Node, catalog: CatalogSpec) -> bool:
    """The secure route's own systems list hardware (UVA's Rio), so the run is sized there."""
    return any(s.name in outcome.systems and s.node_types for s in catalog.systems)


def sizing_request(
    request: EstimateRequest, outcome: Node, catalog: CatalogSpec
) -> EstimateRequest:
    """The request the engine sizes. On the secure route the data's sensitivity is settled by
    the route itself, and the estimate says what hardware the work needs: it is sized against
    the secure systems the outcome names where they list hardware, else against every system
    (so the researcher can tell the secure environment's team what to provision)."""
    if outcome.advice != "secure" or sized_on_secure_hardware(outcome, catalog):
        return request
    constraints = request.constraints.model_copy(
        update={"data_sensitivity": "public", "systems": None, "needs_cloud": None}
    )
    return request.model_copy(update={"constraints": constraints})


def wants_gpu_estimate(state: FlowState) -> bool:
    outcome = state.outcome
    if outcome is None or outcome.advice in ("cpu_interactive", "cpu_batch"):
        return False
    return state.fields.get("task") in GPU_TASKS


def plan_for(*, fields: Mapping[str, Any], result: EstimateResult, outcome: Node, catalog):
    """The project's GPU hours around the recommended run (None without a sized run)."""
    from advisor.engine.constants import CONTINGENCY
    from advisor.project_plan import project_plan

    rec = result.recommendation
    if rec is None or rec.gpu_hours is None or fields.get("hosting"):
        return None  # a hosted service is priced by the month (hosting_plan_for), not by runs
    system = next((s for s in catalog.systems if s.name == _request_facility(rec, outcome)), None)
    return project_plan(
        task=str(fields.get("task")),
        per_run_compute=rec.gpu_hours,
        # The engine's own rate: its stored contingency is rounded, too coarse for tiny runs.
        contingency_rate=CONTINGENCY.value,
        epochs=float(fields.get("epochs") or 1),
        full_runs=fields.get("plan.full_runs"),
        sweep_trials=fields.get("plan.sweep_trials"),
        sweep_fraction=fields.get("plan.sweep_fraction"),
        eval_passes=fields.get("plan.eval_passes"),
        dev_gpu_hours=fields.get("plan.dev_gpu_hours"),
        trial_gpu_hours=system.trial_gpu_hours if system else None,
        minimum_gpu_hours=getattr(system, "minimum_gpu_hours", None) if system else None,
    )


def _request_facility(rec, outcome: Node) -> str:
    """The facility a request goes to: the secure route's own system, else the recommendation."""
    if outcome.advice == "secure" and outcome.systems:
        return outcome.systems[0]
    return rec.system


# --- From answers to an estimate request -----------------------------------------------------


def estimate_request_for(
    *,
    fields: Mapping[str, Any],
    outcome: Node | None = None,
    catalog: CatalogSpec | None = None,
) -> EstimateRequest | None:
    """The engine's request from the answers' fields, limited by the outcome's systems.

    `fields` come from `answer_fields` (the chart's own mappings); None when the work needs no
    GPU estimate (no task: CPU work). With the catalog, systems it marks unavailable to the
    institute are dropped from the outcome's list, so no outcome recommends them (see
    `outcome_systems`).
    """
    given = dict(fields)
    task = given.get("task")
    if task not in GPU_TASKS:
        return None
    constraints: dict[str, Any] = {
        name.removeprefix("constraints."): value
        for name, value in given.items()
        if name.startswith("constraints.")
    }
    constraints.setdefault("data_sensitivity", "public")
    hours_left = _hours_until_deadline(given.get("deadline"))
    if hours_left is not None and 0 < hours_left < TARGET_WALL_HOURS.value:
        # A deadline nearer than the engine's one-week default becomes the wall-time target,
        # so the recommendation adds GPUs to finish in time (the queue wait is not included).
        constraints["max_wall_hours"] = hours_left
    if outcome is not None:
        constraints["needs_notebooks"] = outcome.needs_notebooks or bool(
            constraints.get("needs_notebooks")
        )
        if outcome.needs_cloud is not None:
            constraints["needs_cloud"] = outcome.needs_cloud
        if outcome.systems:
            constraints["systems"] = (
                outcome_systems(outcome=outcome, catalog=catalog).usable
                if catalog is not None
                else list(outcome.systems)
            )
    request_fields: dict[str, Any] = {
        name: value
        for name, value in given.items()
        if name in EstimateRequest.model_fields and name not in ("constraints", "hub", "config")
    }
    for name in INTEGER_FIELDS:
        if request_fields.get(name) is not None:
            request_fields[name] = round(float(request_fields[name]))
    if "framework" in request_fields:
        request_fields["framework"] = _framework_answer(request_fields["framework"], task)
    model_id = request_fields.get("model_id") or None
    request_fields["model_id"] = model_id
    if model_id:
        request_fields["hub"] = hf_model_lookup_metadata(repo_id=model_id)
        if request_fields["hub"] is None and request_fields.get("params") is None:
            # The lookup has not finished: count from the configuration we keep, if any.
            local = local_model_config(repo_id=model_id)
            if local is not None:
                request_fields["config"] = local["config"]
    request_fields["constraints"] = Constraints(**constraints)
    return EstimateRequest(**request_fields)


INTEGER_FIELDS = (
    "params",
    "tokens",
    "new_tokens",
    "batch_size",
    "seq_len",
    "num_gpus",
    "lora_rank",
)


def _framework_answer(value: str | None, task: str) -> str | None:
    """The library answer when it suits the task (a chart that asks one question for both
    kinds of work may hold a training library for inference); otherwise the engine's default."""
    from advisor.engine.frameworks import FRAMEWORKS

    profile = FRAMEWORKS.get(value or "")
    if profile is None:
        return None
    return value if profile.kind == ("inference" if task == "inference" else "training") else None


def _hours_until_deadline(deadline: str | None) -> float | None:
    if not deadline:
        return None
    try:
        days = (dt.date.fromisoformat(deadline) - timezone.localdate()).days
    except ValueError:
        return None
    return float(days * 24)


# --- Which systems an outcome may recommend --------------------------------------------------


@dataclass(frozen=True)
class OutcomeSystems:
    usable: list[str]  # catalog keys, in the outcome's order
    left_out: dict[str, str]  # catalog key -> why, in words

    def sentence(self, catalog: CatalogSpec, outcome: Node) -> str:
        """One sentence: which systems this answer is weighed on, and which are left out, why."""
        names = {s.name: s.display_name for s in catalog.systems}
        if not outcome.systems:
            return ""
        usable = [names.get(n, n) for n in self.usable]
        scope = "that offer notebooks" if outcome.needs_notebooks else ""
        if outcome.needs_cloud:
            scope = "in the cloud"
        head = (
            f"Systems considered for this answer{' (' + scope + ')' if scope else ''}: "
            f"{join_words(usable)}"
            if usable
            else "No system in the catalog is open to you for this answer"
        )
        if not self.left_out:
            return head + "."
        # One sentence (issue 16): what was weighed, then each system left out and why.
        gone = "; ".join(
            f"{names.get(name, name)} is left out because {why}"
            for name, why in self.left_out.items()
        )
        return f"{head}; {gone}."


def join_words(items: list[str]) -> str:
    """["a"] -> "a"; ["a", "b"] -> "a and b"; ["a", "b", "c"] -> "a, b and c"."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def _first_sentence(note: str) -> str:
    first = note.split(". ")[0].strip().rstrip(".")
    return first[0].lower() + first[1:] if first else ""


def outcome_systems(*, outcome: Node, catalog: CatalogSpec) -> OutcomeSystems:
    """The outcome's systems that the catalog says the institute can use.

    A retired system is not in the engine's catalog at all; a "limited" one is closing or not
    open to the institute (Baskerville: no longer available to the Turing as of April 2026,
    catalog-facts.md TUR-LAND), so no outcome recommends it. Each one dropped comes with the
    catalog's reason.
    """
    by_name = {s.name: s for s in catalog.systems}
    usable: list[str] = []
    left_out: dict[str, str] = {}
    for name in outcome.systems:
        system = by_name.get(name)
        if system is None:
            if catalog.systems:
                left_out[name] = "it is retired or not in the catalog"
            continue
        if system.status == "limited":
            left_out[name] = _first_sentence(system.status_note) or "it has limited availability"
            continue
        usable.append(name)
    if not catalog.systems:  # no catalog loaded: nothing to judge by
        usable = list(outcome.systems)
    return OutcomeSystems(usable=usable, left_out=left_out)
