"""Reads for allocations: a researcher's requests, the pre-filled form, the frozen estimate."""

from __future__ import annotations

import math
from datetime import date
from typing import Any

from django.conf import settings
from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404

from advisor.engine.words import STRATEGY_NAMES
from advisor.memory_svg import COMPONENTS, MemoryBar, memory_chart
from allocations.facilities import facility_get, facility_offers_trial, trial_gpu_hours_limit
from allocations.models import AllocationEvent, AllocationRequest, Service
from allocations.services import requested_gpu_hours_from_result
from catalog.models import DataSensitivity
from catalog.selectors import accelerator_display_name, system_display_name

# An estimate is "uncertain" when the engine's stated GPU-hour error for its task family is at
# least this large (`gpu_hours_relative`: the absolute error covering 80 % of that family's test
# points, advisor/engine/uncertainty.json; inference states about 0.49, adapters 0.33, full
# training 0.22, so no family reaches it today), when it has no GPU hours, or when the high end
# of its memory range would not fit the GPU. A trial then helps scope the work (seed 001:
# trial access is "aimed at helping scope and specify requirements").
UNCERTAIN_GPU_HOURS_RELATIVE = 0.5


def allocation_request_list_for_researcher(*, user) -> QuerySet[AllocationRequest]:
    return (
        AllocationRequest.objects.for_researcher(user)
        .select_related("system")
        .order_by("-updated_at")
    )


def allocation_request_get_for_researcher(*, user, pk) -> AllocationRequest:
    """Someone else's request is a 404, the same as one that does not exist."""
    events = AllocationEvent.objects.select_related("actor")
    return get_object_or_404(
        AllocationRequest.objects.for_researcher(user)
        .select_related("system")
        .prefetch_related(Prefetch("events", queryset=events)),
        pk=pk,
    )


def _parse_date(raw: Any) -> date | None:
    if not isinstance(raw, str):
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        return None


def _service_for(system_name: str) -> str:
    facility = facility_get(system_name) if system_name else None
    if facility:
        return facility.service
    return Service.AZURE if "azure" in system_name.lower() else Service.HPC


def estimate_is_uncertain(result: dict[str, Any]) -> bool:
    recommendation = result.get("recommendation") or {}
    if recommendation.get("requested_gpu_hours") is None:
        return True
    uncertainty = result.get("uncertainty") or {}
    if (uncertainty.get("gpu_hours_relative") or 0) >= UNCERTAIN_GPU_HOURS_RELATIVE:
        return True
    capacity = recommendation.get("capacity_bytes")
    high = uncertainty.get("memory_high_bytes")
    return bool(capacity and high and high > capacity)


def trial_reason(*, gpu_hours: int | None, facility: str, result: dict[str, Any]) -> str:
    """Why trial access suits this request: "small", "uncertain", or "" (it does not).

    Only on a system that offers trial access; "small" only when the hours fit its trial
    limit (no hours yet is not small); "uncertain" when the estimate's own spread says so.
    """
    if not facility_offers_trial(facility):
        return ""
    if gpu_hours and gpu_hours <= trial_gpu_hours_limit(facility):
        return "small"
    return "uncertain" if estimate_is_uncertain(result) else ""


def trial_suggested(*, gpu_hours: int | None, facility: str, result: dict[str, Any]) -> bool:
    return bool(trial_reason(gpu_hours=gpu_hours, facility=facility, result=result))


def allocation_request_initial_from_session(*, session, user) -> dict[str, Any]:
    """Every form field the advisor already knows; the researcher completes the rest."""
    from advisor.flow_services import advisor_session_fields, session_request_summary

    answers = advisor_session_fields(advisor_session=session)  # by field, never by step id
    stored = session.answers or {}
    result = session.estimate_result or {}
    request = session.estimate_request or {}
    summary = session_request_summary(advisor_session=session)
    system = summary["facility"]
    gpu_hours = summary["gpu_hours"]
    sensitivity = answers.get("constraints.data_sensitivity") or (
        request.get("constraints") or {}
    ).get("data_sensitivity")
    initial: dict[str, Any] = {
        "caller_name": user.get_full_name() or user.get_username(),
        "caller_branch": settings.ALLOCATION_DEFAULT_BRANCH,
        "project_title": answers.get("project_title") or stored.get("project_title") or "",
        "service": _service_for(system) if system else "",
        "facility": system,
        "allocation_kind": "new",
        "cpu_hours": 0,
        "gpu_hours": gpu_hours or 0,
        # The flowchart asks one date, the deadline ("By when do you need the results?"):
        # the allocation should last until then.
        # Sessions from other front ends may carry explicit dates (not asked by any chart).
        "start_date": _parse_date(stored.get("timeline_start")),
        "end_date": _parse_date(stored.get("timeline_end")) or _parse_date(answers.get("deadline")),
        "data_sensitivity": sensitivity if sensitivity in DataSensitivity.values else "",
        "justification": summary["justification"] or result.get("justification") or "",
        "trial": bool(gpu_hours)
        and facility_offers_trial(system)
        and gpu_hours <= trial_gpu_hours_limit(system),
    }
    initial["research_purpose"] = research_purpose_known(
        user=user, project_title=initial["project_title"]
    )
    return initial


def research_purpose_known(*, user, project_title: str) -> str:
    """What the researcher last said the project is for, so it is asked once per project."""
    if not project_title:
        return ""
    latest = (
        AllocationRequest.objects.for_researcher(user)
        .filter(project_title=project_title)
        .exclude(research_purpose="")
        .order_by("-updated_at")
        .values_list("research_purpose", flat=True)
        .first()
    )
    return latest or ""


def requested_against_estimate(*, requested: int | None, result: dict[str, Any]) -> dict | None:
    """How the hours asked for differ from the estimate's (rounded up as the form does).

    None when they agree, or there is nothing to compare: a reviewer should not have to
    subtract two numbers in two columns to notice a researcher changed the hours.
    """
    plan = result.get("_project_plan") if isinstance(result, dict) else None
    estimated = plan["total_gpu_hours"] if plan else requested_gpu_hours_from_result(result)
    if requested is None or estimated is None or requested == estimated:
        return None
    return {
        "requested": requested,
        "estimated": estimated,
        "difference": abs(requested - estimated),
        "direction": "more" if requested > estimated else "fewer",
    }


def other_facility(result: dict[str, Any], facility: str | None) -> dict[str, Any] | None:
    """When the request asks for another system than the one estimated: both, side by side.

    The estimate's own best option on the requested system (it ranked every system) gives the
    figures there, or says it had none; staff see both before deciding.
    """
    recommendation = result.get("recommendation") or {}
    estimated = recommendation.get("system")
    if not facility or not estimated or facility == estimated:
        return None
    there = [
        o
        for o in result.get("options") or []
        if o.get("system") == facility and o.get("fits") and o.get("requested_gpu_hours")
    ]
    best = min(
        there, key=lambda o: (o.get("rank") or 10**6, o["requested_gpu_hours"]), default=None
    )
    return {
        "estimated": estimated,
        "estimated_accelerator": recommendation.get("accelerator") or "",
        "estimated_hours": requested_gpu_hours_from_result(result),
        "requested": facility,
        "option": best,
        "option_hours": math.ceil(best["requested_gpu_hours"]) if best else None,
    }


def earlier_estimates(snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """Estimates this request replaced when its facility changed, newest first."""
    rows = []
    for earlier in reversed(snapshot.get("history") or []):
        result = earlier.get("result") or {}
        recommendation = result.get("recommendation") or {}
        plan = earlier.get("project_plan")
        rows.append(
            {
                "system": earlier.get("system") or recommendation.get("system") or "",
                "accelerator": recommendation.get("accelerator") or "",
                "num_gpus": recommendation.get("num_gpus"),
                "gpu_hours": plan["total_gpu_hours"]
                if plan
                else requested_gpu_hours_from_result(result),
                "engine_version": earlier.get("engine_version") or "",
                "replaced_at": _parse_datetime(earlier.get("replaced_at")),
            }
        )
    return rows


def _parse_datetime(raw: Any):
    from django.utils.dateparse import parse_datetime

    return parse_datetime(raw) if isinstance(raw, str) else None


def estimate_view(
    snapshot: dict[str, Any],
    *,
    requested_gpu_hours: int | None = None,
    facility: str | None = None,
) -> dict[str, Any]:
    """The frozen estimate, shaped for a template: headline numbers, assumptions, memory."""
    result = snapshot.get("result") or {}
    recommendation = result.get("recommendation") or {}
    return {
        "earlier_estimates": earlier_estimates(snapshot),
        "other_facility": other_facility(result, facility),
        "requested_against_estimate": requested_against_estimate(
            requested=requested_gpu_hours,
            result={**result, "_project_plan": snapshot.get("project_plan")},
        ),
        "project_plan": snapshot.get("project_plan"),
        "engine_version": snapshot.get("engine_version") or result.get("engine_version", ""),
        "request": snapshot.get("request") or {},
        "params_total": result.get("params_total"),
        "params_active": result.get("params_active"),
        "params_source": result.get("params_source", ""),
        "recommendation": recommendation,
        "assumptions": result.get("assumptions") or [],
        "warnings": result.get("warnings") or [],
        "justification": result.get("justification", ""),
        "options": result.get("options") or [],
        "memory_picture": memory_picture(result),
        "inputs": estimate_inputs(snapshot.get("request") or {}),
    }


TASK_LABELS = {
    "inference": "Inference",
    "full_finetune": "Full fine-tuning",
    "lora": "LoRA fine-tuning",
    "qlora": "QLoRA fine-tuning",
    "pretrain": "Pre-training",
}


OBJECTIVE_LABELS = {
    "sft": "Example texts (supervised fine-tuning)",
    "dpo": "Preference pairs with a reference model (DPO)",
    "reference_free_preference": "Preference pairs without a reference model (ORPO, SimPO)",
    "kto": "Single answers marked good or bad, with a reference model (KTO)",
    "grpo": "Answers it writes itself, scored by reward functions (GRPO)",
}


def _count(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, int | float) else str(value)


def _asked_for_words(key: str, value: Any) -> str:
    """A pinned system, GPU or strategy by the name people use, never its catalog key."""
    if key == "system":
        return system_display_name(value)
    if key == "accelerator":
        return accelerator_display_name(value)
    if key == "strategy":
        return STRATEGY_NAMES.get(str(value), str(value).replace("_", " "))
    return _count(value)


def estimate_inputs(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The workload the researcher described, as (label, value) rows a reviewer reads first.

    The engine's assumptions say how it computed; these say what it computed for, so staff
    can question "3 epochs of 4 billion tokens?" without opening the JSON export.
    """
    if not request:
        return []
    rows: list[tuple[str, str]] = []
    if request.get("model_id"):
        rows.append(("Model", str(request["model_id"])))
    elif request.get("params"):
        rows.append(("Model", f"{_count(request['params'])} parameters (as typed)"))
    elif request.get("config"):
        architectures = (request["config"].get("architectures") or ["?"])[0]
        rows.append(("Model", f"from a config.json ({architectures})"))
    task = request.get("task")
    if task:
        rows.append(("Work", TASK_LABELS.get(task, str(task))))
    objective = request.get("training_objective")
    if objective:
        rows.append(("Learns from", OBJECTIVE_LABELS.get(objective, str(objective))))
    if task and request.get("precision") is None:
        rows.append(("Precision", "not given: 16-bit, bf16 or fp16 as the GPU has it"))
    for key, label in (
        ("precision", "Precision"),
        (
            "batch_size",
            "Global batch (preference pairs)"
            if objective in ("dpo", "reference_free_preference")
            else "Global batch (labelled examples)"
            if objective == "kto"
            else "Global batch (completions)"
            if objective == "grpo"
            else "Global batch (sequences)",
        ),
        ("seq_len", "Prompt length" if objective == "grpo" else "Sequence length"),
    ):
        if request.get(key) is not None:
            rows.append((label, _count(request[key])))
    if request.get("tokens") is not None:
        label = "Tokens in total" if task == "inference" else "Tokens per epoch"
        rows.append((label, _count(request["tokens"])))
    if request.get("new_tokens") is not None:
        label = "Longest answer written" if objective == "grpo" else "Tokens generated per request"
        rows.append((label, _count(request["new_tokens"])))
    if objective == "grpo" and request.get("generations_per_prompt") is not None:
        rows.append(("Answers per prompt", _count(request["generations_per_prompt"])))
    if objective == "grpo" and request.get("generation_tensor_parallel") is not None:
        rows.append(("GPUs per vLLM engine", _count(request["generation_tensor_parallel"])))
    if objective == "grpo" and request.get("kl_penalty") is not None:
        rows.append(
            (
                "KL penalty",
                "yes: a frozen reference model" if request["kl_penalty"] else "no (beta 0)",
            )
        )
    if task != "inference" and request.get("epochs") is not None:
        rows.append(("Epochs", f"{request['epochs']:g}"))
    if task in ("lora", "qlora") and request.get("lora_rank"):
        rows.append(("LoRA rank", str(request["lora_rank"])))
    for key, label in (
        ("num_gpus", "GPUs asked for"),
        ("strategy", "Parallel strategy asked for"),
        ("system", "System asked for"),
        ("accelerator", "GPU asked for"),
    ):
        if request.get(key):
            rows.append((label, _asked_for_words(key, request[key])))
    sensitivity = (request.get("constraints") or {}).get("data_sensitivity")
    if sensitivity:
        label = dict(DataSensitivity.choices).get(sensitivity, sensitivity)
        rows.append(("Data sensitivity", str(label)))
    return rows


def memory_picture(result: dict[str, Any]) -> dict[str, Any] | None:
    """The frozen estimate's per-GPU memory against the GPU's capacity: the advisor's memory
    chart (one template draws both pages' bars) and the figures its caption states."""
    recommendation = result.get("recommendation") or {}
    memory = recommendation.get("memory") or result.get("memory") or {}
    components = {key: memory.get(key) or 0 for key, _ in COMPONENTS}
    total = memory.get("total_bytes") or sum(components.values())
    if not total:
        return None
    capacity = recommendation.get("capacity_bytes") or 0
    accelerator = recommendation.get("accelerator", "")
    # People read the GPU's name ("NVIDIA A100 40GB"), never its catalog key ("a100-40-sxm4").
    bar = MemoryBar(
        label=accelerator_display_name(accelerator) or "Per GPU",
        capacity_bytes=capacity,
        components=components,
    )
    return {
        "chart": memory_chart(bars=[bar]),
        "total_gb": total / 1e9,
        "capacity_gb": capacity / 1e9 if capacity else None,
        "fits": recommendation.get("fits"),
        "accelerator": accelerator,
        "components": [
            {"label": label, "gb": components[key] / 1e9}
            for key, label in COMPONENTS
            if components[key] > 0
        ],
    }
