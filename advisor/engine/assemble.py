"""The estimate assembled: the request reduced to a workload, every option evaluated and
ranked, the recommendation with its reasons, its Slurm script and justification, and the
assumptions and uncertainty the result states (`estimate`, re-exported by advisor.engine).
What the request itself warns of is in input_warnings.py; the recommendation's reasons and
script, or what rules every option out, in outcome.py."""

from __future__ import annotations

from dataclasses import replace

from advisor.engine import constants as c
from advisor.engine import ranking, words
from advisor.engine.compute import (
    filled_batch,
    inference_flops_per_token,
    training_flops_per_token,
)
from advisor.engine.errors import EstimateError
from advisor.engine.frameworks import Framework, framework_for
from advisor.engine.input_warnings import (
    experts_fused_in_transformers_5,
    input_warnings,
    request_as_published,
)
from advisor.engine.justification import draft
from advisor.engine.memory import Workload
from advisor.engine.memory_terms import ENCODER_ONLY_FAMILIES, routed_expert_params
from advisor.engine.models import (
    CatalogSpec,
    EstimateRequest,
    EstimateResult,
    FrameworkInfo,
    Option,
    built,
)
from advisor.engine.options import rank
from advisor.engine.outcome import memory_when_nothing_fits, recipe_hints, recommended
from advisor.engine.preference import needs_trl_trainer
from advisor.engine.recommend import evaluate
from advisor.engine.request_checks import check_request
from advisor.engine.result_assumptions import assumptions
from advisor.engine.shape import ModelShape
from advisor.engine.speed import measured
from advisor.engine.uncertainty import stated_uncertainty
from advisor.engine.version import ENGINE_VERSION
from advisor.engine.words import plural
from advisor.engine.workload import (
    build_workload,
    resolve_shape,
    stored_format,
    with_sequence_length,
)


def estimate(request: EstimateRequest, catalog: CatalogSpec) -> EstimateResult:
    """Estimate memory, compute and the best system for `request` over `catalog`.

    Raises EstimateError (a ValueError; RequestError carries field-level `errors`) for input
    the engine cannot estimate from.
    """
    warnings = check_request(request, catalog)
    shape = resolve_shape(request)
    return estimate_shape(request, catalog, shape, warnings=warnings)


def estimate_shape(
    request: EstimateRequest,
    catalog: CatalogSpec,
    shape: ModelShape,
    *,
    warnings: list[str] | None = None,
) -> EstimateResult:
    """`estimate` for an already counted model shape (tests and benchmarks use it directly)."""
    warnings = list(warnings or [])
    seq_len_assumed = request.seq_len is None
    request = request_as_published(request, warnings)
    request = with_sequence_length(request, shape)
    wl = build_workload(request, shape)
    warnings.extend(input_warnings(request, shape, wl))
    candidates = _ranked(request, shape, wl, catalog)
    tie_order = ranking.order(catalog.ranking)
    best = next((cand for cand in candidates if cand.eligible), None)
    why = _why_first(candidates, best, tie_order)
    recommendation = None
    slurm_script = None
    model_name = _model_name(request, shape)
    framework, assumed = framework_for(request.framework, wl.training, needs_trl_trainer(request))
    if best is not None:
        # Everything below describes the recipe the recommendation runs.
        wl = _recommended_workload(wl, best, framework, request.tokens)
        recommendation, slurm_script = recommended(
            best,
            candidates,
            wl,
            framework,
            why,
            model_name,
            request.constraints.max_wall_hours,
            experts_fused_in_transformers_5(shape, wl),
            routed_expert_params(shape) if wl.weight_format == "mxfp4" else 0.0,
        )
        memory = best.option.memory
        warnings.extend(_far_cheaper_hints(request, catalog, shape, wl, best))
        warnings.extend(recipe_hints(request, shape, wl, best, framework))
    else:
        memory = memory_when_nothing_fits(request, catalog, shape, wl, framework, warnings)
    uncertainty = stated_uncertainty(
        memory.total_bytes, best.option.gpu_hours if best else None, wl.task
    )
    return built(
        EstimateResult,
        params_total=shape.params_total,
        params_active=shape.params_active,
        params_source=shape.source,
        architecture=shape.architecture,
        memory=memory,
        options=[cand.option for cand in candidates],
        recommendation=recommendation,
        alternatives=ranking.alternatives(
            [cand.option for cand in candidates], best.option if best else None
        ),
        objective=ranking.objective(
            tie_order, stated_batch=wl.training and request.batch_size is not None
        ),
        why_first=why,
        justification=_justification(request, shape, wl, model_name, best),
        slurm_script=slurm_script,
        warnings=warnings + [f"Model: {note}" for note in shape.notes],
        assumptions=assumptions(
            request, shape, wl, framework, assumed, best, seq_len_assumed=seq_len_assumed
        ),
        uncertainty=uncertainty,
        engine_version=ENGINE_VERSION,
        framework=built(
            FrameworkInfo,
            key=framework.key,
            name=framework.name,
            assumed=assumed,
            source=framework.source,
        ),
    )


def _why_first(candidates: list, best, tie_order) -> str:
    """Why the recommendation ranks first, against the first eligible option on another system
    or GPU ("" when nothing is eligible)."""
    if best is None:
        return ""
    eligible = [cand for cand in candidates if cand.eligible]
    runner_up = next((cand for cand in eligible[1:] if _other_choice(cand, best)), None)
    return ranking.why_first(best, runner_up, tie_order)


def _recommended_workload(wl: Workload, best, framework: Framework, tokens) -> Workload:
    """The workload as the recommended option runs it: its training recipe, and, where the
    library fills its KV cache, the sequences that cache holds at once."""
    wl = _recipe_workload(wl, best.option.recipe)
    if wl.fills_kv_cache:  # timed at the sequences its KV cache holds (recommend.py)
        opt = best.option
        at_once = filled_batch(
            framework, best.accelerator, opt.capacity_bytes, opt.memory, wl, tokens
        )
        wl = replace(wl, batch_size=at_once)
    return wl


def _justification(
    request: EstimateRequest, shape: ModelShape, wl: Workload, model_name: str, best
) -> str:
    """The drafted justification paragraph, for the recommendation or for nothing fitting."""
    flops = training_flops_per_token(shape, wl) if wl.training else inference_flops_per_token(shape)
    return draft(
        request=request,
        shape=shape,
        wl=wl,
        model_name=model_name,
        option=best.option if best else None,
        system=best.system if best else None,
        accelerator=best.accelerator if best else None,
        flops_per_token=flops,
    )


# Below this share of the recommendation's GPU hours, another library or batch is worth naming.
_WORTH_NAMING = 0.5


def _far_cheaper_hints(
    request: EstimateRequest, catalog: CatalogSpec, shape: ModelShape, wl: Workload, best
) -> list[str]:
    """Another library or batch that would need far fewer GPU hours on the same GPUs."""
    hints = (
        _continuous_batching_hint(request, catalog, shape, wl, best),
        _encoder_batching_hint(request, catalog, shape, best),
        _sixteen_bit_lora_hint(request, catalog, shape, wl, best),
        _sixteen_bit_hint(request, catalog, shape, best),
    )
    return [hint for hint in hints if hint is not None]


def _continuous_batching_hint(
    request: EstimateRequest, catalog: CatalogSpec, shape: ModelShape, wl: Workload, best
) -> str | None:
    """A batch job generating text with Transformers generate() (what the engine assumes when
    no library is given) runs its requests a batch at a time; vLLM schedules all of them
    itself and fills the GPU. Where vLLM, estimated on the recommended system and GPU, needs
    less than half the GPU hours, say how many: the researcher may not know the difference
    is an order of magnitude. Decoder-only models that generate only (vLLM's offline LLM
    class); the same request with framework vllm is sized on the recommended system, so it
    carries every rule the engine applies to vLLM (software support, memory reservation).
    TGI batches only what its client sends at once (one prompt per request): without a batch
    size it runs one at a time, and the hint says what concurrency would save."""
    if request.task != "inference" or not wl.new_tokens or request.tokens is None:
        return None
    if request.framework not in (None, "transformers", "transformers_legacy", "tgi"):
        return None
    if shape.encoder_layers or shape.is_encoder_decoder or best.option.gpu_hours is None:
        return None
    if request.framework == "tgi" and request.batch_size is not None:
        return None  # the concurrency its client sends is stated
    other = _far_cheaper_on_the_same_gpus({"framework": "vllm"}, request, shape, catalog, best)
    if other is None:
        return None
    batch = plural(wl.batch_size, "request")
    if request.framework == "tgi":
        return (
            f"TGI batches the requests in flight together (up to --max-concurrent-requests, "
            f"128 by default), but its API takes one prompt per request: a client that sends "
            f"them one after another, as assumed without a batch size, gets "
            f"{plural(wl.batch_size, 'sequence')} at a time and "
            f"{words.hours(best.option.gpu_hours)}. Sent concurrently, they share each "
            f"decoding step: vLLM, which schedules every prompt of a batch job itself, would "
            f"take {_about_hours(other.gpu_hours)} on {plural(other.num_gpus, 'GPU')} of the "
            "same kind. Give the concurrency your client sends as the batch size to estimate "
            "TGI with it, or choose vLLM (TGI launcher docs; TGI issue 1900: no batch "
            "endpoint)."
        )
    return (
        f"vLLM would generate this job in {_about_hours(other.gpu_hours)} on "
        f"{plural(other.num_gpus, 'GPU')} of the same kind, against "
        f"{words.hours(best.option.gpu_hours)} with Transformers generate() in batches of "
        f"{batch}: it schedules all the prompts itself and keeps as many sequences in flight "
        "as the GPU memory holds (continuous batching, paged KV cache). Choose vLLM as the "
        "library in the flowchart (framework: vllm in the API) to estimate with it."
    )


# sentence-transformers' SentenceTransformer.encode() embeds 32 sentences per forward pass by
# default; transformers' pipelines batch only when given batch_size.
_ENCODER_BATCH = 32


def _encoder_batching_hint(
    request: EstimateRequest, catalog: CatalogSpec, shape: ModelShape, best
) -> str | None:
    """An encoder embedding or classifying a corpus one sequence per forward pass (the
    engine's inference default, the latency case) spends most of a short sequence's time on
    launching kernels. Where 32 sequences per pass, sized on the recommended system and GPU,
    need less than half the GPU hours, say so: batching is one argument away."""
    if request.task != "inference" or request.tokens is None or best.option.gpu_hours is None:
        return None
    if shape.family not in ENCODER_ONLY_FAMILIES:
        return None
    if request.batch_size is not None or request.micro_batch is not None:
        return None
    batched = {"batch_size": _ENCODER_BATCH}
    other = _far_cheaper_on_the_same_gpus(batched, request, shape, catalog, best)
    if other is None:
        return None
    return (
        f"{_ENCODER_BATCH} sequences per forward pass would take "
        f"{_about_hours(other.gpu_hours)} on "
        f"{plural(other.num_gpus, 'GPU')} of the same kind, against "
        f"{words.hours(best.option.gpu_hours)} one sequence at a time (assumed: you gave no "
        "batch): short sequences leave the GPU waiting on kernel launches. sentence-"
        f"transformers' encode() batches {_ENCODER_BATCH} by default; transformers' pipeline "
        "needs batch_size. Give the batch in the flowchart (batch_size in the API) to estimate "
        "with it."
    )


# QLoRA's saving worth naming: beyond the engine's own error on GPU hours (a median of 12-13 %
# on the test points, docs/accuracy.md; constants FEWER_GPUS_COST_BAND reads it the same way).
_QLORA_WORTH_NAMING = 1 - c.FEWER_GPUS_COST_BAND.value


def _sixteen_bit_lora_hint(
    request: EstimateRequest, catalog: CatalogSpec, shape: ModelShape, wl: Workload, best
) -> str | None:
    """QLoRA exists to fit a small GPU (Dettmers et al. 2023, arXiv:2305.14314: 65B on one
    48 GB card), and its 4-bit base costs a dequantisation of every weight in each pass. Where
    the recommended GPU holds LoRA on the 16-bit model as well, on no more GPUs and in clearly
    fewer GPU hours, say so: the paper finds NF4 QLoRA matches 16-bit LoRA's quality, so the
    choice is the researcher's. Not for a checkpoint published in 4 or 8 bits (LoRA on it is
    QLoRA), and only where the 16-bit weights could fit at all (the check is a second ranking
    on one system)."""
    if request.task != "qlora" or stored_format(request) or best.option.gpu_hours is None:
        return None
    if 2 * shape.params_total > best.option.capacity_bytes / 2:
        return None
    # On the recommendation's GPU count: the comparison the researcher would make, and a
    # smaller second ranking.
    change = {
        "task": "lora",
        "precision": None,
        "quantization": None,
        "double_quant": None,
        "num_gpus": best.option.num_gpus,
    }
    other = _far_cheaper_on_the_same_gpus(
        change, request, shape, catalog, best, worth=_QLORA_WORTH_NAMING
    )
    if other is None or other.num_gpus > best.option.num_gpus:
        return None
    return (
        f"LoRA on the 16-bit model would run on {plural(other.num_gpus, 'GPU')} of the same "
        f"kind too ({words.gigabytes(other.memory_per_gpu_bytes)} per GPU) in "
        f"{_about_hours(other.gpu_hours)} against {words.hours(best.option.gpu_hours)}: "
        "QLoRA's 4-bit base saves memory this GPU does not need, and dequantising it in every "
        "pass costs time. QLoRA matches 16-bit LoRA's quality (Dettmers et al. 2023, "
        "arXiv:2305.14314), so either serves; choose LoRA in the flowchart (task: lora in the "
        "API) to estimate with it."
    )


# A third fewer GPU hours: beyond the engine's stated error on full training (about +-24 % as an
# absolute error on the test points, docs/accuracy.md), so the saving is real, not noise.
_SIXTEEN_BIT_WORTH_NAMING = 2 / 3


def _sixteen_bit_hint(
    request: EstimateRequest, catalog: CatalogSpec, shape: ModelShape, best
) -> str | None:
    """fp32 is what the Transformers Trainer and a plain PyTorch loop run when nobody asks
    for 16-bit, and their matmuls then skip the tensor cores (PyTorch leaves TF32 off). Where
    16-bit on the recommended system and GPU (bf16 where the GPU has it, else fp16 with loss
    scaling) needs a third fewer GPU hours or less, say how many: mixed precision keeps fp32
    master weights, so training ends where fp32 does (Micikevicius et al. 2018,
    arXiv:1710.03740), and inference serves 16-bit weights as published checkpoints are."""
    if request.precision != "fp32" or request.tokens is None or best.option.gpu_hours is None:
        return None
    sixteen = "bf16" if best.accelerator.bf16_supported and best.accelerator.bf16_tflops else "fp16"
    training = request.task != "inference"
    change = {"precision": sixteen, "mixed_precision": True if training else None}
    other = _far_cheaper_on_the_same_gpus(
        change, request, shape, catalog, best, worth=_SIXTEEN_BIT_WORTH_NAMING
    )
    if other is None:
        return None
    master = "keep training where fp32 ends (Micikevicius et al. 2018, arXiv:1710.03740)"
    if not training:
        how = f"With {sixteen} weights"
        why = "the weights take half the memory, and published checkpoints are 16-bit"
    elif sixteen == "bf16":
        how = "With bf16 mixed precision (the Trainer's --bf16, torch.autocast)"
        why = f"its fp32 master weights {master}"
    else:
        how = (
            "With fp16 mixed precision and loss scaling (the Trainer's --fp16; this GPU has "
            "no bf16)"
        )
        why = f"its fp32 master weights and loss scaling {master}"
    return (
        f"{how}, this job would take {_about_hours(other.gpu_hours)} on "
        f"{plural(other.num_gpus, 'GPU')} of the same kind, against "
        f"{words.hours(best.option.gpu_hours)} in fp32: 16-bit matmuls run on the tensor "
        f"(matrix) cores at many times the fp32 rate, and {why}. Choose {sixteen} in the "
        f"flowchart (precision: {sixteen} in the API) to estimate with it."
    )


def _far_cheaper_on_the_same_gpus(
    change: dict,
    request: EstimateRequest,
    shape: ModelShape,
    catalog: CatalogSpec,
    best,
    *,
    worth: float = _WORTH_NAMING,
) -> Option | None:
    """The request with `change`, sized only on the recommended system and GPU (so it carries
    every rule the engine applies there), when its first eligible option needs less than
    `worth` (by default half) of the recommendation's GPU hours; else None."""
    where = {"system": best.system.name, "accelerator": best.accelerator.name}
    pinned = request.model_copy(update={**change, **where})
    try:
        pinned_wl = build_workload(pinned, shape)
    except EstimateError:
        return None
    ranked = _ranked(pinned, shape, pinned_wl, catalog, systems=[best.system])
    other = next((cand.option for cand in ranked if cand.eligible), None)
    if other is None or other.gpu_hours is None:
        return None
    if other.gpu_hours >= worth * best.option.gpu_hours:
        return None
    return other


def _about_hours(value: float) -> str:
    """ "about 1.5 GPU hours", or "less than 0.1 GPU hours" without the "about"."""
    text = words.hours(value)
    return text if text.startswith("less than") else f"about {text}"


def _model_name(request: EstimateRequest, shape: ModelShape) -> str:
    return (
        request.model_id
        or (request.hub.repo_id if request.hub else None)
        or (shape.architecture or "a model of the size given")
    )


def _ranked(
    request: EstimateRequest,
    shape: ModelShape,
    wl: Workload,
    catalog: CatalogSpec,
    systems: list | None = None,
) -> list:
    """Every system / node type / strategy in the catalog (or of `systems`) sized and ranked
    (recommend.py)."""
    accelerators = {a.name: a for a in catalog.accelerators}
    return rank(
        evaluate(
            request,
            shape,
            wl,
            catalog.systems if systems is None else systems,
            accelerators,
            measured(catalog.benchmarks, accelerators),
            catalog.ranking,
        ),
        ranking.order(catalog.ranking),
    )


def _recipe_workload(wl: Workload, recipe) -> Workload:
    """The workload as the recommended training recipe runs it (micro-batch, checkpointing,
    optimizer); inference and options without a recipe are unchanged."""
    if recipe is None or not wl.training:
        return wl
    return replace(
        wl,
        batch_size=recipe.micro_batch,
        gradient_checkpointing=recipe.checkpointing == "full",
        selective_recompute=recipe.checkpointing == "selective",
        optimizer=recipe.optimizer or wl.optimizer,
    )


def _other_choice(cand, best) -> bool:
    """A different system or GPU from the recommendation (not just another strategy)."""
    return (cand.system.name, cand.accelerator.name) != (best.system.name, best.accelerator.name)
