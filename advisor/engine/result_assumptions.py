"""The assumptions a result lists: every constant and choice its numbers rest on, with its
source, for memory, for training or inference speed, and for the plan (contingency, margins)."""

from __future__ import annotations

from dataclasses import replace

from advisor.engine import constants as c
from advisor.engine import device_memory, scale_cost
from advisor.engine.compute import (
    EXLLAMA_RECONSTRUCT_ROWS,
    dequantises_per_step,
    expert_read_share,
    peak_tflops,
    training_flops_per_token,
    training_layout,
)
from advisor.engine.memory import PHASES, Workload
from advisor.engine.memory_terms import (
    ENCODER_ONLY_FAMILIES,
    kv_cache_copies,
    routed_expert_params,
)
from advisor.engine.models import Assumption, EstimateRequest, trusted
from advisor.engine.parallel_options import layout_assumptions
from advisor.engine.recipe import micro_batch_efficiency
from advisor.engine.recipe_reasons import OPTIMIZER_WORDS
from advisor.engine.shape import ModelShape
from advisor.engine.speed import decode_speed, generation
from advisor.engine.uncertainty import (
    gpu_hours_uncertainty_assumption,
    memory_uncertainty_assumption,
)
from advisor.engine.words import plural
from advisor.engine.workload import batch_default, global_batch


def _built(cls, **fields):
    """A result model from fields the engine computed, every one given (models.trusted)."""
    return trusted(cls, fields)


def assumptions(
    request: EstimateRequest,
    shape: ModelShape,
    wl: Workload,
    framework,
    assumed: bool,
    best=None,
    *,
    seq_len_assumed: bool = False,
) -> list[Assumption]:
    """Everything the result's numbers assume, in the order the result page lists them."""
    out = _memory_assumptions(request, shape, wl, framework, assumed, best)
    if request.precision is None:
        out.append(_precision_assumption(wl, framework, best))
    # Audio in (Whisper): the sequence length is the text's, which inference generates.
    if seq_len_assumed and (wl.reads_text or wl.training):
        limited = wl.seq_len < c.DEFAULT_SEQ_LEN.value
        if not limited:
            how = " per sequence"
        elif wl.new_tokens and not shape.is_encoder_decoder:
            how = " per prompt: with the tokens it generates, as many as the model's positions hold"
        else:
            how = " per sequence, the longest the model takes"
        out.append(c.DEFAULT_SEQ_LEN.assumption(plural(wl.seq_len, "token") + how))
    if wl.encoder_len:
        out.append(_encoder_decoder_assumption(request, shape, wl))
    out.extend(_batch_assumptions(request, wl, framework, best))
    if wl.training:
        out.extend(_training_assumptions(request, shape, wl, framework, best))
        out.append(scale_cost.assumption(_layout_detail(best, shape, wl)))
    else:
        out.extend(_inference_assumptions(request, shape, wl, best))
        out.append(
            _built(
                Assumption,
                name="Scaling efficiency",
                value=", ".join(f"{k} {v:.0%}" for k, v in c.SCALING_EFFICIENCY.items()),
                source=c.SCALING_SOURCE,
            )
        )
    out.append(c.CONTINGENCY.assumption(f"{c.CONTINGENCY.value:.0%}"))
    out.append(gpu_hours_uncertainty_assumption(request.task))
    return out


def _encoder_decoder_assumption(
    request: EstimateRequest, shape: ModelShape, wl: Workload
) -> Assumption:
    """What an encoder-decoder's two stacks read and write per sequence."""
    if not shape.cross_attends:
        # A masked autoencoder (ViT-MAE, VideoMAE pre-training).
        return _built(
            Assumption,
            name="Encoder and decoder lengths",
            value=f"the encoder reads the {plural(wl.encoder_len, 'token')} of each input left "
            f"visible by the mask; the decoder reads all {plural(wl.decoder_len, 'token')} "
            "(the encoded ones and a mask token for each hidden patch) to reconstruct them",
            source=(
                "masked autoencoders encode only the unmasked patches and reconstruct all of "
                "them with a smaller decoder (He et al. 2021, arXiv:2111.06377; Tong et al. "
                "2022, arXiv:2203.12602); transformers' ViTMAEForPreTraining and "
                "VideoMAEForPreTraining"
            ),
        )
    encoder = plural(wl.encoder_len, "token") + " per sequence"
    if shape.encoder_positions:
        encoder += " (always: Whisper pads every clip to 30 s of audio)"
    if not wl.training:
        decoder = (
            f"the decoder generates {plural(wl.new_tokens, 'token')}, each reading the decoder's "
            "weights and both caches (its own tokens, the encoder's keys and values)"
        )
    elif request.new_tokens:
        decoder = f"the decoder writes a target of {plural(wl.decoder_len, 'token')} (new_tokens)"
    else:
        decoder = (
            f"the decoder writes a target of {plural(wl.decoder_len, 'token')}, the sequence "
            "length (a summary, translation, transcript or label is usually shorter: give its "
            "length as new_tokens)"
        )
    if not wl.reads_text:
        decoder += "; the job's tokens are the text it writes, one clip per " + (
            "transcript" if wl.training else "request"
        )
    return _built(
        Assumption,
        name="Encoder and decoder lengths",
        value=f"the encoder reads {encoder}; {decoder}",
        source=(
            "an encoder-decoder's encoder layers see the input's tokens and its decoder layers "
            "the target's, with cross-attention over the input (Vaswani et al. 2017)"
        ),
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
        pp=recipe.pp,
    )
    measured = best.utilisation.measured_gpus if best.utilisation else option.num_gpus
    return scale_cost.describe(cost, option.strategy, option.num_gpus) + (
        scale_cost.describe_scale(option.num_gpus, measured)
    )


def _precision_assumption(wl: Workload, framework, best) -> Assumption:
    """The 16-bit type the engine chose where the researcher did not say (compute_dtype_for)."""
    chosen = best.option.compute_dtype if best is not None else None
    if wl.fp16_where_no_bf16:
        value = (
            "16-bit mixed precision: bf16 where the GPU has it, fp16 with loss scaling on GPUs "
            "without it (V100, T4); same memory, fp16's narrower range can overflow"
        )
    else:
        value = f"bf16: {framework.name} does not train in fp16, so GPUs without bf16 cannot run it"
    if chosen:
        value += f"; the recommended GPU computes in {chosen}"
    return _built(
        Assumption,
        name="Precision (not given)",
        value=value,
        source="NVIDIA A100 and newer, AMD CDNA and Intel Xe-HPC have bf16; torch.amp with "
        "GradScaler for fp16 (PyTorch AMP docs)",
    )


def _batch_assumptions(request: EstimateRequest, wl: Workload, framework, best) -> list[Assumption]:
    """The batch the engine assumed where the researcher gave none (workload.batch_default)."""
    if request.batch_size is not None:
        return []
    if wl.fills_kv_cache:
        default, large = framework.max_num_seqs
        return [
            _built(
                Assumption,
                name=f"Concurrent requests ({framework.name}, not given)",
                value=(
                    f"about {plural(wl.batch_size, 'request')} at once on the recommended GPU"
                    if best is not None
                    else "as many as the KV cache holds"
                )
                + f": {framework.name} schedules every prompt of the job itself, as many as the "
                f"memory it reserves holds beyond the model, at most {default:,} ({large:,} on "
                "GPUs of 70 GiB or more other than the A100)",
                source=framework.source,
            )
        ]
    batch = global_batch(request)
    _, constant = batch_default(request)
    if request.task == "inference":
        text = plural(batch, "request")
    elif request.task == "pretrain":
        text = (
            f"{plural(batch, 'sequence')} of {plural(request.seq_len, 'token')}, "
            f"{batch * request.seq_len:,} tokens per step"
        )
    else:
        text = plural(batch, "sequence")
    return [constant.assumption(text)]


def _memory_assumptions(
    request: EstimateRequest, shape: ModelShape, wl: Workload, framework, assumed: bool, best
) -> list[Assumption]:
    """The library, the parameter count and what memory per GPU rests on."""
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
            value=(
                device_memory.reading(best.accelerator)
                if best is not None
                else "each GPU's memory label read as GiB, as the driver reports it"
            )
            + "; a GDDR card with ECC on keeps 1/16 of it for check bits, HBM does not",
            source="nvidia-smi / rocm totals of real cards (advisor/engine/device_memory.py)",
        ),
        memory_uncertainty_assumption(wl.task),
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
                (
                    "2 KV caches at the peak: transformers 4.35 or older rebuilds a tuple cache "
                    "every step"
                    if wl.tuple_kv_cache
                    else "2 KV caches at the peak: the model runs its own code (config.json "
                    "auto_map, trust_remote_code=True), which rebuilds a tuple cache every step"
                )
                + "; each step moves the cache three times (torch.cat reads the old cache and "
                "writes the new one, attention reads it), which the decoding time counts"
            )
        )
    if wl.weight_format == "int4" and wl.quant_method == "gptq":
        out.append(c.GPTQ_GROUP_CONSTANTS.assumption(f"{c.GPTQ_GROUP_CONSTANTS.value:.4f} B/param"))
        out.append(c.GPTQ_DEQUANT_LAYERS.assumption())
    elif wl.weight_format == "int4":
        nf4 = c.NF4_DOUBLE_QUANT if wl.double_quant else c.NF4_CONSTANTS
        default = " (default)" if request.double_quant is None else ""
        out.append(nf4.assumption(f"{nf4.value:.4f} B/param{default}"))
        out.append(c.DEQUANT_WORKSPACE_LAYERS.assumption())
    if wl.weight_format == "int8":
        out.append(c.INT8_ROW_SCALE.assumption())
    if wl.weight_format == "fp8":
        out.append(c.FP8_BLOCK_SCALES.assumption(f"{c.FP8_BLOCK_SCALES.value:.5f} B/param"))
    if wl.weight_format == "mxfp4":
        experts = routed_expert_params(shape)
        out.append(
            c.MXFP4_EXPERT_BYTES.assumption(
                f"{c.MXFP4_EXPERT_BYTES.value:.5f} B/param for {experts / 1e9:,.1f}B expert "
                "weights, as stored"
            )
        )
    return out


def _training_assumptions(
    request: EstimateRequest, shape: ModelShape, wl: Workload, framework, best
) -> list[Assumption]:
    """Activations, logits, training state and the speed of a training job."""
    activ = (
        "gradient checkpointing: layer inputs only"
        if wl.gradient_checkpointing
        else ("selective recomputation" if wl.selective_recompute else "all layers kept")
    )
    if not wl.flash_attention:
        attention = "eager attention (scores kept)"
    elif best is not None and not best.flash:
        attention = "eager attention (scores kept): the recommended GPUs have no fused kernel"
    else:
        attention = "flash attention"
    out = [c.KORTHIKANTI.assumption(f"{activ}; {attention}")]
    out.append(
        c.PACKED_SEQUENCES.assumption(
            f"every sequence {wl.seq_len:,} tokens long: the tokens you gave fill whole "
            "sequences (short examples packed together); batches padded to their longest "
            "example take more GPU hours, by the share of padding"
        )
    )
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
    elif request.fused_loss:
        out.append(
            c.LOGITS_TRAINING_BYTES.assumption(
                f"{wl.logits_per_entry:g} bytes per token x vocabulary entry: a fused linear "
                "cross-entropy (you said so; Liger Kernel's with use_liger_kernel=True) computes "
                "the loss from the hidden states one chunk at a time, so the full logits never "
                "exist"
            )
        )
    else:
        out.append(
            c.LOGITS_TRAINING_BYTES.assumption(
                f"{wl.logits_per_entry:g} bytes per token x vocabulary entry: "
                f"{framework.name} computes the loss without full fp32 logits"
            )
        )
    out.append(c.MICROBATCH_SATURATION_TOKENS.assumption())
    if wl.adapters:
        out.extend(_adapter_assumptions(request, shape, wl))
    else:
        out.extend(_full_training_assumptions(wl, best))
    if wl.optimizer == "adamw_8bit":
        out.append(c.ADAM_8BIT_STATE.assumption())
    if wl.gradient_checkpointing:
        out.append(c.RECOMPUTE_FLOPS_PER_PARAM.assumption())
    out.append(c.DDP_BUCKET_COPY.assumption())
    out.append(c.ZERO3_LIVE_LAYERS.assumption())
    return out


def _adapter_assumptions(
    request: EstimateRequest, shape: ModelShape, wl: Workload
) -> list[Assumption]:
    """LoRA / QLoRA: the adapters, their dropout and their speed."""
    out = []
    targets = ", ".join(wl.lora_targets) or "every linear layer of each block"
    if not wl.lora_targets and not all(lin.module for lin in shape.linears):
        # gpt-oss keeps its experts and router as parameter tensors, which neither PEFT's
        # "all-linear" nor bitsandbytes touches.
        targets += (
            " (its experts and router are parameter tensors, not Linear layers: not adapted, "
            "and kept in 16-bit under QLoRA; PEFT's target_parameters adapts experts)"
        )
    out.append(
        _built(
            Assumption,
            name="LoRA",
            value=f"rank {wl.lora_rank}"
            + (" (default)" if request.lora_rank is None else "")
            + ", targets: "
            + targets
            + "; adapters and their Adam state in fp32",
            source="Hu et al. 2021 (arXiv:2106.09685); QLoRA paper section 4 (all linear layers)",
        )
    )
    if wl.lora_dropout:
        default = " (default)" if request.lora_dropout is None else ""
        out.append(c.LORA_DROPOUT.assumption(f"on{default}"))
    out.append(c.LORA_FLOPS_PER_PARAM.assumption())
    out.append(
        _built(
            Assumption,
            name="LoRA adapters' time",
            value="the frozen layers' matmuls at the full-training utilisation of the GPU; the "
            "adapters' own kernels (rank << features: few FLOPs) as memory traffic at its "
            "bandwidth: per adapted layer and token, in + 6 x out elements forward, 5 x in + "
            "4 x out backward, dropout's copy and mask on top, the forward again when "
            "recomputed",
            source="peft/tuners/lora/layer.py Linear.forward (base_layer(x), then lora_B("
            "lora_A(dropout(x))) * scaling added, each a separate kernel in eager PyTorch); "
            "compute.lora_adapter_bytes_per_token. Checked, never fitted, against torchtune's "
            "README ('Optimization flags', Llama 3.2 3B on an A100): LoRA 8,210 tokens/s "
            "against 7,210 for the same full fine-tune (docs/accuracy.md)",
        )
    )
    if wl.fp32_unquantised:
        kept = shape.params_total - shape.params_quantisable
        out.append(
            _built(
                Assumption,
                name="Parameters PEFT upcasts",
                value=f"{kept:,} parameters the base does not quantise (embeddings, LM head, "
                "norms) in fp32, 4 bytes each, and so an fp32 residual stream and fp32 "
                "outputs of the quantised layers (bitsandbytes returns its input's dtype); "
                "with bf16 training without AMP (mixed_precision false, as qlora.py casts "
                "them back) they stay 16-bit",
                source="peft/utils/other.py prepare_model_for_kbit_training: 'cast all non "
                "INT8 parameters to fp32' (every fp16/bf16 parameter that is not Params4bit); "
                "bitsandbytes Linear4bit.forward casts its output to the input's dtype",
            )
        )
    if wl.weight_format == "int4":  # QLoRA: the base is dequantised per pass (compute.py)
        out.append(c.QLORA_DEQUANT_BYTES_PER_PARAM.assumption())
        out.append(
            c.QLORA_DEQUANT_BANDWIDTH_FRACTION.assumption(
                f"{c.QLORA_DEQUANT_BANDWIDTH_FRACTION.value:.0%} of the memory bandwidth"
            )
        )
    return out


def _full_training_assumptions(wl: Workload, best) -> list[Assumption]:
    """Full training: the training state and the utilisation."""
    out = []
    name, text = {
        "mixed": (
            c.ZERO_MIXED_ADAM.name,
            "16-bit weights and gradients, fp32 master weights and Adam moments beside the "
            "16-bit copy the model computes with",
        ),
        "pure16": ("16-bit training state", "weights, gradients and Adam moments all 16-bit, "
                   "no fp32 master copy, as torchtune trains"),
        "fp32": ("fp32 training state", "weights, gradients and Adam moments all fp32"),
    }[wl.state_mode]  # fmt: skip
    optimizer = OPTIMIZER_WORDS.get(wl.optimizer, wl.optimizer)
    if wl.optimizer == "adamw_8bit":
        optimizer += " (its moments in 8 bits, below)"
    out.append(
        _built(
            Assumption,
            name=name,
            value=f"{text}; optimizer {optimizer}",
            source=c.ZERO_MIXED_ADAM.source,
        )
    )
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
    return out


def _inference_assumptions(
    request: EstimateRequest, shape: ModelShape, wl: Workload, best=None
) -> list[Assumption]:
    """Generation length, prefill utilisation and decoding speed."""
    if shape.family in ENCODER_ONLY_FAMILIES:
        return _encoder_inference_assumptions(shape, wl)
    out = []
    out.append(
        _built(
            Assumption,
            name="Generation",
            value=(
                f"prompt {wl.seq_len:,}"
                if wl.reads_text
                else f"one clip ({wl.encoder_len:,} encoder positions)"
            )
            + f" + {wl.new_tokens:,} generated tokens per request"
            + (" (default)" if request.new_tokens is None else "")
            + (
                f"; KV cache in {wl.compute_dtype} with {shape.num_kv_heads} KV heads"
                if shape.softmax_layers
                else "; no KV cache: a fixed recurrent state per sequence"
            ),
            source="KV cache = 2 x layers x KV heads x head dim x tokens x batch x bytes"
            if shape.softmax_layers
            else "state = layers x (conv window + SSM state) x batch, whatever the length",
        )
    )
    prefill = c.MFU_PREFILL
    if best is not None:
        prefill = c.PREFILL_BY_GENERATION.get(generation(best.accelerator).key, prefill)
    out.append(prefill.assumption(f"{prefill.value:.0%}"))
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
    share = expert_read_share(shape, wl.batch_size)
    if share < 1:
        out.append(
            _built(
                Assumption,
                name="Experts read per step",
                value=f"{share:.0%} of the weights at {plural(wl.batch_size, 'sequence')} per "
                f"step: the shared layers and the experts the step's tokens are routed to "
                f"({shape.experts_per_token} of {shape.num_experts} per token)",
                source="MoE kernels load only experts that received tokens (vLLM fused_moe "
                "groups tokens by expert; transformers' sparse MoE blocks skip experts with "
                "none); with top-k routing spread evenly a step of b tokens touches 1 - (1 - "
                "k/E)^b of the experts",
            )
        )
    out.extend(_weight_speed_assumptions(wl))
    if wl.prefill_chunk_tokens:
        out.append(
            _built(
                Assumption,
                name="Prefill chunks",
                value=f"at most {wl.prefill_chunk_tokens:,} tokens per forward pass: "
                "activations for one chunk, not a whole long prompt",
                source="vLLM V1 always runs chunked prefill; max_num_batched_tokens defaults "
                "to 16,384 for the offline LLM class on GPUs of 70 GiB or more other than the "
                "A100 and lower elsewhere (vllm/engine/arg_utils.py, "
                "EngineArgs.get_batch_defaults), so the largest default bounds the need",
            )
        )
    return out


def _weight_speed_assumptions(wl: Workload) -> list[Assumption]:
    """What quantised weights do to the inference timing (fp8, LLM.int8(), 4-bit dequant)."""
    out = []
    if wl.weight_format == "fp8":
        out.append(
            _built(
                Assumption,
                name="fp8 weights and speed",
                value="decoding reads 1 byte per weight of the linear layers; prefill is timed "
                "at the 16-bit peak (weight-only W8A16), a lower bound on Ada and Hopper, whose "
                "fp8 tensor cores vLLM runs W8A8",
                source="vLLM docs, 'FP8 W8A8' (docs.vllm.ai, as of v0.32): fp8 halves the "
                "weights' memory and gives 'up to a 1.6x improvement in throughput'; Ampere "
                "and Turing run the weights through the FP8 Marlin kernel (W8A16)",
            )
        )
    if wl.weight_format == "int8":
        out.append(
            _built(
                Assumption,
                name="8-bit weights and speed",
                value="decoding is timed as with 16-bit weights, a lower bound: bitsandbytes' "
                "LLM.int8() saves memory, not time (expect generation to be slower still)",
                source="Dettmers et al. 2022, LLM.int8() (arXiv:2208.07339): the int8 matmul "
                "with mixed-precision decomposition runs below the 16-bit speed; users report "
                "generate() 2.5-4x slower than bf16/fp16 (FLAN-UL2 on an A100, about 3x: "
                "huggingface.co/google/flan-ul2/discussions/27; a 13B model on an A100, 4-5 "
                "against 15-20 tokens/s: huggingface.co/IlyaGusev/saiga2_13b_lora/"
                "discussions/3)",
            )
        )
    if dequantises_per_step(wl):
        gptq = wl.quant_method == "gptq"
        fused = (
            f"fewer than {EXLLAMA_RECONSTRUCT_ROWS} sequences a step take the packed 4-bit kernel"
            if gptq
            else "one sequence at a time takes the fused 4-bit kernel"
        )
        out.append(
            _built(
                Assumption,
                name="4-bit weights and speed",
                value=f"with {wl.batch_size} sequences per step each 4-bit layer is "
                f"{'rebuilt' if gptq else 'dequantised'} in 16-bit before its matmul: a step "
                f"reads 0.5 + 2 + 2 bytes per weight, more than 16-bit weights would ({fused})",
                source=(
                    "AutoGPTQ's exllama kernel, the GPTQ default of transformers 4.35 and "
                    "older (exllama q4_matmul: the packed kernel while x_height < "
                    f"matmul_recons_thd, set to {EXLLAMA_RECONSTRUCT_ROWS} by auto_gptq and "
                    "optimum; above it q4_matmul_recons_cuda and cuBLAS)"
                    if gptq
                    else "bitsandbytes/autograd/_functions.py matmul_4bit: gemv_4bit only when "
                    "the input is a single token (A.numel() == A.shape[-1]), otherwise "
                    "MatMul4Bit: linear(A, dequantize_4bit(B).to(A.dtype).t())"
                ),
            )
        )
    return out


def _encoder_inference_assumptions(shape: ModelShape, wl: Workload) -> list[Assumption]:
    """An encoder-only model's inference: one forward pass per sequence, nothing generated."""
    library = decode_speed(wl.decode_framework)
    host = library.per_layer_overhead_s * shape.num_layers
    return [
        _built(
            Assumption,
            name="Forward pass",
            value=f"one forward pass per sequence of {wl.seq_len:,} tokens: an encoder-only "
            f"model ({shape.family}) embeds or classifies, it generates no tokens and keeps no "
            "KV cache",
            source="encoder-only architectures (BERT, RoBERTa, DistilBERT, ViT) have no decoder: "
            "Transformers runs them with a single model(**inputs) call, not generate()",
        ),
        c.MFU_PREFILL.assumption(f"{c.MFU_PREFILL.value:.0%}"),
        _built(
            Assumption,
            name="Host time per forward pass",
            value=(
                f"{host * 1e3:.1f} ms ({library.per_layer_overhead_s * 1e3:.2f} ms per layer, "
                "no CUDA graphs): a batch takes at least this long however small it is"
                if host
                else "none: the library replays CUDA graphs"
            ),
            source=library.source,
        ),
    ]
