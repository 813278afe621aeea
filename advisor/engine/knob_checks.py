"""What a pinned layout or library knob of a request must satisfy: tensor-parallel and
pipeline degrees that the training library runs and that divide a pinned GPU count, and an
optimizer the library can step. Each error names the request field (request_checks.py collects
them into one RequestError)."""

from __future__ import annotations

from advisor.engine.frameworks import FRAMEWORKS, framework_for
from advisor.engine.models import EstimateRequest
from advisor.engine.preference import needs_trl_trainer


def knob_errors(request: EstimateRequest) -> list[tuple[str, str]]:
    """Every (field, message) the request's pinned layout and optimizer give."""
    return [
        *_tensor_parallel_errors(request),
        *_pipeline_parallel_errors(request),
        *_optimizer_errors(request),
    ]


def _pipeline_parallel_errors(request: EstimateRequest) -> list[tuple[str, str]]:
    """Pinned pipeline stages: training only, with a library that trains with them, inside a
    tensor-parallel layout (tensor_parallel not 1), whole pipelines on a pinned GPU count."""
    pp = request.pipeline_parallel
    if pp is None or pp == 1:
        return []
    if request.task == "inference":
        return [("pipeline_parallel", "pipeline stages are for training; leave it empty.")]
    refused = _library_refuses(request, "pipeline_parallel", "pipeline stages")
    if refused:
        return refused
    if request.tensor_parallel == 1 or request.strategy is not None:
        return [
            (
                "pipeline_parallel",
                "pipeline stages come with tensor parallelism and its own data parallelism "
                "(Megatron's layout); leave tensor_parallel and strategy empty, or pin a "
                "tensor-parallel degree above 1.",
            )
        ]
    whole = pp * (request.tensor_parallel or 1)
    if request.num_gpus is not None and request.num_gpus % whole:
        return [
            (
                "pipeline_parallel",
                f"{whole} GPUs per pipeline (tensor parallel x stages) do not divide "
                f"num_gpus {request.num_gpus}.",
            )
        ]
    return []


def _tensor_parallel_errors(request: EstimateRequest) -> list[tuple[str, str]]:
    """A pinned tensor-parallel degree must be one the library trains with, alone (it brings
    its own data-parallel layout) and a divisor of a pinned GPU count."""
    tp = request.tensor_parallel
    if tp is None or tp == 1:
        return []
    if request.task == "inference":
        return [
            (
                "tensor_parallel",
                "for inference the engine chooses the tensor-parallel degree per option; "
                "leave tensor_parallel empty.",
            )
        ]
    refused = _library_refuses(request, "tensor_parallel", "tensor parallelism")
    if refused:
        return refused
    if request.strategy is not None:
        return [
            (
                "tensor_parallel",
                f"tensor_parallel {tp} comes with its own data parallelism (the distributed "
                f"optimizer); leave strategy empty instead of {request.strategy}.",
            )
        ]
    if request.num_gpus is not None and request.num_gpus % tp:
        return [
            (
                "tensor_parallel",
                f"tensor_parallel {tp} does not divide num_gpus {request.num_gpus}.",
            )
        ]
    return []


# bitsandbytes' optimizers (8-bit states, or paged to host memory).
BITSANDBYTES_OPTIMIZERS = ("adamw_8bit", "paged_adamw", "paged_adamw_8bit")


def _optimizer_errors(request: EstimateRequest) -> list[tuple[str, str]]:
    """A bitsandbytes optimizer pinned for a library that cannot step one (Megatron-LM)."""
    if request.task == "inference" or request.optimizer not in BITSANDBYTES_OPTIMIZERS:
        return []
    profile, _ = framework_for(request.framework, True, needs_trl_trainer(request))
    if profile.eight_bit_optimizers:
        return []
    return [
        (
            "optimizer",
            f"{profile.name} steps its own Adam or SGD, not bitsandbytes' {request.optimizer}; "
            "choose adamw or sgd, or a library that takes bitsandbytes optimizers.",
        )
    ]


def _library_refuses(request: EstimateRequest, field: str, words: str) -> list[tuple[str, str]]:
    """The error for a parallel layout (`field`: pipeline_parallel or tensor_parallel) that the
    request's training library does not run, naming the libraries that do."""
    profile, _ = framework_for(request.framework, True, needs_trl_trainer(request))
    capability = f"{field}_training"
    if getattr(profile, capability):
        return []
    able = ", ".join(k for k, f in FRAMEWORKS.items() if getattr(f, capability))
    return [
        (
            field,
            f"{profile.name} does not train with {words}; name a library that does "
            f"(framework: {able}) or leave {field} empty.",
        )
    ]
