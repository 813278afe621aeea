"""The estimate assembled: the request reduced to a workload, every option evaluated and
ranked, the recommendation with its reasons, its Slurm script and justification, and the
assumptions and uncertainty the result states (`estimate`, re-exported by advisor.engine)."""

from __future__ import annotations

from dataclasses import replace

from advisor.engine import constants as c
from advisor.engine import ranking, words
from advisor.engine.compute import (
    filled_batch,
    inference_flops_per_token,
    training_flops_per_token,
)
from advisor.engine.device_memory import capacity_text
from advisor.engine.errors import EstimateError
from advisor.engine.frameworks import Framework, batch_limit, framework_for
from advisor.engine.justification import draft
from advisor.engine.memory import Workload, memory_per_gpu
from advisor.engine.memory_terms import (
    ENCODER_ONLY_FAMILIES,
    masked_lm_head,
    routed_expert_params,
)
from advisor.engine.models import (
    CatalogSpec,
    EstimateRequest,
    EstimateResult,
    FrameworkInfo,
    MemoryBreakdown,
    Option,
    Recommendation,
)
from advisor.engine.options import inference_shards, rank, wall_target
from advisor.engine.recommend import evaluate, trusted
from advisor.engine.request_checks import check_request
from advisor.engine.result_assumptions import assumptions
from advisor.engine.shape import ModelShape
from advisor.engine.slurm import sbatch_script
from advisor.engine.speed import generation, measured
from advisor.engine.uncertainty import stated_uncertainty
from advisor.engine.version import ENGINE_VERSION
from advisor.engine.words import plural
from advisor.engine.workload import (
    as_published,
    build_workload,
    quantization_method,
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
    request = _as_published(request, warnings)
    request = with_sequence_length(request, shape)
    wl = build_workload(request, shape)
    warnings.extend(_input_warnings(request, shape, wl))
    candidates = _ranked(request, shape, wl, catalog)
    tie_order = ranking.order(catalog.ranking)
    eligible = [cand for cand in candidates if cand.eligible]
    best = eligible[0] if eligible else None
    why = ""
    if best is not None:
        runner_up = next((c for c in eligible[1:] if _other_choice(c, best)), None)
        why = ranking.why_first(best, runner_up, tie_order)
    recommendation = None
    slurm_script = None
    model_name = _model_name(request, shape)
    framework, assumed = framework_for(request.framework, wl.training)
    if best is not None:
        # Everything below describes the recipe the recommendation runs.
        wl = _recipe_workload(wl, best.option.recipe)
        if wl.fills_kv_cache:  # timed at the sequences its KV cache holds (recommend.py)
            opt = best.option
            at_once = filled_batch(
                framework, best.accelerator, opt.capacity_bytes, opt.memory, wl, request.tokens
            )
            wl = replace(wl, batch_size=at_once)
        recommendation, slurm_script = _recommended(
            best,
            candidates,
            wl,
            framework,
            why,
            model_name,
            request.constraints.max_wall_hours,
            _experts_fused_in_transformers_5(shape, wl),
            routed_expert_params(shape) if wl.weight_format == "mxfp4" else 0.0,
        )
        memory = best.option.memory
        for hint in (
            _continuous_batching_hint(request, catalog, shape, wl, best),
            _encoder_batching_hint(request, catalog, shape, best),
        ):
            if hint is not None:
                warnings.append(hint)
    else:
        memory = _memory_when_nothing_fits(request, catalog, shape, wl, framework, warnings)
    flops = training_flops_per_token(shape, wl) if wl.training else inference_flops_per_token(shape)
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
    uncertainty = stated_uncertainty(
        memory.total_bytes, best.option.gpu_hours if best else None, wl.task
    )
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
        objective=ranking.objective(
            tie_order, stated_batch=wl.training and request.batch_size is not None
        ),
        why_first=why,
        justification=justification,
        slurm_script=slurm_script,
        warnings=warnings + [f"Model: {note}" for note in shape.notes],
        assumptions=assumptions(
            request, shape, wl, framework, assumed, best, seq_len_assumed=seq_len_assumed
        ),
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


# Below this share of the recommendation's GPU hours, another library or batch is worth naming.
_WORTH_NAMING = 0.5


def _continuous_batching_hint(
    request: EstimateRequest, catalog: CatalogSpec, shape: ModelShape, wl: Workload, best
) -> str | None:
    """A batch job generating text with Transformers generate() (what the engine assumes when
    no library is given) runs its requests a batch at a time; vLLM schedules all of them
    itself and fills the GPU. Where vLLM, estimated on the recommended system and GPU, needs
    less than half the GPU hours, say how many: the researcher may not know the difference
    is an order of magnitude. Decoder-only models that generate only (vLLM's offline LLM
    class); the same request with framework vllm is sized on the recommended system, so it
    carries every rule the engine applies to vLLM (software support, memory reservation)."""
    if request.task != "inference" or not wl.new_tokens or request.tokens is None:
        return None
    if request.framework not in (None, "transformers", "transformers_legacy"):
        return None
    if shape.encoder_layers or shape.is_encoder_decoder or best.option.gpu_hours is None:
        return None
    other = _far_cheaper_on_the_same_gpus({"framework": "vllm"}, request, shape, catalog, best)
    if other is None:
        return None
    batch = plural(wl.batch_size, "request")
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


def _far_cheaper_on_the_same_gpus(
    change: dict, request: EstimateRequest, shape: ModelShape, catalog: CatalogSpec, best
) -> Option | None:
    """The request with `change`, sized only on the recommended system and GPU (so it carries
    every rule the engine applies there), when its first eligible option needs less than half
    the recommendation's GPU hours; else None."""
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
    if other.gpu_hours >= _WORTH_NAMING * best.option.gpu_hours:
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


def _memory_when_nothing_fits(
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
    lean = replace(wl, batch_size=request.micro_batch or 1) if wl.training else wl
    memory = MemoryBreakdown.model_construct(**memory_per_gpu(shape, lean, "single", 1))
    warnings.extend(_nothing_fits(request, catalog, wl))
    hint = _logits_hint(memory, framework, lean)
    if hint is not None:
        warnings.append(hint)
    return memory


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


def _as_published(request: EstimateRequest, warnings: list[str]) -> EstimateRequest:
    """The request as workload.as_published reads the checkpoint's quantization_config, with
    a warning saying how it is sized (or that its quantisation is not modelled)."""
    published = as_published(request)
    method = stored_format(request)
    if published is not request and method in ("gptq", "awq") and request.task == "lora":
        warnings.append(
            f"The checkpoint is 4-bit {method.upper()} (its quantization_config): LoRA on it is "
            "QLoRA, its 4-bit base sized with bitsandbytes NF4's bytes (about the same: 0.5 B a "
            "weight and a few per cent of constants). Give a 16-bit precision for the model it "
            "was quantised from."
        )
    elif published is not request and method in ("gptq", "awq"):
        awq = " (AWQ counted with GPTQ's layout, which it shares)" if method == "awq" else ""
        warnings.append(
            f"The checkpoint is 4-bit {method.upper()} (its quantization_config) and is sized "
            "so, as published: packed 4-bit weights with an fp16 scale and a 4-bit zero point "
            f"per group of 128, the embeddings and LM head in 16-bit{awq}."
        )
    elif published is not request:
        bits = published.precision
        lora = " (LoRA on it is QLoRA)" if bits == "int4" and request.task == "lora" else ""
        warnings.append(
            f"The checkpoint is quantised with bitsandbytes ({bits}, its quantization_config) "
            f"and transformers loads it so: sized as {bits}{lora}. Give a 16-bit precision for "
            "the model it was quantised from."
        )
    elif (
        request.task == "inference"
        and request.precision is None
        and method is None
        and (described := quantization_method(request)) is not None
    ):
        warnings.append(
            f"The checkpoint is quantised ({described}, its quantization_config), a layout the "
            "engine does not model: it is sized here in 16-bit. Give the precision its weights "
            "have (int8 or int4) for an estimate nearer to what it loads."
        )
    return published


def _recommended(
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
        # Asked of a library whose own loss keeps the full logits: Liger under the Trainer.
        fused_loss=wl.training and wl.logits_per_entry == 0.0 and framework.logits_bytes is None,
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


# Encoder-decoders whose attention takes relative position buckets, not a position table:
# their config's n_positions is the length they were trained on, not a limit.
_RELATIVE_POSITION_FAMILIES = frozenset({"t5", "mt5", "umt5"})


def _input_warnings(request: EstimateRequest, shape: ModelShape, wl: Workload) -> list[str]:
    """What the request leaves the estimate unable or unsure to say."""
    warnings = []
    if shape.max_position_embeddings and wl.seq_len > shape.max_position_embeddings:
        if shape.encoder_positions:
            # Whisper: seq_len counts the decoder's tokens; the encoder's input is fixed.
            warnings.append(
                f"seq_len {wl.seq_len:,} is longer than the {shape.max_position_embeddings:,} "
                "tokens the model's decoder holds: seq_len counts the text tokens the decoder "
                "reads and writes, not the encoder's input (see the model's notes)."
            )
        elif shape.family in _RELATIVE_POSITION_FAMILIES:
            warnings.append(
                f"seq_len {wl.seq_len:,} is longer than the {shape.max_position_embeddings:,} "
                "tokens the model was trained on: its relative positions take longer inputs, "
                "but check the quality on yours."
            )
        else:
            warnings.append(
                f"seq_len {wl.seq_len:,} is longer than the model's "
                f"{shape.max_position_embeddings:,} positions; it needs position scaling or "
                "will not work."
            )
    elif (
        shape.max_position_embeddings
        and not shape.is_encoder_decoder
        and wl.seq_len + wl.new_tokens > shape.max_position_embeddings
    ):
        warnings.append(
            f"A prompt of {wl.seq_len:,} tokens and {wl.new_tokens:,} generated ones need "
            f"{wl.seq_len + wl.new_tokens:,} positions; the model has "
            f"{shape.max_position_embeddings:,}: shorten the prompts or the answers."
        )
    if wl.training and request.new_tokens is not None and not wl.encoder_len:
        warnings.append(
            "new_tokens is ignored for training this model: it is the target's length for an "
            "encoder-decoder (T5, BART, Whisper); a decoder-only model reads its prompt and "
            "answer as one sequence, so give their total as seq_len."
        )
    if wl.training and wl.encoder_len and shape.encoder_positions and request.new_tokens:
        limit = shape.max_position_embeddings
        if limit and wl.decoder_len > limit:
            warnings.append(
                f"A target of {wl.decoder_len:,} tokens is longer than the {limit:,} the "
                "model's decoder holds: split the audio into shorter clips."
            )
    if wl.training and not shape.vocab_head and masked_lm_head(shape):
        # An encoder fine-tuned with a task head (workload.resolve_shape) whose config names
        # the masked-LM head.
        warnings.append(
            f"Fine-tuning {shape.architecture}: a task head (classification, tagging or "
            "question answering) is assumed, whose loss builds no vocabulary logits; the "
            "masked-LM head its config.json names is counted in the parameters only. For "
            "masked-LM training on your own text, choose pre-training."
        )
    fused_experts = _experts_fused_in_transformers_5(shape, wl)
    if fused_experts:
        bits = "4-bit" if wl.weight_format == "int4" else "8-bit"
        if wl.training:
            job, shared = "QLoRA", ", shared out by ZeRO-3 or FSDP"
            instead = (
                "use Unsloth, which says it quantises them since June 2026 (unsloth issue #4032)"
            )
        else:
            job, shared = f"{bits} inference", ""
            instead = "serve a GPTQ checkpoint with vLLM (quantization gptq)"
        warnings.append(
            f"{job} of a mixture-of-experts model through transformers and bitsandbytes: the "
            f"experts are counted {bits}, as transformers 4.x builds them (one Linear layer per "
            "expert). Transformers 5 stores them as fused 3-D parameters, which bitsandbytes "
            "does not quantise (bitsandbytes issue #1849, open as of mid-2026): there they stay "
            f"16-bit, about {fused_experts / 1e9:,.0f} GB more in all{shared}. Pin "
            f"transformers<5, or {instead}."
        )
    if wl.training and request.tokens is None:
        warnings.append("No token count given: GPU hours cannot be estimated, only memory.")
    if wl.task == "inference" and request.tokens is None:
        warnings.append("No token count given: GPU hours need the total prompt + generated tokens.")
    sixteen_bit = wl.weight_format in ("fp32", "fp16", "bf16")
    stored = stored_format(request)
    if wl.task == "inference" and sixteen_bit and stored == "fp8":
        asked = "as you asked" if request.precision is not None else "as this library loads it"
        warnings.append(
            f"The checkpoint is stored in fp8 (its quantization_config); sized here in "
            f"{wl.weight_format}, {asked}, a converted copy of about twice the weights. Leave "
            "precision open (or fp8) with vLLM, TGI or a current transformers to serve it as "
            "published."
        )
    if wl.task == "inference" and request.precision is None and wl.weight_format == "fp8":
        warnings.append(
            "The checkpoint is stored in fp8 (its quantization_config) and is served so, as "
            "published: vLLM, TGI and transformers read its quantization_config. Options whose "
            "fp8 kernels do not run say so; precision bf16 sizes a converted 16-bit copy (about "
            "twice the weights)."
        )
    if wl.task == "inference" and wl.weight_format == "mxfp4":
        warnings.append(
            f"{_MXFP4_STORED} and is served so, as published: vLLM's MXFP4 MoE kernels "
            "(Marlin on Ampere, native on Hopper and newer), or transformers 4.55+ with "
            "triton>=3.4 and the kernels package on compute capability 7.5+ or Intel Max GPUs "
            "(without them it dequantises to bf16, about 3.8x the experts' memory). Options "
            "where those kernels do not run say so; precision bf16 sizes the dequantised model."
        )
    if wl.task == "inference" and sixteen_bit and stored == "mxfp4":
        asked = request.precision is not None
        warnings.append(
            f"{_MXFP4_STORED}; "
            + (
                f"sized here dequantised to {wl.weight_format}, as you asked"
                if asked
                else "sized here dequantised to bf16, as this library loads them"
            )
            + " (about 3.8x the experts' memory). Leave precision open with vLLM or a current "
            "transformers to serve them as stored (OpenAI: gpt-oss-120b runs on one 80 GB GPU)."
        )
    return warnings


_MXFP4_STORED = (
    "The checkpoint stores its experts in MXFP4 (its quantization_config: 4-bit values with a "
    "shared scale per 32, about 4.25 bits a weight)"
)


# Libraries whose QLoRA quantises through transformers' bitsandbytes integration.
_TRANSFORMERS_QLORA = ("hf_trainer", "axolotl")


def _experts_fused_in_transformers_5(shape: ModelShape, wl: Workload) -> float:
    """Bytes more this MoE's bitsandbytes-quantised base would hold under transformers 5, whose
    fused 3-D experts bitsandbytes leaves 16-bit (against NF4's 4 bits and constants, or
    LLM.int8()'s 8 bits); 0 where the experts are parameter tensors already (counted 16-bit)
    or the stack does not quantise through transformers and bitsandbytes."""
    experts = [lin for lin in shape.linears if lin.role.startswith("expert")]
    through_transformers = (wl.task == "qlora" and wl.decode_framework in _TRANSFORMERS_QLORA) or (
        wl.task == "inference"
        and wl.weight_format in ("int4", "int8")
        and wl.quant_method == "bitsandbytes"
        and wl.decode_framework == "transformers"
    )
    if (
        not through_transformers
        or not experts
        or not all(lin.module for lin in experts)
        or shape.num_experts <= shape.experts_per_token
    ):
        return 0.0
    routed = routed_expert_params(shape)
    if wl.weight_format == "int8":
        return routed * 1.0
    constants = (c.NF4_DOUBLE_QUANT if wl.double_quant else c.NF4_CONSTANTS).value
    return routed * (2 - 0.5 - constants)


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


def _built(cls, **fields):
    """A result model from fields the engine computed, every one given (models.trusted)."""
    return trusted(cls, fields)


def _other_choice(cand, best) -> bool:
    """A different system or GPU from the recommendation (not just another strategy)."""
    return (cand.system.name, cand.accelerator.name) != (best.system.name, best.accelerator.name)


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
            f"of contingency = {words.hours(opt.requested_gpu_hours)}, about "
            f"{words.hours(opt.wall_hours, 'hours')} of wall time."
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
    fused_loss = _fused_loss_hint(opt, framework)
    if fused_loss:
        reasons.append(fused_loss)
    return reasons


# The loss's logits are this share of a GPU's need or more: worth a practitioner's attention.
_LOGITS_WORTH_A_HINT = 0.25


_LOGITS_TOO_LARGE = 10e9  # bytes of logits no GPU spares easily


def _logits_hint(memory: MemoryBreakdown, framework, wl: Workload) -> str | None:
    """When nothing fits: the Trainer's fp32 logits for one sequence, where they are a large
    share of what one GPU would need, and the fused loss that never builds them."""
    if framework.key != "hf_trainer" or wl.logits_per_entry is not None:
        return None
    # Checked against a share of the need and a size of their own: without checkpointing
    # the activations of a long sequence dwarf everything, though the logits alone would not
    # fit most GPUs either.
    if memory.logits < min(_LOGITS_WORTH_A_HINT * memory.total_bytes, _LOGITS_TOO_LARGE):
        return None
    return (
        f"The loss's fp32 logits alone take {memory.logits / 1e9:.0f} GB for a micro-batch of "
        f"{plural(wl.batch_size, 'sequence')}: Liger Kernel's fused linear cross-entropy "
        "(use_liger_kernel=True) never builds them: choose the Trainer with Liger Kernel in the "
        "flowchart, or fused_loss: true in the API, to estimate it."
    )


def _fused_loss_hint(opt, framework) -> str | None:
    """Long sequences and large vocabularies make the Trainer's fp32 logits the largest
    tensor of a step; Liger Kernel's fused linear cross-entropy computes the loss in chunks
    without them. Said, not assumed: the researcher decides whether to add the dependency."""
    logits = opt.memory.logits
    # The Trainer is a training library: an inference job never reaches the check.
    if framework.key != "hf_trainer" or logits < _LOGITS_WORTH_A_HINT * opt.memory_per_gpu_bytes:
        return None
    return (
        f"The loss's fp32 logits take {logits / 1e9:.1f} of the "
        f"{opt.memory_per_gpu_bytes / 1e9:.1f} GB per GPU. Liger Kernel's fused linear "
        "cross-entropy (use_liger_kernel=True in TrainingArguments or TRL's SFTConfig; Triton "
        "kernels, benchmarked by linkedin/Liger-Kernel on NVIDIA A100s) never materialises "
        "them, so a larger micro-batch or a smaller GPU may fit; not assumed here (choose the "
        "Trainer with Liger Kernel in the flowchart, or fused_loss: true in the API, to "
        "estimate it)."
    )
