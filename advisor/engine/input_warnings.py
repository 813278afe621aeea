"""What the request itself leaves the estimate unable or unsure to say: how a quantised
checkpoint is read (its quantization_config), sequence lengths beyond the model's positions,
missing token counts, and the experts transformers 5 would keep 16-bit."""

from __future__ import annotations

from advisor.engine import constants as c
from advisor.engine.memory import Workload
from advisor.engine.memory_terms import masked_lm_head, routed_expert_params
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import ModelShape
from advisor.engine.workload import as_published, quantization_method, stored_format


def request_as_published(request: EstimateRequest, warnings: list[str]) -> EstimateRequest:
    """The request as workload.as_published reads the checkpoint's quantization_config, with
    a warning saying how it is sized (or that its quantisation is not modelled)."""
    if request.quantization == "gptq" and request.task in ("lora", "qlora"):
        warnings.append(
            "LoRA over a 4-bit GPTQ base (quantization gptq) is QLoRA, its base sized with "
            "bitsandbytes NF4's bytes without double quantisation (about the same: 0.5 B a "
            "weight and a few per cent of constants), as for a GPTQ checkpoint's config."
        )
        return request.model_copy(
            update={"precision": "int4", "quantization": None, "double_quant": False}
        )
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


# Encoder-decoders whose attention takes relative position buckets, not a position table:
# their config's n_positions is the length they were trained on, not a limit.
_RELATIVE_POSITION_FAMILIES = frozenset({"t5", "mt5", "umt5"})


def input_warnings(request: EstimateRequest, shape: ModelShape, wl: Workload) -> list[str]:
    """What the request leaves the estimate unable or unsure to say."""
    return [
        *_position_warnings(shape, wl),
        *_target_warnings(request, shape, wl),
        *_task_head_warnings(shape, wl),
        *_fused_experts_warnings(shape, wl),
        *_token_count_warnings(request, wl),
        *_stored_format_warnings(request, wl),
    ]


def _position_warnings(shape: ModelShape, wl: Workload) -> list[str]:
    """A sequence (or a prompt and its answer) longer than the model's positions."""
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
    return warnings


def _target_warnings(request: EstimateRequest, shape: ModelShape, wl: Workload) -> list[str]:
    """Training: a target length (new_tokens) the model ignores or its decoder cannot hold."""
    warnings = []
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
    return warnings


def _task_head_warnings(shape: ModelShape, wl: Workload) -> list[str]:
    """Fine-tuning an encoder whose config names a masked-LM head: a task head is assumed."""
    if wl.training and not shape.vocab_head and masked_lm_head(shape):
        # An encoder fine-tuned with a task head (workload.resolve_shape) whose config names
        # the masked-LM head.
        return [
            f"Fine-tuning {shape.architecture}: a task head (classification, tagging or "
            "question answering) is assumed, whose loss builds no vocabulary logits; the "
            "masked-LM head its config.json names is counted in the parameters only. For "
            "masked-LM training on your own text, choose pre-training."
        ]
    return []


def _fused_experts_warnings(shape: ModelShape, wl: Workload) -> list[str]:
    """A mixture-of-experts model quantised through transformers and bitsandbytes: its experts
    are counted quantised, which transformers 5 leaves 16-bit."""
    fused_experts = experts_fused_in_transformers_5(shape, wl)
    if not fused_experts:
        return []
    bits = "4-bit" if wl.weight_format == "int4" else "8-bit"
    if wl.training:
        job, shared = "QLoRA", ", shared out by ZeRO-3 or FSDP"
        instead = "use Unsloth, which says it quantises them since June 2026 (unsloth issue #4032)"
    else:
        job, shared = f"{bits} inference", ""
        instead = "serve a GPTQ checkpoint with vLLM (quantization gptq)"
    return [
        f"{job} of a mixture-of-experts model through transformers and bitsandbytes: the "
        f"experts are counted {bits}, as transformers 4.x builds them (one Linear layer per "
        "expert). Transformers 5 stores them as fused 3-D parameters, which bitsandbytes "
        "does not quantise (bitsandbytes issue #1849, open as of mid-2026): there they stay "
        f"16-bit, about {fused_experts / 1e9:,.0f} GB more in all{shared}. Pin "
        f"transformers<5, or {instead}."
    ]


def _token_count_warnings(request: EstimateRequest, wl: Workload) -> list[str]:
    """No token count: the GPU hours cannot be estimated."""
    warnings = []
    if wl.training and request.tokens is None:
        warnings.append("No token count given: GPU hours cannot be estimated, only memory.")
    if wl.task == "inference" and request.tokens is None:
        warnings.append("No token count given: GPU hours need the total prompt + generated tokens.")
    return warnings


def _stored_format_warnings(request: EstimateRequest, wl: Workload) -> list[str]:
    """Inference of an fp8 or MXFP4 checkpoint: served as published, or sized as a converted
    16-bit copy."""
    warnings = []
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
_TRANSFORMERS_QLORA = ("hf_trainer", "trl", "axolotl", "llama_factory")


def experts_fused_in_transformers_5(shape: ModelShape, wl: Workload) -> float:
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
