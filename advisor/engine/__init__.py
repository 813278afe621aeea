"""The estimation engine: pure Python + pydantic, no Django.

`estimate(request, catalog)` is the one entry point: memory per GPU by component, FLOPs, GPU
hours and wall time for every system / accelerator / strategy in the catalog, ranked with
reasons, plus a justification paragraph and a starter Slurm script.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from advisor.engine import constants as c
from advisor.engine import ranking, scale_cost, words
from advisor.engine.compute import peak_tflops, training_flops_per_token, training_layout
from advisor.engine.errors import EstimateError
from advisor.engine.frameworks import framework_for
from advisor.engine.justification import draft
from advisor.engine.memory import PHASES, Workload, kv_cache_copies, memory_per_gpu
from advisor.engine.models import (
    Assumption,
    CatalogSpec,
    EstimateRequest,
    EstimateResult,
    FrameworkInfo,
    MemoryBreakdown,
    Recommendation,
)
from advisor.engine.parallel_options import layout_assumptions
from advisor.engine.recipe import micro_batch_efficiency
from advisor.engine.recommend import evaluate, rank, trusted
from advisor.engine.shape import ModelShape
from advisor.engine.slurm import sbatch_script
from advisor.engine.speed import decode_speed, generation, measured
from advisor.engine.workload import (
    RequestError,
    build_workload,
    check_request,
    parse_request,
    resolve_model,
    resolve_shape,
)

ENGINE_VERSION = "1.2.0"

__all__ = [
    "ENGINE_VERSION",
    "EstimateError",
    "RequestError",
    "estimate",
    "estimate_shape",
    "parse_request",
    "resolve_model",
]


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
    wl = build_workload(request, shape)
    if shape.max_position_embeddings and wl.seq_len > shape.max_position_embeddings:
        warnings.append(
            f"seq_len {wl.seq_len:,} is longer than the model's {shape.max_position_embeddings:,}"
            " positions; it needs position scaling or will not work."
        )
    if wl.training and request.tokens is None:
        warnings.append("No token count given: GPU hours cannot be estimated, only memory.")
    if wl.task == "inference" and request.tokens is None:
        warnings.append("No token count given: GPU hours need the total prompt + generated tokens.")
    accelerators = {a.name: a for a in catalog.accelerators}
    candidates = rank(
        evaluate(
            request,
            shape,
            wl,
            catalog.systems,
            accelerators,
            measured(catalog.benchmarks, accelerators),
            catalog.ranking,
        )
    )
    tie_order = ranking.order(catalog.ranking)
    eligible = [cand for cand in candidates if cand.eligible]
    best = eligible[0] if eligible else None
    why = ""
    if best is not None:
        runner_up = next((c for c in eligible[1:] if _other_choice(c, best)), None)
        why = ranking.why_first(best, runner_up, tie_order)
    recommendation = None
    slurm_script = None
    model_name = (
        request.model_id
        or (request.hub.repo_id if request.hub else None)
        or (shape.architecture or "a model of the size given")
    )
    framework, assumed = framework_for(request.framework, wl.training)
    if best is not None:
        recipe = best.option.recipe
        if recipe is not None and wl.training:
            # Everything below describes the recipe the recommendation runs.
            wl = replace(
                wl,
                batch_size=recipe.micro_batch,
                gradient_checkpointing=recipe.checkpointing == "full",
                selective_recompute=recipe.checkpointing == "selective",
                optimizer=recipe.optimizer or wl.optimizer,
            )
        reasons = _recommendation_reasons(best, candidates, wl, framework, why)
        # The best option's fields, already complete, with the longer reasons.
        recommendation = trusted(Recommendation, {**best.option.__dict__, "reasons": reasons})
        slurm_script = sbatch_script(
            option=best.option,
            system=best.system,
            node=best.node,
            partition=best.partition,
            model_name=model_name,
            task=wl.task,
            platform=generation(best.accelerator).platform,
            framework=framework,
        )
        memory = best.option.memory
    else:
        memory = MemoryBreakdown.model_construct(**memory_per_gpu(shape, wl, "single", 1))
        warnings.append(
            "Nothing in the catalog fits within the constraints; see each option's reasons."
            if catalog.systems
            else "The catalog has no systems: load one (manage.py load_catalog) to get options."
        )
        if catalog.systems:
            warnings.extend(_what_would_help(request, wl))
    flops = training_flops_per_token(shape, wl) if wl.training else 2 * shape.flop_params
    justification = draft(
        request=request,
        shape=shape,
        wl=wl,
        model_name=model_name,
        option=best.option if best else None,
        system=best.system if best else None,
        accelerator=best.accelerator if best else None,
        flops_per_token=flops,
    )
    uncertainty = _uncertainty(memory.total_bytes, best.option.gpu_hours if best else None, wl.task)
    return _built(
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
        objective=ranking.objective(tie_order),
        why_first=why,
        justification=justification,
        slurm_script=slurm_script,
        warnings=warnings + [f"Model: {note}" for note in shape.notes],
        assumptions=_assumptions(request, shape, wl, framework, assumed, best),
        uncertainty=uncertainty,
        engine_version=ENGINE_VERSION,
        framework=_built(
            FrameworkInfo,
            key=framework.key,
            name=framework.name,
            assumed=assumed,
            source=framework.source,
        ),
    )


def _built(cls, **fields):
    """A result model from fields the engine computed, every one given (models.trusted)."""
    return trusted(cls, fields)


def _other_choice(cand, best) -> bool:
    """A different system or GPU from the recommendation (not just another strategy)."""
    return (cand.system.name, cand.accelerator.name) != (best.system.name, best.accelerator.name)


def _what_would_help(request: EstimateRequest, wl: Workload) -> list[str]:
    """Plain suggestions that cut memory, for when nothing fits."""
    hints = []
    if wl.task == "inference" and wl.weight_format in ("fp32", "fp16", "bf16"):
        hints.append("int8 or int4 weights would cut the weights to a half or a quarter.")
    if wl.training and request.gradient_checkpointing is False:
        hints.append(
            "You ruled out gradient checkpointing; it keeps only each layer's input for backward."
        )
    if wl.task in ("full_finetune", "pretrain"):
        hints.append("LoRA or QLoRA trains adapters only and needs far less memory.")
    if request.micro_batch is not None and request.micro_batch > 1:
        hints.append("A smaller micro-batch with more accumulation steps needs less memory.")
    if wl.training and request.optimizer in ("adamw", "paged_adamw"):
        hints.append("8-bit AdamW keeps the optimizer state in a quarter of the memory.")
    return hints


def _recommendation_reasons(best, candidates, wl: Workload, framework, why: str) -> list[str]:
    opt = best.option
    acc = best.accelerator
    free = 1 - opt.memory_per_gpu_bytes / opt.capacity_bytes
    reasons = [
        f"Fits: {opt.memory_per_gpu_bytes / 1e9:.1f} GB per GPU of the {acc.memory_gb:g} GB "
        f"on {words.with_article(acc.display_name)} ({free:.0%} headroom), "
        + (
            "on a single GPU."
            if opt.strategy == "single" and opt.num_gpus == 1
            else f"{words.plural(opt.num_gpus, 'GPU')} {words.strategy_words(opt.strategy)}."
        )
    ]
    if framework.preallocates and not wl.training:
        reserved = opt.capacity_bytes * framework.preallocates
        reasons.append(
            f"{framework.name} reserves {framework.preallocates:.0%} of each GPU at start-up: "
            f"nvidia-smi will show about {reserved / 1e9:.0f} GB per GPU. The model needs "
            f"{opt.memory_per_gpu_bytes / 1e9:.1f} GB of it; the rest becomes paged KV cache, "
            "so more concurrent requests fit than the batch estimated."
        )
    if opt.requested_gpu_hours is not None:
        reasons.append(
            f"{words.hours(opt.gpu_hours)} of compute + {words.hours(opt.contingency_gpu_hours)} "
            f"of contingency = {words.hours(opt.requested_gpu_hours)}, about "
            f"{words.hours(opt.wall_hours, 'hours')} of wall time."
        )
    if best.system.typical_queue_wait_hours is not None:
        reasons.append(f"Typical queue wait about {best.system.typical_queue_wait_hours:g} h.")
    if opt.cost is not None:
        reasons.append(f"Cost about {opt.cost:,.2f} {opt.currency}.")
    elif opt.charge is not None and opt.charge.total is not None:
        reasons.append(
            f"Charged about {opt.charge.total:,.2f} {opt.charge.currency} "
            f"({opt.charge.rate_per_gpu_hour:g} per GPU hour: {opt.charge.source})."
        )
    eligible = [cand for cand in candidates if cand.eligible]
    if len(eligible) > 1:
        reasons.append(f"Ranked first of {len(eligible)} workable options. {why}")
    reasons.extend(r for r in opt.reasons if r not in reasons)
    return reasons


def _load_test_uncertainty() -> dict[str, dict]:
    """Per task family, the memory error covering 80 % of the test points
    (uncertainty.json, written by scripts/accuracy_report.py)."""
    path = Path(__file__).with_name("uncertainty.json")
    try:
        return json.loads(path.read_text())["memory"]
    except (OSError, ValueError, KeyError):
        return {}


TEST_UNCERTAINTY = _load_test_uncertainty()
FAMILY_OF_TASK = {
    "inference": "inference",
    "lora": "adapters",
    "qlora": "adapters",
    "full_finetune": "full",
    "pretrain": "full",
}


# Fewer test points than this: uncertainty.json widens the calibration margin to cover them
# (scripts/accuracy_report.py, UNCERTAINTY_MIN_POINTS) instead of reading an 80% figure.
MIN_TEST_POINTS = 3


def memory_uncertainty(task: str) -> tuple[float, int]:
    """(relative memory error, test points behind it; 0 = the calibration margin)."""
    found = TEST_UNCERTAINTY.get(FAMILY_OF_TASK.get(task, ""), {})
    if found.get("relative") is None:
        return c.MEMORY_MARGIN.value, 0
    return max(found["relative"], 0.01), int(found.get("points") or 0)


def _uncertainty(total_bytes: int, gpu_hours: float | None, task: str) -> dict[str, float]:
    m, points = memory_uncertainty(task)
    # error = (estimate - measured) / measured, so |error| <= m puts the measurement between
    # estimate / (1 + m) and estimate / (1 - m).
    out = {
        "memory_relative": m,
        "memory_low_bytes": float(int(total_bytes / (1 + m))),
        "memory_high_bytes": float(int(total_bytes / (1 - m))),
        "memory_test_points": float(points),
        "gpu_hours_relative": c.GPU_HOURS_MARGIN.value,
    }
    if gpu_hours is not None:
        out["gpu_hours_low"] = round(gpu_hours * (1 - c.GPU_HOURS_MARGIN.value), 2)
        out["gpu_hours_high"] = round(gpu_hours * (1 + c.GPU_HOURS_MARGIN.value), 2)
    return out


def _memory_uncertainty_assumption(task: str) -> Assumption:
    m, points = memory_uncertainty(task)
    if not points:
        return c.MEMORY_MARGIN.assumption(f"+-{m:.0%} (no test points for this kind of work)")
    if points < MIN_TEST_POINTS:
        return _built(
            Assumption,
            name="Memory uncertainty",
            value=f"+-{m:.0%}: the calibration margin, widened to cover the {points} published "
            "measurement(s) of this kind of work that the engine was never tuned on (too few "
            "to read an 80% figure from)",
            source="docs/accuracy.md, test points (advisor/engine/uncertainty.json)",
        )
    return _built(
        Assumption,
        name="Memory uncertainty",
        value=f"+-{m:.0%}: covers 80% of the {points} published measurements of this kind of "
        "work that the engine was never tuned on",
        source="docs/accuracy.md, test points (advisor/engine/uncertainty.json)",
    )


def _layout_detail(best, shape: ModelShape, wl: Workload) -> str:
    """What the recommended training option's layout costs per optimizer step, in words."""
    option = best.option if best is not None else None
    if option is None or option.recipe is None or not option.utilisation:
        return ""
    peak = peak_tflops(best.accelerator, option.compute_dtype) if option.compute_dtype else None
    if not peak:
        return ""
    recipe = option.recipe
    recompute = recipe.checkpointing == "full"
    # As recommend.Evaluation.hours works it out: the recipe's utilisation and micro-batch.
    util = best.utilisation.for_recipe(recipe.checkpointing) if best.utilisation else None
    util = (util or option.utilisation) * micro_batch_efficiency(recipe.micro_batch * wl.seq_len)
    cost = training_layout(
        shape,
        wl,
        best.node,
        best.accelerator,
        option.num_gpus,
        option.strategy,
        global_batch=recipe.global_batch,
        micro=recipe.micro_batch,
        flops_per_token=training_flops_per_token(
            shape, replace(wl, gradient_checkpointing=recompute)
        ),
        achieved_tflops=peak * util,
        recompute=recompute,
        tp=recipe.tp,
    )
    return scale_cost.describe(cost, option.strategy, option.num_gpus)


def _assumptions(
    request: EstimateRequest, shape: ModelShape, wl: Workload, framework, assumed: bool, best=None
) -> list[Assumption]:
    out = [
        _built(
            Assumption,
            name="Library",
            value=framework.name
            + (" (you did not say which library; this is the most common one)" if assumed else ""),
            source=framework.source,
        ),
        _built(
            Assumption,
            name="Parameters",
            value=f"{shape.params_total:,} total, {shape.params_active:,} active",
            source=shape.source,
        ),
        c.CUDA_CONTEXT.assumption(f"{c.CUDA_CONTEXT.value / 2**20:.0f} MiB"),
        c.CUDA_CONTEXT_LEGACY.assumption(f"{c.CUDA_CONTEXT_LEGACY.value / 2**20:.0f} MiB"),
        c.NCCL_BUFFERS.assumption(f"{c.NCCL_BUFFERS.value / 2**20:.0f} MiB on multi-GPU jobs"),
        c.ALLOCATOR_FRAGMENTATION.assumption(f"{c.ALLOCATOR_FRAGMENTATION.value:.0%}"),
        _built(
            Assumption,
            name="GPU capacity",
            value="vendor GB x 1e9 bytes: about 7% below the GiB the card has, which absorbs "
            "ECC and driver reservations",
            source="vendor datasheets (catalog)",
        ),
        _memory_uncertainty_assumption(wl.task),
    ]
    if wl.training:
        phase = best.option.memory.peak_phase if best is not None else ""
        out.append(
            _built(
                Assumption,
                name="Peak of a step",
                value=(f"at the {PHASES[phase]}; " if phase in PHASES else "")
                + "the larger of the end of the forward pass and the optimizer step, not the "
                "sum of every component: PyTorch 2 stacks free gradients between steps "
                "(zero_grad(set_to_none=True)); gradient accumulation, PyTorch 1.x stacks "
                "(assumed on pre-Ampere NVIDIA GPUs) and persistent gradient buffers "
                "(DeepSpeed, Megatron) keep them beside the activations",
                source="torch.optim.Optimizer.zero_grad docs (set_to_none default True since "
                "PyTorch 2.0); PyTorch blog 'Understanding GPU Memory 1' (memory snapshot of a "
                "training step: activations peak after forward, gradients after backward)",
            )
        )
    if wl.training and best is not None:
        out.extend(layout_assumptions(best.option, best.node, best.accelerator))
    if not wl.training and kv_cache_copies(shape, wl) > 1:
        out.append(
            c.LEGACY_KV_CACHE_COPIES.assumption(
                "2 KV caches at the peak: the model runs its own code (config.json auto_map, "
                "trust_remote_code=True), which rebuilds a tuple cache every step"
            )
        )
    if wl.weight_format == "int4":
        nf4 = c.NF4_DOUBLE_QUANT if wl.double_quant else c.NF4_CONSTANTS
        default = " (default)" if request.double_quant is None else ""
        out.append(nf4.assumption(f"{nf4.value:.4f} B/param{default}"))
        out.append(c.DEQUANT_WORKSPACE_LAYERS.assumption())
    if wl.weight_format == "int8":
        out.append(c.INT8_ROW_SCALE.assumption())
    if wl.training:
        activ = (
            "gradient checkpointing: layer inputs only"
            if wl.gradient_checkpointing
            else ("selective recomputation" if wl.selective_recompute else "all layers kept")
        )
        out.append(c.KORTHIKANTI.assumption(f"{activ}; flash attention {wl.flash_attention}"))
        if wl.logits_per_entry is None and shape.remote_code and not wl.autocast:
            out.append(
                c.LOGITS_REMOTE_CODE_BYTES.assumption(
                    f"{c.LOGITS_REMOTE_CODE_BYTES.value:g} bytes per token x vocabulary entry: "
                    "the model's own code (config.json auto_map, trust_remote_code=True) "
                    "computes the loss on 16-bit logits"
                )
            )
        elif wl.logits_per_entry is None:
            out.append(c.LOGITS_TRAINING_BYTES.assumption())
        else:
            out.append(
                c.LOGITS_TRAINING_BYTES.assumption(
                    f"{wl.logits_per_entry:g} bytes per token x vocabulary entry: "
                    f"{framework.name} computes the loss without full fp32 logits"
                )
            )
        out.append(c.MICROBATCH_SATURATION_TOKENS.assumption())
        if wl.adapters:
            out.append(
                _built(
                    Assumption,
                    name="LoRA",
                    value=f"rank {wl.lora_rank}"
                    + (" (default)" if request.lora_rank is None else "")
                    + ", targets: "
                    + (", ".join(wl.lora_targets) or "every linear layer of each block")
                    + "; adapters and their Adam state in fp32",
                    source="Hu et al. 2021 (arXiv:2106.09685); QLoRA paper section 4 "
                    "(all linear layers)",
                )
            )
            if wl.lora_dropout:
                default = " (default)" if request.lora_dropout is None else ""
                out.append(c.LORA_DROPOUT.assumption(f"on{default}"))
            out.append(c.LORA_FLOPS_PER_PARAM.assumption())
            out.append(c.MFU_LORA.assumption(f"{c.MFU_LORA.value:.0%}"))
        else:
            mode = wl.state_mode
            text = {
                "mixed": "16-bit weights and gradients, fp32 master weights and optimizer",
                "pure16": "everything 16-bit, as torchtune trains",
                "fp32": "everything fp32",
            }[mode]
            out.append(c.ZERO_MIXED_ADAM.assumption(f"{text}; optimizer {wl.optimizer}"))
            out.append(c.TRAIN_FLOPS_PER_PARAM.assumption())
            util = best.utilisation if best is not None else None
            if util is not None:
                out.append(
                    _built(
                        Assumption,
                        name="Utilisation (recommended option)",
                        value=f"{util.value:.0%} of the dense peak, applied to the FLOPs "
                        "executed (recomputation included)",
                        source=util.source,
                    )
                )
            out.append(
                _built(
                    Assumption,
                    name="Utilisation (every option)",
                    value="the nearest catalog benchmark on the same accelerator or "
                    "generation, moved to this model by the per-layer roofline; else the "
                    "generation's documented default (each option names which)",
                    source="advisor/engine/speed.py; docs/engine.md, 'Compute'",
                )
            )
            out.append(c.ELEMENTWISE_BYTES_PER_WIDTH.assumption())
        if wl.optimizer == "adamw_8bit":
            out.append(c.ADAM_8BIT_STATE.assumption())
        if wl.gradient_checkpointing:
            out.append(c.RECOMPUTE_FLOPS_PER_PARAM.assumption())
        out.append(c.DDP_BUCKET_COPY.assumption())
        out.append(c.ZERO3_LIVE_LAYERS.assumption())
    else:
        out.append(
            _built(
                Assumption,
                name="Generation",
                value=f"prompt {wl.seq_len:,} + {wl.new_tokens:,} generated tokens per request"
                + (" (default)" if request.new_tokens is None else "")
                + f"; KV cache in {wl.compute_dtype} with {shape.num_kv_heads} KV heads",
                source="KV cache = 2 x layers x KV heads x head dim x tokens x batch x bytes",
            )
        )
        out.append(c.MFU_PREFILL.assumption(f"{c.MFU_PREFILL.value:.0%}"))
        library = decode_speed(wl.decode_framework)
        out.append(
            _built(
                Assumption,
                name="Decoding speed",
                value=f"{library.bandwidth_fraction:.0%} of the memory bandwidth per step"
                + (
                    f", plus {library.per_layer_overhead_s * 1e3:.2f} ms of host time per "
                    "layer and step (no CUDA graphs)"
                    if library.per_layer_overhead_s
                    else ""
                ),
                source=library.source,
            )
        )
    if wl.training:
        out.append(scale_cost.assumption(_layout_detail(best, shape, wl)))
    else:
        out.append(
            _built(
                Assumption,
                name="Scaling efficiency",
                value=", ".join(f"{k} {v:.0%}" for k, v in c.SCALING_EFFICIENCY.items()),
                source=c.SCALING_SOURCE,
            )
        )
    out.append(c.CONTINGENCY.assumption(f"{c.CONTINGENCY.value:.0%}"))
    out.append(c.GPU_HOURS_MARGIN.assumption(f"+-{c.GPU_HOURS_MARGIN.value:.0%}"))
    return out
