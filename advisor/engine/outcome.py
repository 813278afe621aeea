"""What the result says of its outcome: the recommended option's reasons and starter sbatch
script, or, when nothing fits, the memory one GPU would need and the warnings that say what
rules every option out and what would cut memory."""

from __future__ import annotations

from dataclasses import replace

from advisor.engine import words
from advisor.engine.compute import micro_batch_efficiency, training_flops_per_token
from advisor.engine.device_memory import capacity_text
from advisor.engine.frameworks import Framework, batch_limit
from advisor.engine.generations import generation
from advisor.engine.launch_args import PreferenceLaunch
from advisor.engine.memory import Workload, memory_per_gpu
from advisor.engine.models import CatalogSpec, EstimateRequest, MemoryBreakdown, Recommendation
from advisor.engine.options import inference_shards, wall_target
from advisor.engine.preference import fused_switch, min_micro_batch
from advisor.engine.recommend import trusted
from advisor.engine.rollouts import memory_share, vllm_weight_bytes
from advisor.engine.roofline import loss_traffic, unfused_loss_share
from advisor.engine.shape import ModelShape
from advisor.engine.slurm import sbatch_script
from advisor.engine.words import plural


def recommended(
    best,
    candidates,
    wl: Workload,
    framework,
    why: str,
    model_name: str,
    max_wall: float | None,
    fused_experts: float = 0.0,
    mxfp4_experts: float = 0.0,
) -> tuple:
    """(the recommendation with its longer reasons, its starter sbatch script). `fused_experts`:
    the bytes more transformers 5 would hold (the script then says to pin transformers<5);
    `mxfp4_experts`: the expert parameters kept in MXFP4 (the script says what keeps them so)."""
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
        stepping=(wl.optimizer_in_backward, wl.checkpoint_offload),
        # Asked of a library whose own loss keeps the full logits: Liger under the Trainer;
        # Liger's preference losses under any library's preference trainer.
        fused_loss=wl.training
        and wl.logits_per_entry == 0.0
        and (framework.logits_bytes is None or wl.objective != "sft"),
        objective=_launch_objective(wl, best.option),
        compiled=wl.compiled,
        fp8=wl.weight_format == "fp8",
        transformers_below_5=fused_experts,
        mxfp4_experts=mxfp4_experts,
        shards=1
        if wl.training
        else inference_shards(
            best.option.wall_hours,
            wall_target(max_wall),
            best.partition.max_wall_hours if best.partition is not None else None,
        ),
    )
    return recommendation, slurm_script


def _recommendation_reasons(best, candidates, wl: Workload, framework, why: str) -> list[str]:
    opt = best.option
    acc = best.accelerator
    free = 1 - opt.memory_per_gpu_bytes / opt.capacity_bytes
    reasons = [
        f"Fits: {opt.memory_per_gpu_bytes / 1e9:.1f} GB per GPU of the {capacity_text(acc)} "
        f"on {words.with_article(acc.display_name)} ({free:.0%} headroom), "
        + ("on " if opt.strategy == "single" and opt.num_gpus == 1 else "")
        + f"{words.gpus_and_strategy(opt.num_gpus, opt.strategy, opt.nodes, not wl.training)}."
    ]
    if framework.preallocates and not wl.training:
        reserved = opt.capacity_bytes * framework.preallocates
        reasons.append(
            f"{framework.name} reserves {framework.preallocates:.0%} of each GPU at start-up: "
            f"nvidia-smi will show about {reserved / 1e9:.0f} GB per GPU. The model needs "
            f"{opt.memory_per_gpu_bytes / 1e9:.1f} GB of it; the rest becomes paged KV cache, "
            + (
                f"room for about {plural(wl.batch_size, 'sequence')} at once (at most "
                f"{batch_limit(framework, acc):,} by default), the batch the GPU hours assume."
                if wl.fills_kv_cache
                else "so more concurrent requests fit than the batch estimated."
            )
        )
    if opt.requested_gpu_hours is not None:
        reasons.append(
            f"{words.hours(opt.gpu_hours)} of compute + {words.hours(opt.contingency_gpu_hours)} "
            f"of contingency = {words.hours(opt.requested_gpu_hours)}, "
            f"{words.about_hours(opt.wall_hours, 'hours')} of wall time."
        )
    if best.system.typical_queue_wait_hours is not None:
        reasons.append(f"Typical queue wait about {best.system.typical_queue_wait_hours:g} h.")
    charge = opt.charge
    converted = ""  # a charge in another currency than the profile's, as the ranking saw it
    if charge is not None and charge.compared_currency not in ("", charge.currency):
        converted = (
            f"; about {charge.compared_total:,.2f} {charge.compared_currency} at "
            f"{charge.comparison}"
        )
    if opt.cost is not None:
        reasons.append(f"Cost about {opt.cost:,.2f} {opt.currency}{converted}.")
    elif charge is not None and charge.total is not None:
        reasons.append(
            f"Charged about {charge.total:,.2f} {charge.currency} "
            f"({charge.rate_per_gpu_hour:g} per GPU hour: {charge.source}){converted}."
        )
    eligible = [cand for cand in candidates if cand.eligible]
    if len(eligible) > 1:
        reasons.append(f"Ranked first of {len(eligible)} workable options. {why}")
    reasons.extend(r for r in opt.reasons if r not in reasons)
    fused_loss = (
        preference_loss_hint(opt, framework, wl)
        if wl.objective != "sft"
        else _fused_loss_hint(opt, framework)
    )
    if fused_loss:
        reasons.append(fused_loss)
    return reasons


# The loss's logits are this share of a GPU's need or more: worth a practitioner's attention.
_LOGITS_WORTH_A_HINT = 0.25


_LOGITS_TOO_LARGE = 10e9  # bytes of logits no GPU spares easily


def _how_to_estimate_fused(framework) -> str:
    """Where the researcher says the loss is fused: the flowchart has a choice for the Trainer
    with Liger Kernel; every library takes fused_loss in the API."""
    if framework.key == "hf_trainer":
        return (
            "choose the Trainer with Liger Kernel in the flowchart, or fused_loss: true in the API"
        )
    return "fused_loss: true in the API"


def _logits_hint(memory: MemoryBreakdown, framework, wl: Workload) -> str | None:
    """When nothing fits: the library's fp32 logits for one sequence, where they are a large
    share of what one GPU would need, and the fused loss that never builds them."""
    if not framework.fused_loss_switch or wl.logits_per_entry is not None:
        return None
    # Checked against a share of the need and a size of their own: without checkpointing
    # the activations of a long sequence dwarf everything, though the logits alone would not
    # fit most GPUs either.
    if memory.logits < min(_LOGITS_WORTH_A_HINT * memory.total_bytes, _LOGITS_TOO_LARGE):
        return None
    return (
        f"The loss's fp32 logits alone take {memory.logits / 1e9:.0f} GB for a micro-batch of "
        f"{plural(wl.batch_size, 'sequence')}: Liger Kernel's fused linear cross-entropy "
        f"({framework.fused_loss_switch}) never builds them: "
        f"{_how_to_estimate_fused(framework)}, to estimate it."
    )


def _fused_loss_hint(opt, framework) -> str | None:
    """Long sequences and large vocabularies make the Trainer's fp32 logits the largest
    tensor of a step; Liger Kernel's fused linear cross-entropy computes the loss in chunks
    without them. Said, not assumed: the researcher decides whether to add the dependency."""
    logits = opt.memory.logits
    # Only training libraries have a switch: an inference job never reaches the check.
    if not framework.fused_loss_switch or logits < _LOGITS_WORTH_A_HINT * opt.memory_per_gpu_bytes:
        return None
    return (
        f"The loss's fp32 logits take {logits / 1e9:.1f} of the "
        f"{opt.memory_per_gpu_bytes / 1e9:.1f} GB per GPU. Liger Kernel's fused linear "
        f"cross-entropy ({framework.fused_loss_switch}; Triton kernels, benchmarked by "
        "linkedin/Liger-Kernel on NVIDIA A100s) never materialises them, so a larger "
        "micro-batch or a smaller GPU may fit; not assumed here "
        f"({_how_to_estimate_fused(framework)}, to estimate it)."
    )


def _launch_objective(wl: Workload, option) -> PreferenceLaunch:
    """The objective as the script applies it; GRPO's vLLM share on this option's GPU."""
    if not wl.generates:
        return PreferenceLaunch(wl.objective, wl.reference_precomputed)
    return PreferenceLaunch(
        wl.objective,
        generations=wl.rollout.generations,
        completion_tokens=wl.rollout.completion_tokens,
        vllm_share=memory_share(option.memory.rollout_engine, option.capacity_bytes),
        kl_penalty=wl.reference_passes > 0,
        generation_tp=(option.recipe and option.recipe.generation_tp) or 1,
    )


def preference_loss_hint(opt, framework, wl: Workload) -> str | None:
    """A preference job's log-softmax over the vocabulary, where it is as large a share as
    _fused_loss_hint's and the library has a fused preference loss (preference.py): said,
    not assumed."""
    switch = fused_switch(framework.key, wl.objective)
    logits = opt.memory.logits
    if switch is None or logits < _LOGITS_WORTH_A_HINT * opt.memory_per_gpu_bytes:
        return None
    return (
        f"The log-softmax over the vocabulary takes {logits / 1e9:.1f} of the "
        f"{opt.memory_per_gpu_bytes / 1e9:.1f} GB per GPU for "
        f"{plural(wl.batch_size * wl.sequences_per_sample, 'sequence')}. Liger Kernel's fused "
        f"preference loss ({switch}) computes the log-probabilities in chunks without it, so "
        "a larger micro-batch or a smaller GPU may fit; not assumed here (fused_loss: true in "
        "the API, to estimate it)."
    )


# The recommended recipe holds at least this many times the leanest one's memory: worth saying.
_LEANER_FACTOR = 1.6
_LEAN_LAYOUTS = frozenset({"single", "ddp", "zero1", "zero2", "zero3", "fsdp"})


def recipe_hints(
    request: EstimateRequest, shape: ModelShape, wl: Workload, best, framework: Framework
) -> list[str]:
    """What the recommended recipe could change, said rather than assumed: a leaner recipe
    for a smaller GPU, GRPO's vLLM copy split over a node."""
    hints = [
        leaner_recipe_hint(request, shape, wl, best, framework),
        generation_engine_hint(shape, wl, best.option),
        unfused_loss_time_hint(shape, wl, best, framework),
    ]
    return [hint for hint in hints if hint is not None]


# An unfused loss takes at least this share of a step's time: worth saying what fusing saves.
_LOSS_TIME_WORTH_A_HINT = 0.10


def unfused_loss_time_hint(shape: ModelShape, wl: Workload, best, framework) -> str | None:
    """A small model with a large vocabulary spends a good part of each step moving its
    logits through the library's fp32 loss (roofline.loss_traffic); Liger Kernel's fused linear
    cross-entropy never forms them. Said, not assumed: the researcher decides whether to add
    the dependency."""
    if not framework.fused_loss_switch or wl.objective != "sft":
        return None
    traffic = loss_traffic(shape, wl, wl.compute_dtype)
    if traffic is None:
        return None
    share = unfused_loss_share(shape, best.accelerator, traffic.beyond_fused(shape))
    if share < _LOSS_TIME_WORTH_A_HINT:
        return None
    return (
        f"Moving the logits through the loss takes about {share:.0%} of each step's time on "
        f"{words.with_article(best.accelerator.display_name)} ({traffic.per_entry:g} bytes per "
        f"token for each of the {shape.vocab_size:,} vocabulary entries: the fp32 cast, "
        "log-softmax and their backward). Liger Kernel's fused linear cross-entropy "
        f"({framework.fused_loss_switch}) never forms them and would save about that share of "
        f"the GPU hours; not assumed here ({_how_to_estimate_fused(framework)}, to estimate it)."
    )


# vLLM's 16-bit weights take at least this share of a GPU: worth saying how to split them.
_VLLM_COPY_WORTH_A_HINT = 0.5


def generation_engine_hint(shape: ModelShape, wl: Workload, option) -> str | None:
    """GRPO with vLLM colocated keeps its copy of the model on the training GPUs, split over
    vLLM's tensor-parallel group at most (rollouts.py); where that is still half the GPU or
    more, vLLM in server mode on GPUs of its own may cost less, which the estimate does not
    model."""
    if not wl.generates or not option.capacity_bytes or option.recipe is None:
        return None
    degree = option.recipe.generation_tp or 1
    weights = vllm_weight_bytes(shape, wl) / degree
    if weights < _VLLM_COPY_WORTH_A_HINT * option.capacity_bytes:
        return None
    split = f", split over {degree} GPUs," if degree > 1 else ""
    return (
        f"vLLM's copy of the model{split} takes {weights / 1e9:.0f} of the "
        f"{option.capacity_bytes / 1e9:.0f} GB on each GPU beside the training. vLLM in "
        "server mode puts it on GPUs of its own instead (trl vllm-serve, vllm_mode='server'); "
        "that layout is not modelled here, so the recommended option may not be the cheapest "
        "way to run this job."
    )


def leaner_recipe_hint(
    request: EstimateRequest, shape: ModelShape, wl: Workload, best, framework: Framework
) -> str | None:
    """The recommended recipe fills the GPU to run fastest (a large micro-batch, no
    recomputation); where the same job runs in far less memory at the smallest micro-batch the
    library takes (1; 2 for TRL's KTO) with full activation checkpointing, say how much and at
    what compute, since that is the figure a smaller GPU or another library's defaults would
    need. Not where the researcher pinned either knob, nor for tensor-parallel or offloaded
    layouts."""
    opt = best.option
    recipe = opt.recipe
    least = min_micro_batch(framework, wl.objective)  # KTO under TRL: 2
    if (
        not wl.training
        or recipe is None
        or opt.strategy not in _LEAN_LAYOUTS
        or request.micro_batch is not None
        or request.gradient_checkpointing is not None
        or "full" not in framework.checkpoint_levels
        or (recipe.micro_batch == least and recipe.checkpointing == "full")
    ):
        return None
    lean_wl = replace(wl, batch_size=least, gradient_checkpointing=True, selective_recompute=False)
    per_rank = recipe.micro_batch * recipe.grad_accumulation
    need = memory_per_gpu(
        shape, lean_wl, opt.strategy, opt.num_gpus, recipe.generation_tp or 1,
        optimizer=recipe.optimizer, accumulation=per_rank,
    )["total_bytes"]  # fmt: skip
    if need * _LEANER_FACTOR > opt.memory_per_gpu_bytes:
        return None
    # Against the recommended recipe's own recomputation, not the request's default.
    chosen_wl = replace(
        wl,
        gradient_checkpointing=recipe.checkpointing == "full",
        selective_recompute=recipe.checkpointing == "selective",
    )
    slower = (
        training_flops_per_token(shape, lean_wl)
        / training_flops_per_token(shape, chosen_wl)
        * micro_batch_efficiency(recipe.micro_batch * wl.sample_tokens)
        / micro_batch_efficiency(least * wl.sample_tokens)
    )
    chosen = f"micro-batch {recipe.micro_batch}, activation checkpointing {recipe.checkpointing}"
    if slower - 1 < 0.005:
        # Already fully recomputed, and one sequence keeps the GPU busy: the larger
        # micro-batch buys fewer accumulation steps, not speed.
        return (
            f"The recommended recipe uses {opt.memory_per_gpu_bytes / 1e9:.1f} GB per GPU "
            f"({chosen}); at micro-batch {least} the same job needs about "
            f"{need / 1e9:.1f} GB per GPU at the same compute ({wl.sample_tokens:,} tokens "
            "per pass already keep the GPU busy): the figure for a smaller GPU."
        )
    return (
        f"The recommended recipe uses {opt.memory_per_gpu_bytes / 1e9:.1f} GB per GPU to run "
        f"fastest ({chosen}); at micro-batch {least} with full activation checkpointing the "
        f"same job needs about {need / 1e9:.1f} GB per GPU, for about {slower - 1:+.0%} "
        "compute: the figure for a smaller GPU."
    )


def memory_when_nothing_fits(
    request: EstimateRequest,
    catalog: CatalogSpec,
    shape: ModelShape,
    wl: Workload,
    framework: Framework,
    warnings: list[str],
) -> MemoryBreakdown:
    """The memory a single GPU would need, and the warnings that say what rules every option
    out. Training: the leanest micro-batch the recipe search tries (pinned, else one
    sequence), not the whole global batch at once (2^20 tokens when none is given)."""
    least = min_micro_batch(framework, wl.objective)
    lean = replace(wl, batch_size=request.micro_batch or least) if wl.training else wl
    memory = MemoryBreakdown.model_construct(**memory_per_gpu(shape, lean, "single", 1))
    warnings.extend(_nothing_fits(request, catalog, wl))
    hint = _logits_hint(memory, framework, lean)
    if hint is not None:
        warnings.append(hint)
    return memory


def _nothing_fits(request: EstimateRequest, catalog: CatalogSpec, wl: Workload) -> list[str]:
    """The warnings when no option is eligible: why, and what would cut memory."""
    if not catalog.systems:
        return ["The catalog has no systems: load one (manage.py load_catalog) to get options."]
    return [
        "Nothing in the catalog fits within the constraints; see each option's reasons.",
        *_constraints_no_system_meets(request, catalog),
        *_what_would_help(request, wl),
    ]


def _constraints_no_system_meets(request: EstimateRequest, catalog: CatalogSpec) -> list[str]:
    """A constraint that alone rules out every system in service, said first: no model or
    setup change helps with those."""
    cons = request.constraints
    systems = [s for s in catalog.systems if s.status != "retired" and s.node_types]
    out = []
    if not any(cons.data_sensitivity in s.data_sensitivity for s in systems):
        gpuless = [
            s.display_name
            for s in catalog.systems
            if s.status != "retired"
            and not s.node_types
            and cons.data_sensitivity in s.data_sensitivity
        ]
        out.append(
            f"No system with GPUs in the catalog is approved for {cons.data_sensitivity} data"
            + (f" ({', '.join(gpuless)} is, without GPUs)" if gpuless else "")
            + ": ask research computing where the data may be processed on GPUs before it moves."
        )
    if cons.needs_notebooks and not any(s.notebooks for s in systems):
        out.append("No system in the catalog offers notebooks: the work has to run as batch jobs.")
    if cons.needs_cloud is True and not any(s.kind == "cloud" for s in systems):
        out.append("The catalog has no cloud service.")
    if cons.needs_cloud is False and not any(s.kind != "cloud" for s in systems):
        out.append("Every system in the catalog is a cloud service, and cloud was ruled out.")
    return out


def _what_would_help(request: EstimateRequest, wl: Workload) -> list[str]:
    """Plain suggestions that cut memory, for when nothing fits."""
    hints = []
    if wl.task == "inference" and request.framework != "vllm":
        hints.append(
            "vLLM serves a model larger than one node over several (tensor parallel within "
            "each node, a pipeline stage per node); choose it as the library to be offered that."
        )
    if wl.task == "inference" and wl.weight_format in ("fp32", "fp16", "bf16"):
        hints.append(
            "fp8 weights (vLLM, on NVIDIA Turing or newer or AMD MI300) or int8 would halve "
            "the weights, int4 would quarter them."
        )
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
