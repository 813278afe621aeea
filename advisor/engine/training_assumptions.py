"""The assumptions a training result lists beyond memory: activations and logits, the adapters'
or the full training state, the utilisation, and what the recommended layout costs per optimizer
step (result_assumptions.assumptions lists them in this order)."""

from __future__ import annotations

from dataclasses import replace

from advisor.engine import constants as c
from advisor.engine import preference, rollouts, scale_cost
from advisor.engine.compute import (
    micro_batch_efficiency,
    peak_tflops,
    training_flops_per_token,
    training_layout,
)
from advisor.engine.memory import Workload, reference_copy_bytes
from advisor.engine.memory_terms import loss_chunk_bytes
from advisor.engine.models import Assumption, EstimateRequest, built
from advisor.engine.optimizer_step import step_bytes_per_param
from advisor.engine.recipe_reasons import OPTIMIZER_WORDS
from advisor.engine.roofline import LossTraffic, loss_traffic
from advisor.engine.shape import ModelShape
from advisor.engine.tensor_parallel import layout_key


def training_assumptions(
    request: EstimateRequest, shape: ModelShape, wl: Workload, framework, best
) -> list[Assumption]:
    """Activations, logits, training state and the speed of a training job."""
    out = [c.KORTHIKANTI.assumption(_activations_words(wl, best))]
    if wl.generates:
        out.append(
            c.PACKED_SEQUENCES.assumption(
                f"every sequence {wl.seq_len:,} tokens long: a prompt of "
                f"{wl.rollout.prompt_tokens:,} and a completion of the full "
                f"{wl.rollout.completion_tokens:,} (max_completion_length), an upper bound: "
                "completions that stop earlier at their end-of-sequence token cost less to "
                "generate and to train on"
            )
        )
    else:
        out.append(
            c.PACKED_SEQUENCES.assumption(
                f"every sequence {wl.seq_len:,} tokens long: the tokens you gave fill whole "
                "sequences (short examples packed together); batches padded to their longest "
                "example take more GPU hours, by the share of padding, and batches whose "
                "length changes every step can leave PyTorch holding far more memory than the "
                "peak (ms-swift's unpacked Qwen-7B LoRA runs reserved 12-47 % more than "
                "estimated; the sbatch script for NVIDIA GPUs sets expandable segments, which "
                "reuse it)"
            )
        )
    if wl.generates:
        out.append(rollouts.assumption(wl, *_engine_on(best)))
    elif wl.objective != "sft":
        out.append(preference.assumption(wl, framework, _reference_bytes(shape, wl, best)))
    out.append(_logits_assumption(request, shape, wl, framework))
    traffic = loss_traffic(shape, wl, wl.compute_dtype)
    if traffic is not None:
        out.append(_loss_traffic_assumption(shape, traffic, framework))
    out.append(c.MICROBATCH_SATURATION_TOKENS.assumption())
    if wl.compiled:
        out.append(
            c.COMPILE_ELEMENTWISE_SHARE.assumption(
                f"{c.COMPILE_ELEMENTWISE_SHARE.value:.0%} of the eager elementwise traffic "
                f"between matmuls (you asked for torch.compile: {framework.compile_switch}); "
                "the catalog's measurements ran eager, so each option's utilisation is moved "
                "by the per-layer roofline. Memory is counted as eager, an upper bound "
                "(torchtitan measured 7 % less with compile)"
            )
        )
    if wl.adapters:
        out.extend(_adapter_assumptions(request, shape, wl))
    else:
        out.extend(_full_training_assumptions(wl, best))
    if wl.optimizer == "adamw_8bit":
        out.append(c.ADAM_8BIT_STATE.assumption())
    strategy = best.option.strategy if best is not None else "single"
    if wl.gradient_checkpointing:
        out.append(c.RECOMPUTE_FLOPS_PER_PARAM.assumption())
    out.append(_optimizer_step_assumption(wl, framework, strategy))
    out.append(c.DDP_BUCKET_COPY.assumption())
    out.append(c.ZERO3_LIVE_LAYERS.assumption())
    return out


def _engine_on(best) -> tuple[float | None, float | None, int]:
    """(vllm_gpu_memory_utilization, vLLM's bytes per GPU, GPUs per engine) on the
    recommended option."""
    if best is None:
        return None, None, 1
    option = best.option
    need = option.memory.rollout_engine
    degree = (option.recipe and option.recipe.generation_tp) or 1
    return rollouts.memory_share(need, option.capacity_bytes), need, degree


def _reference_bytes(shape: ModelShape, wl: Workload, best) -> float | None:
    """DPO's reference copy per GPU on the recommended option (memory.reference_copy_bytes)."""
    if best is None or not wl.reference_copy:
        return None
    option = best.option
    recipe = option.recipe
    strategy = option.strategy
    if strategy == "tensor_parallel" and recipe is not None and recipe.tp > 1:
        strategy = layout_key(recipe.tp, recipe.pp)
    return reference_copy_bytes(shape, wl, strategy, option.num_gpus)


def _activations_words(wl: Workload, best) -> str:
    """What the activations keep, and which attention computes them."""
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
    return f"{activ}; {attention}"


def _logits_assumption(
    request: EstimateRequest, shape: ModelShape, wl: Workload, framework
) -> Assumption:
    """The bytes per token and vocabulary entry the loss keeps, and why."""
    if wl.generates:
        return built(
            Assumption,
            name=c.LOGITS_TRAINING_BYTES.name,
            value=rollouts.logits_words(wl, bool(request.fused_loss)),
            source=rollouts.SOURCE,
        )
    if wl.objective != "sft":
        return built(
            Assumption,
            name=c.LOGITS_TRAINING_BYTES.name,
            value=preference.logits_words(wl, framework, bool(request.fused_loss)),
            source=preference.SOURCE,
        )
    if wl.logits_per_entry is None and shape.remote_code and not wl.autocast:
        return c.LOGITS_REMOTE_CODE_BYTES.assumption(
            f"{c.LOGITS_REMOTE_CODE_BYTES.value:g} bytes per token x vocabulary entry: "
            "the model's own code (config.json auto_map, trust_remote_code=True) "
            "computes the loss on 16-bit logits"
        )
    if wl.logits_per_entry is None:
        return c.LOGITS_TRAINING_BYTES.assumption()
    if request.fused_loss:
        return c.LOGITS_TRAINING_BYTES.assumption(
            f"{wl.logits_per_entry:g} bytes per token x vocabulary entry: a fused linear "
            "cross-entropy (you said so; Liger Kernel's with use_liger_kernel=True) computes "
            "the loss from the hidden states one chunk at a time, so the full logits never "
            "exist"
        )
    if wl.loss_chunk_tokens:
        chunk = loss_chunk_bytes(shape, wl)
        return c.LOGITS_TRAINING_BYTES.assumption(
            f"{wl.logits_per_entry:g} bytes per token x vocabulary entry: {framework.name} "
            f"runs the LM head and the loss over {wl.loss_chunk_tokens} tokens at a time, each "
            "chunk recomputed in backward, so one chunk's fp32 logits and an fp32 copy of the "
            f"LM head weight ({chunk / 1e9:.2f} GB) exist at a time; "
            'loss_type="nll" keeps the logits whole'
        )
    return c.LOGITS_TRAINING_BYTES.assumption(
        f"{wl.logits_per_entry:g} bytes per token x vocabulary entry: "
        f"{framework.name} computes the loss without full fp32 logits"
    )


def _loss_traffic_assumption(shape: ModelShape, traffic: LossTraffic, framework) -> Assumption:
    """What the loss moves over the logits each step, and what the speed assumes of it."""
    scored = "" if traffic.scored_share >= 1 else f" for {traffic.scored_share:.0%} of the tokens"
    fused = (
        f"; a fused loss ({framework.fused_loss_switch}) moves about "
        f"{c.FUSED_LOSS_TRAFFIC_BYTES.value:g}"
        if framework.fused_loss_switch
        else ""
    )
    return c.LOSS_TRAFFIC_BYTES.assumption(
        f"{traffic.per_entry:g} bytes per token x vocabulary entry{scored}: "
        f"{traffic.bytes_per_token(shape) / 1e6:.1f} MB per token over {shape.vocab_size:,} "
        "entries, timed at the memory bandwidth beside each layer's own elementwise work, "
        f"less the {c.FUSED_LOSS_TRAFFIC_BYTES.value:g} the calibration runs' fused loss "
        f"moved{fused}"
    )


def _optimizer_step_assumption(wl: Workload, framework, strategy: str) -> Assumption:
    return built(
        Assumption,
        name="Optimizer step",
        value=f"{step_bytes_per_param(wl, wl.optimizer, strategy):g} bytes per trainable "
        "parameter each optimizer step (the gradient read, every state read and written, "
        "the weights written"
        + (
            "; the gradients read again for their norm and scaled, as "
            f"{framework.name} clips them by default"
            if wl.clips_gradients
            else ""
        )
        + ") at the memory bandwidth, on each GPU's share of the optimizer; once per "
        "global batch, so accumulation and larger batches make it cheaper",
        source="torch.optim.AdamW (foreach by default, fused on request): one pass over "
        "parameters, gradients and both moments; torch.nn.utils.clip_grad_norm_: the norm "
        "of every gradient, then every gradient scaled; advisor/engine/optimizer_step.py",
    )


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
        built(
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
        built(
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
            built(
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
        built(
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
            built(
                Assumption,
                name="Utilisation (recommended option)",
                value=f"{util.value:.0%} of the dense peak, applied to the FLOPs "
                "executed (recomputation included)",
                source=util.source,
            )
        )
    out.append(
        built(
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


def layout_detail(best, shape: ModelShape, wl: Workload) -> str:
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
