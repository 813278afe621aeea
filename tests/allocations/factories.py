"""Test data for allocations: users, advisor sessions with a realistic estimate, requests."""

from __future__ import annotations

import itertools
from datetime import date, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from advisor.engine.models import (
    Assumption,
    EstimateResult,
    MemoryBreakdown,
    Option,
    Recommendation,
)
from advisor.models import AdvisorSession
from allocations.models import AllocationRequest, Status

_counter = itertools.count(1)
GB = 10**9


def make_user(*, staff: bool = False, **overrides):
    n = next(_counter)
    fields = {
        "username": f"user{n}",
        "email": f"user{n}@example.ac.uk",
        "first_name": "Ada",
        "last_name": f"Researcher{n}",
        "is_staff": staff,
    }
    fields.update(overrides)
    return get_user_model().objects.create_user(password="pw-for-tests-only", **fields)


def estimate_result(*, requested_gpu_hours: float = 288.0, system: str = "baskerville") -> dict:
    """A LoRA fine-tune of a 7B model on one A100 40GB, as EstimateResult.model_dump(mode=json)."""
    memory = MemoryBreakdown(
        weights=13_476_831_232,
        gradients=39_976_960,
        optimizer_states=159_907_840,
        activations=9_126_805_504,
        logits=1_048_576_000,
        cuda_context=500_000_000,
        allocator_reserve=2_418_000_000,
        total_bytes=26_770_097_536,
    )
    compute = round(requested_gpu_hours / 1.2, 1)
    recommendation = Recommendation(
        system=system,
        accelerator="a100-40-sxm4",
        num_gpus=1,
        nodes=1,
        strategy="single",
        memory_per_gpu_bytes=memory.total_bytes,
        memory=memory,
        capacity_bytes=40 * GB,
        fits=True,
        gpu_hours=compute,
        contingency_gpu_hours=round(requested_gpu_hours - compute, 1),
        requested_gpu_hours=requested_gpu_hours,
        wall_hours=compute,
        reasons=["Fits on one A100 40GB with 13 GB to spare.", "Baskerville runs batch jobs."],
        rank=1,
    )
    alternative = Option(
        system="stanage",
        accelerator="h100-80-pcie",
        num_gpus=1,
        nodes=1,
        strategy="single",
        memory_per_gpu_bytes=memory.total_bytes,
        fits=True,
        gpu_hours=round(compute * 0.6, 1),
        contingency_gpu_hours=round(compute * 0.12, 1),
        requested_gpu_hours=round(compute * 0.72, 1),
        wall_hours=round(compute * 0.6, 1),
        reasons=["Longer queue wait for H100 nodes."],
        rank=2,
    )
    result = EstimateResult(
        params_total=6_738_415_616,
        params_active=6_738_415_616,
        params_source="config.json (llama)",
        architecture="LlamaForCausalLM",
        memory=memory,
        options=[recommendation, alternative],
        recommendation=recommendation,
        justification=(
            "LoRA fine-tuning of meta-llama/Llama-2-7b-hf (6.7 billion parameters) on 200 million "
            "tokens for 3 epochs needs about 240 GPU hours on one A100 40GB; with 20% "
            f"contingency we request {requested_gpu_hours:g} GPU hours."
        ),
        warnings=[],
        assumptions=[
            Assumption(name="utilisation", value="0.42 of dense BF16 peak", source="benchmarks"),
            Assumption(name="contingency", value="20%", source="engine default"),
            Assumption(name="precision", value="bf16", source="researcher"),
        ],
        engine_version="0.1.0",
    )
    return result.model_dump(mode="json")


def estimate_request() -> dict:
    return {
        "model_id": "meta-llama/Llama-2-7b-hf",
        "task": "lora",
        "precision": "bf16",
        "batch_size": 4,
        "seq_len": 2048,
        "tokens": 200_000_000,
        "epochs": 3,
        "lora_rank": 16,
        "constraints": {"data_sensitivity": "internal"},
    }


def make_session(*, user=None, answers: dict | None = None, **result_overrides) -> AdvisorSession:
    start = timezone.localdate() + timedelta(days=14)
    default_answers = {
        "project_title": "Fine-tuning Llama for clinical notes",
        "timeline_start": start.isoformat(),
        "timeline_end": (start + timedelta(days=90)).isoformat(),
        "data_sensitivity": "internal",
    }
    return AdvisorSession.objects.create(
        user=user,
        chart="default",  # a real chart: its answers are read through its fields (issue 15)
        answers=default_answers if answers is None else answers,
        estimate_request=estimate_request(),
        estimate_result=estimate_result(**result_overrides),
        engine_version="0.1.0",
        completed_at=timezone.now(),
    )


def complete_fields(**overrides) -> dict[str, Any]:
    """Every field of the form, valid for submission."""
    start = timezone.localdate() + timedelta(days=14)
    fields: dict[str, Any] = {
        "caller_name": "Ada Researcher",
        "caller_branch": "The Alan Turing Institute",
        "project_title": "Fine-tuning Llama for clinical notes",
        "project_code": "ABC-DEF-001",
        "research_area": "Health",
        "pi_name": "Grace Hopper",
        "pi_email": "grace@example.ac.uk",
        "service": "hpc",
        "facility": "baskerville",
        "allocation_kind": "new",
        "cpu_hours": 0,
        "gpu_hours": 288,
        "start_date": start,
        "end_date": start + timedelta(days=90),
        "data_sensitivity": "internal",
        "justification": "LoRA fine-tuning of a 7B model needs one A100 for about 240 hours.",
        "trial": False,
    }
    fields.update(overrides)
    return fields


def as_post(fields: dict[str, Any], **extra) -> dict[str, Any]:
    data = {}
    for key, value in fields.items():
        if isinstance(value, bool):
            if value:
                data[key] = "on"
        elif isinstance(value, date):
            data[key] = value.isoformat()
        else:
            data[key] = value
    data.update(extra)
    return data


def make_request(
    *, researcher=None, session=None, status: str = Status.DRAFT, **overrides
) -> AllocationRequest:
    """A request row in any status, written directly (the workflow is tested through services)."""
    researcher = researcher or make_user()
    session = session if session is not None else make_session(user=researcher)
    fields = complete_fields(**overrides)
    now = timezone.now()
    return AllocationRequest.objects.create(
        researcher=researcher,
        advisor_session=session,
        status=status,
        estimate_snapshot={
            "request": session.estimate_request,
            "result": session.estimate_result,
            "engine_version": session.engine_version,
        },
        engine_version=session.engine_version,
        accelerator="a100-40-sxm4",
        num_gpus=1,
        submitted_at=None if status == Status.DRAFT else now,
        **fields,
    )
