"""What the result page says beyond the engine's estimate: hosting, the secure route, the
project's justification, CPU-only advice and the deadline."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from advisor.engine.models import CatalogSpec, EstimateResult
from advisor.engine.slurm import cpu_sbatch_script
from advisor.engine.words import hours, plural
from advisor.flow_decisions import gb_text
from advisor.flow_requests import sized_on_secure_hardware
from advisor.project_plan import plan_text

if TYPE_CHECKING:
    from advisor.flow_services import FlowState

SENSITIVE = {"confidential", "restricted"}


# --- Hosting: an always-on VM ----------------------------------------------------------------


def project_pays(fields: Mapping[str, Any]) -> bool:
    """The project or programme pays (a brief request), from the chart's `project_pays` field."""
    return bool(fields.get("project_pays"))


def hosting_plan_for(*, state: FlowState, result: EstimateResult):
    """The always-on VM for a web service, from the inference memory the engine estimated.

    None unless the researcher is hosting a service and the outcome names a cloud system.
    """
    from advisor.engine.hosting import hosting_plan

    outcome = state.outcome
    if not state.fields.get("hosting") or outcome is None:
        return None
    clouds = [s for s in state.catalog.systems if s.kind == "cloud" and s.name in outcome.systems]
    if not clouds:
        return None
    memory = result.memory
    overhead = memory.cuda_context + memory.allocator_reserve
    unsupported = {}
    names = {a.name: a.display_name for a in state.catalog.accelerators}
    for option in result.options:
        if option.system != clouds[0].name:
            continue
        if not option.supported:
            unsupported[option.accelerator] = option.software_reasons
        elif option.compute_dtype is None:
            # The precision asked for does not exist on this GPU (bf16 on a T4).
            precision = state.fields.get("precision") or "this precision"
            unsupported[option.accelerator] = [
                f"{names.get(option.accelerator, option.accelerator)} has no {precision}: "
                "answer fp16, or 'Not sure', for the precision to host it there."
            ]
    return hosting_plan(
        system=clouds[0],
        accelerators=list(state.catalog.accelerators),
        weights_and_working_bytes=max(memory.total_bytes - overhead, 0),
        per_gpu_overhead_bytes=overhead,
        months=float(state.fields.get("hosting_months") or 1),
        unsupported=unsupported,
    )


def hosting_justification(*, plan, catalog: CatalogSpec, params: int | None) -> str:
    """The request's paragraph for a hosted service: what runs, on which VM, for how long, cost."""
    from advisor.engine.hosting import months_text

    if plan is None or plan.vm is None:
        return ""
    names = {a.name: a.display_name for a in catalog.accelerators}
    gpu = names.get(plan.vm.accelerator, plan.vm.accelerator)
    gpus = "one" if plan.vm.gpus == 1 else str(plan.vm.gpus)
    size = f"a {params / 1e9:,.3g} billion-parameter model" if params else "a model"
    text = (
        f"We will host a web service that serves {size} for {months_text(plan.months)}. "
        f"It needs {plan.need_bytes / 1e9:,.1f} GB of GPU memory for the model and its working "
        f"memory, so it runs on one always-on {plan.vm.name} virtual machine with {gpus} "
        f"{gpu} GPU{'s' if plan.vm.gpus != 1 else ''}, the cheapest size that holds it."
    )
    if plan.vm.price_per_month is not None and plan.total_price is not None:
        currency = plan.vm.currency
        text += (
            f" At about {plan.vm.price_per_month:,.0f} {currency} a month (pay-as-you-go, 730 "
            f"hours a month) that is about {plan.total_price:,.0f} {currency} in all."
        )
    return text


# --- The secure route and the project's justification ----------------------------------------

SENSITIVITY_WORDS = {
    "internal": "internal data",
    "confidential": "confidential or personal data",
    "restricted": "restricted data",
}


@dataclass(frozen=True)
class SecureRoute:
    """What a researcher with sensitive data should do, and what the estimate says."""

    level: str
    system_name: str
    system_display: str
    what_to_do: list[str]
    hardware: list[str]
    request_fields: list[dict]
    sensitivity_note: str


def secure_route_for(
    *, state: FlowState, result: EstimateResult | None, plan: Mapping[str, Any] | None
) -> SecureRoute:
    from catalog.models import System

    outcome = state.outcome
    assert outcome is not None
    level = str(state.fields.get("constraints.data_sensitivity") or "confidential")
    words = SENSITIVITY_WORDS.get(level, f"{level} data")
    system = System.objects.filter(name=outcome.systems[0]).first() if outcome.systems else None
    steps = [
        f"Your data is {words}. The systems for ordinary allocations document approval for "
        "public data only, so do not copy it there.",
    ]
    if system is not None and system.access_route:
        steps.append(system.access_route)
    elif system is None:
        steps.append(
            "Talk to your data protection officer and the research computing team before the "
            "data moves: they agree where it may be processed."
        )
    steps.append(
        "Bring the hardware figures below to that conversation: they say what the work needs, "
        "whichever secure system runs it."
    )
    hardware: list[str] = []
    rec = result.recommendation if result is not None else None
    if result is not None and rec is not None:
        accelerators = {a.name: a for a in state.catalog.accelerators}
        gpu = accelerators.get(rec.accelerator)
        gpu_name = gpu.display_name if gpu else rec.accelerator
        hardware.append(
            f"Memory: about {gb_text(rec.memory_per_gpu_bytes)} per GPU on "
            f"{plural(rec.num_gpus, 'GPU')}"
            + (
                f", so a GPU with at least {gpu.memory_gb:g} GB such as the {gpu_name}"
                if gpu
                else ""
            )
            + "."
        )
        if rec.gpu_hours is not None:
            wall = (
                f" ({hours(rec.wall_hours, 'hours')} of wall time on {plural(rec.num_gpus, 'GPU')})"
                if rec.wall_hours
                else ""
            )
            compute = hours(rec.gpu_hours)
            about = "" if compute.startswith("less") else "about "
            hardware.append(f"One run: {about}{compute} of compute on {gpu_name}{wall}.")
        if plan:
            hardware.append(
                f"The whole project: about {plan['total_gpu_hours']:,} GPU hours "
                "(the lines are listed below)."
            )
    elif not state.fields.get("task"):
        hardware.append("The work needs no GPU: ask for a CPU-only secure environment.")
    return SecureRoute(
        level=level,
        system_name=system.name if system else "",
        system_display=system.display_name if system else "",
        what_to_do=steps,
        hardware=hardware,
        request_fields=list(system.request_fields or []) if system else [],
        sensitivity_note=system.data_sensitivity_note if system else "",
    )


def session_justification(
    *, state: FlowState, result: EstimateResult, plan: Mapping[str, Any] | None
) -> str:
    """The engine's paragraph about one run, then the project's lines and the total.

    On the secure route the engine sized the hardware without the data's sensitivity, so its
    closing sentence about which system is approved for which data is replaced by the route.
    """
    text = result.justification
    outcome = state.outcome
    if (
        outcome is not None
        and outcome.advice == "secure"
        and not sized_on_secure_hardware(outcome, state.catalog)
    ):
        # Sized without the data's sensitivity: drop the engine's sentence on approval.
        text = text.rsplit(". ", 1)[0] + "." if ". " in text else text
        level = state.fields.get("constraints.data_sensitivity") or "confidential"
        text += (
            f" The data is {SENSITIVITY_WORDS.get(level, level)}, so the work runs in a secure "
            "environment; these figures say what hardware it needs there."
        )
    if plan:
        text += "\n\n" + plan_text(plan)
    return text


# --- Advice without the GPU engine ------------------------------------------------------------


@dataclass(frozen=True)
class CpuAdvice:
    title: str
    summary: str
    reasons: list[str]
    systems: list[str]
    script: str


def cpu_advice_for(*, state: FlowState) -> CpuAdvice:
    outcome = state.outcome
    assert outcome is not None
    fields = state.fields
    data_gb = fields.get("cpu_data_gb")
    reasons = [
        "You said the work does not need a GPU: web scraping and data processing spend their "
        "time waiting on the network or disk, which a GPU does not speed up (Lancaster's "
        "'Deciding Project Requirements' guide).",
    ]
    if fields.get("cpu_interactive"):
        reasons.append(
            "You want to watch and fix it as it runs, so an interactive service (a notebook or "
            "console) suits it better than a batch queue."
        )
    else:
        reasons.append("It can run unattended, so a batch job can run it from the queue.")
    if data_gb not in (None, ""):
        reasons.append(
            f"You will handle about {data_gb:g} GB of data: ask for at least that "
            "much storage, with room for intermediate files."
        )
    sensitivity = fields.get("constraints.data_sensitivity")
    if sensitivity in SENSITIVE:
        reasons.append("Your data is sensitive: use a system approved for it.")
    script = cpu_sbatch_script() if outcome.advice == "cpu_batch" else ""
    return CpuAdvice(outcome.title, outcome.help, reasons, list(outcome.systems), script)


def deadline_warning(*, state: FlowState, wall_hours: float | None) -> str:
    deadline = state.fields.get("deadline")
    if not deadline or wall_hours is None:
        return ""
    days_left = (dt.date.fromisoformat(deadline) - timezone.localdate()).days
    if days_left < 0:
        return "Your deadline has passed; check the date you gave."
    if wall_hours > days_left * 24:
        return (
            f"The job needs about {wall_hours:,.0f} hours of wall time, longer than the "
            f"{days_left} days until your deadline, before any queue wait."
        )
    return ""


# --- An estimate the engine refused ----------------------------------------------------------


@dataclass(frozen=True)
class EstimateProblem:
    """The engine's reason for refusing an estimate, in the chart's words: the question whose
    answer it names (None where it names none the researcher gave) and its step."""

    message: str
    question: str | None = None
    step: str | None = None


def estimate_problem(*, state: FlowState, error: str) -> EstimateProblem:
    """`error` as the engine wrote it ("new_tokens: Whisper reads audio ...") with its field
    replaced by the question the researcher answered for that field."""
    field, sep, message = error.partition(": ")
    if not sep or not field.replace("_", "").replace(".", "").isalnum():
        return EstimateProblem(error)
    name = field.split(".")[0]
    for node in state.chart.nodes:
        if node.estimate is not None and node.estimate.field == name and node.id in state.answers:
            return EstimateProblem(message, node.title, node.id)
    return EstimateProblem(error)
