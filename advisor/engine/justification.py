"""A drafted justification paragraph the researcher can edit: model, method, data, the memory
and compute calculation, and why this system."""

from __future__ import annotations

from advisor.engine.device_memory import capacity_text
from advisor.engine.frameworks import FRAMEWORKS
from advisor.engine.memory import Workload
from advisor.engine.models import AcceleratorSpec, EstimateRequest, Option, SystemSpec
from advisor.engine.preference import OBJECTIVE_NAMES
from advisor.engine.recipe_reasons import LEVEL_WORDS, OPTIMIZER_WORDS
from advisor.engine.shape import ModelShape
from advisor.engine.words import (
    about_hours,
    gigabytes,
    gpus_and_strategy,
    hours,
    parameters,
    plural,
    quantity,
    whole_hours,
    with_article,
)
from advisor.engine.workload import global_batch

TASK_WORDS = {
    "inference": "inference",
    "full_finetune": "full fine-tuning",
    "pretrain": "pre-training",
    "lora": "LoRA fine-tuning",
    "qlora": "QLoRA fine-tuning (4-bit NF4 base model)",
}


def _params(n: int) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.2f} billion"
    return f"{n / 1e6:.0f} million"


def _hours(value: float | None, unit: str = "GPU hours") -> str:
    """Never "0 GPU hours": results are rounded, so a zero is a figure too small to show."""
    return f"less than 0.1 {unit}" if value is not None and value <= 0 else hours(value, unit)


def _setup_sentence(
    request: EstimateRequest, shape: ModelShape, wl: Workload, model_name: str, dtype: str | None
) -> str:
    """What will be run: the method, the model, the precision and the batch. `dtype`: the
    recommended option's compute type, which names the precision when the request left the
    16-bit type to the GPU."""
    precision = dtype if wl.fp16_where_no_bf16 and dtype else wl.precision
    method = TASK_WORDS[wl.task]
    if wl.adapters:
        method += f" with rank {wl.lora_rank} adapters"
    if wl.objective != "sft":
        method += f", by {OBJECTIVE_NAMES[wl.objective]},"
    return (
        f"We will run {method} of {model_name} ({parameters(shape.params_total)}"
        + (
            f", {_params(shape.params_active)} active per token"
            if shape.params_active != shape.params_total
            else ""
        )
        + f") in {precision}, with "
        + _batch_words(request, wl)
        + (
            f" of {wl.rollout.prompt_tokens:,}-token prompts and up to "
            f"{plural(wl.rollout.completion_tokens, 'generated token')} each"
            if wl.generates
            else f" of {plural(wl.seq_len, 'token')}"
        )
        + (f" generating {plural(wl.new_tokens, 'token')} each" if wl.task == "inference" else "")
        + "."
    )


def _batch_words(request: EstimateRequest, wl: Workload) -> str:
    if wl.sequences_per_sample > 1:
        return f"a global batch of {plural(global_batch(request), 'preference pair')}"
    if wl.objective == "kto":
        return f"a global batch of {plural(global_batch(request), 'labelled example')}"
    if wl.generates:
        batch = global_batch(request)
        prompts = plural(batch // max(wl.rollout.generations, 1), "prompt")
        return (
            f"a global batch of {plural(batch, 'completion')} ({prompts} x "
            f"{wl.rollout.generations} sampled each)"
        )
    if wl.training:
        return f"a global batch of {plural(global_batch(request), 'sequence')}"
    if wl.fills_kv_cache:  # the library batches the job's requests itself
        return f"about {plural(wl.batch_size, 'request')} at once (as many as the KV cache holds)"
    return f"batches of {plural(global_batch(request), 'request')}"


def _memory_sentence(option: Option, accelerator: AcceleratorSpec, serving: bool) -> str:
    """Memory per GPU by component against the GPU's capacity, and the layout."""
    mem = option.memory
    pieces = [
        ("weights", mem.weights),
        ("gradients", mem.gradients),
        ("optimizer states", mem.optimizer_states),
        ("activations", mem.activations),
        ("logits", mem.logits),
        ("KV cache", mem.kv_cache),
        ("vLLM's generation engine", mem.rollout_engine),
        ("quantisation", mem.quantization),
        ("CUDA context", mem.cuda_context),
        ("allocator reserve", mem.allocator_reserve),
    ]
    listed = ", ".join(f"{name} {gigabytes(value)}" for name, value in pieces if value)
    return (
        f"Memory per GPU comes to {gigabytes(mem.total_bytes)} ({listed}) against the "
        f"{capacity_text(accelerator)} of {with_article(accelerator.display_name)}, using "
        f"{gpus_and_strategy(option.num_gpus, option.strategy, option.nodes, serving)}."
    )


def draft(
    *,
    request: EstimateRequest,
    shape: ModelShape,
    wl: Workload,
    model_name: str,
    option: Option | None,
    system: SystemSpec | None,
    accelerator: AcceleratorSpec | None,
    flops_per_token: float | None,
) -> str:
    dtype = option.compute_dtype if option is not None else None
    parts = [_setup_sentence(request, shape, wl, model_name, dtype)]
    if request.tokens is not None:
        epochs = f" for {plural(request.epochs, 'epoch')}" if wl.training else ""
        parts.append(f"The data set is {plural(request.tokens, 'token')}{epochs}.")
    if option is None or system is None or accelerator is None:
        parts.append(
            "No system in the catalog meets the constraints with this model and setup; "
            "see the rejected options for what would have to change."
        )
        return " ".join(parts)
    if option.memory is not None:
        parts.append(_memory_sentence(option, accelerator, serving=not wl.training))
        if wl.fills_kv_cache:
            parts.append(_reservation_sentence(wl, option))
    recipe = option.recipe
    if recipe is not None and wl.training:
        optimizer = OPTIMIZER_WORDS.get(recipe.optimizer or "", recipe.optimizer)
        parts.append(
            "Each GPU processes micro-batches of "
            + (
                plural(recipe.micro_batch, "pair")
                if wl.sequences_per_sample > 1
                else str(recipe.micro_batch)
            )
            + " with "
            f"{plural(recipe.grad_accumulation, 'gradient accumulation step')}, "
            f"{LEVEL_WORDS[recipe.checkpointing]} and {optimizer}."
        )
    if option.gpu_hours is not None and flops_per_token is not None:
        parts.append(
            f"Compute is about {quantity(flops_per_token, 'FLOPs')} per token at "
            f"{(option.utilisation or 0):.0%} of the {option.compute_dtype} dense peak"
            + (_generation_words(recipe) if wl.generates else "")
            + f", {_hours(option.gpu_hours)}, plus {_hours(option.contingency_gpu_hours)} of "
            f"contingency for debugging, evaluation and restarts: "
            f"{whole_hours(option.requested_gpu_hours)} in total, "
            f"{about_hours(option.wall_hours, 'hours')} of wall time."
        )
    why = f"{system.display_name} fits this work"
    if system.notebooks and request.constraints.needs_notebooks:
        why += ", offers notebooks"
    why += f" and is approved for {request.constraints.data_sensitivity} data."
    parts.append(why)
    return " ".join(parts)


def _reservation_sentence(wl: Workload, option: Option) -> str:
    """What a library that reserves a share of each GPU at start-up (vLLM) shows in
    nvidia-smi, beside what the job needs: the KV cache fills the rest."""
    library = FRAMEWORKS[wl.decode_framework]
    share = library.preallocates or 1.0
    return (
        f"{library.name} reserves {share:.0%} of each GPU when it starts "
        f"({gigabytes(option.capacity_bytes * share)}, what nvidia-smi will show): the figure "
        "above is what the job needs (the model and one sequence's KV cache), and the cache "
        "fills the rest."
    )


def _generation_words(recipe) -> str:
    """GRPO's generation in the compute sentence, with how many GPUs each vLLM engine spans."""
    degree = (recipe and recipe.generation_tp) or 1
    spans = f" (one engine across every {degree} GPUs)" if degree > 1 else ""
    return f", with vLLM generating every step's completions first{spans}"
