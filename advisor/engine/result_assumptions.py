"""The assumptions a result lists: every constant and choice its numbers rest on, with its
source, for memory, for training or inference speed, and for the plan (contingency, margins).
Those of training and of inference speed come from training_assumptions.py and
inference_assumptions.py."""

from __future__ import annotations

from advisor.engine import constants as c
from advisor.engine import device_memory, scale_cost
from advisor.engine.inference_assumptions import inference_assumptions
from advisor.engine.memory import PHASES, Workload
from advisor.engine.memory_terms import kv_cache_copies, routed_expert_params
from advisor.engine.models import Assumption, EstimateRequest, built
from advisor.engine.parallel_options import layout_assumptions, serving_layout_assumptions
from advisor.engine.shape import ModelShape
from advisor.engine.training_assumptions import layout_detail, training_assumptions
from advisor.engine.uncertainty import (
    gpu_hours_uncertainty_assumption,
    memory_uncertainty_assumption,
)
from advisor.engine.words import plural
from advisor.engine.workload import batch_default, default_seq_len, global_batch


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
        default = default_seq_len(request)
        length = wl.rollout.prompt_tokens if wl.rollout else wl.seq_len
        limited = length < default.value
        if wl.generates:
            how = " per prompt" + (
                ": with its completion, as many as the model's positions hold" if limited else ""
            )
        elif not limited:
            how = " per sequence"
        elif wl.new_tokens and not shape.is_encoder_decoder:
            how = " per prompt: with the tokens it generates, as many as the model's positions hold"
        else:
            how = " per sequence, the longest the model takes"
        out.append(default.assumption(plural(length, "token") + how))
    if wl.encoder_len:
        out.append(_encoder_decoder_assumption(request, shape, wl))
    out.extend(_batch_assumptions(request, wl, framework, best))
    if wl.training:
        out.extend(training_assumptions(request, shape, wl, framework, best))
        out.append(scale_cost.assumption(layout_detail(best, shape, wl)))
    else:
        out.extend(inference_assumptions(request, shape, wl, best))
        out.append(
            built(
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
        return built(
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
    return built(
        Assumption,
        name="Encoder and decoder lengths",
        value=f"the encoder reads {encoder}; {decoder}",
        source=(
            "an encoder-decoder's encoder layers see the input's tokens and its decoder layers "
            "the target's, with cross-attention over the input (Vaswani et al. 2017)"
        ),
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
    return built(
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
            built(
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
    elif wl.sequences_per_sample > 1:
        text = f"{plural(batch, 'preference pair')} ({plural(2 * batch, 'sequence')})"
    else:
        text = plural(batch, "sequence")
    return [constant.assumption(text)]


def _memory_assumptions(
    request: EstimateRequest, shape: ModelShape, wl: Workload, framework, assumed: bool, best
) -> list[Assumption]:
    """The library, the parameter count and what memory per GPU rests on."""
    out = [
        built(
            Assumption,
            name="Library",
            value=framework.name
            + (" (you did not say which library; this is the most common one)" if assumed else ""),
            source=framework.source,
        ),
        built(
            Assumption,
            name="Parameters",
            value=f"{shape.params_total:,} total, {shape.params_active:,} active",
            source=shape.source,
        ),
        c.CUDA_CONTEXT.assumption(f"{c.CUDA_CONTEXT.value / 2**20:.0f} MiB"),
        c.CUDA_CONTEXT_LEGACY.assumption(f"{c.CUDA_CONTEXT_LEGACY.value / 2**20:.0f} MiB"),
        c.NCCL_BUFFERS.assumption(f"{c.NCCL_BUFFERS.value / 2**20:.0f} MiB on multi-GPU jobs"),
        c.ALLOCATOR_FRAGMENTATION.assumption(f"{c.ALLOCATOR_FRAGMENTATION.value:.0%}"),
        built(
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
        out.append(_peak_of_a_step(best))
    if wl.training and best is not None:
        out.extend(layout_assumptions(best.option, best.node, best.accelerator))
    elif best is not None:
        out.extend(serving_layout_assumptions(best.option, best.node, best.accelerator, framework))
    if not wl.training and kv_cache_copies(shape, wl) > 1:
        out.append(_legacy_kv_cache_copies(wl))
    out.extend(_weight_format_assumptions(request, shape, wl))
    return out


def _peak_of_a_step(best) -> Assumption:
    """Training: which phase of a step the memory peaks at, and why not the sum of all."""
    phase = best.option.memory.peak_phase if best is not None else ""
    return built(
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


def _legacy_kv_cache_copies(wl: Workload) -> Assumption:
    """Inference with a tuple KV cache rebuilt every step: two copies at the peak."""
    return c.LEGACY_KV_CACHE_COPIES.assumption(
        (
            "2 KV caches at the peak: transformers 4.35 or older rebuilds a tuple cache every step"
            if wl.tuple_kv_cache
            else "2 KV caches at the peak: the model runs its own code (config.json "
            "auto_map, trust_remote_code=True), which rebuilds a tuple cache every step"
        )
        + "; generate() still holds the old one when torch.cat has written the new one (the "
        "decoding time counts the copy, as DynamicCache's torch.cat makes it too)"
    )


def _weight_format_assumptions(
    request: EstimateRequest, shape: ModelShape, wl: Workload
) -> list[Assumption]:
    """The bytes a quantised weight format adds: its constants, scales and workspaces."""
    out = []
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
