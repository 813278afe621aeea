"""From a checked request (request_checks.py) to what the formulas need: the model's shape,
how its weights are stored and computed, the sequence lengths and batch, the `Workload`.

A problem found here is reported, like the checks', against the request field that caused it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from advisor.engine import constants as c
from advisor.engine import preference, rollouts
from advisor.engine.constants.base import Constant
from advisor.engine.errors import EstimateError
from advisor.engine.frameworks import framework_for
from advisor.engine.memory import Workload
from advisor.engine.memory_terms import (
    ENCODER_ONLY_FAMILIES,
    Rollout,
    logits_never_formed,
    masked_lm_head,
)
from advisor.engine.models import EstimateRequest
from advisor.engine.preference import is_preference, needs_trl_trainer
from advisor.engine.request_checks import LIMITS, NO_FP8_WEIGHTS, RequestError
from advisor.engine.shape import ModelShape, shape_from_architecture, sliding_window_of


def resolve_model(request: EstimateRequest) -> Any:
    """The model's architecture from hub metadata, config.json or a typed parameter count.

    A bare `model_id` cannot be counted here: the Hub lookup (a Celery task in the web app,
    `manage.py lookup_model` on the command line) must fill `hub` first.
    """
    from advisor.engine import architecture as arch_module

    if request.hub is not None:
        return arch_module.architecture_from_hub(request.hub)
    if request.config is not None:
        return arch_module.architecture_from_config(request.config)
    if request.params is not None:
        return arch_module.architecture_from_params(request.params)
    if request.model_id:
        raise RequestError(
            [
                (
                    "model_id",
                    f"{request.model_id!r} has not been looked up: run the Hub lookup first "
                    "(it fills hub), or give config or params.",
                )
            ]
        )
    raise RequestError([("model_id", "Name the model: give model_id, config or params.")])


def resolve_shape(request: EstimateRequest) -> ModelShape:
    if request.hub is None and request.config is None and request.params is None:
        resolve_model(request)  # raises the field error
    try:
        arch = resolve_model(request)
    except RequestError:
        raise
    except EstimateError as exc:
        field = exc.field or ("config" if request.config is not None else "params")
        if request.hub is not None and not field.startswith("hub"):
            field = f"hub.{field}" if exc.field else "hub"
        elif request.config is not None and not field.startswith("config"):
            field = f"config.{field}"
        raise RequestError([(field, exc.message)]) from None
    shape = shape_from_architecture(arch)
    config = (
        request.config
        if request.config is not None
        else (request.hub.config if request.hub is not None else None)
    )
    window, layers = sliding_window_of(config, shape.num_layers)
    if window and layers and shape.max_position_embeddings != window:
        shape = replace(shape, sliding_window=window, sliding_layers=min(layers, shape.num_layers))
    if shape.family in ENCODER_ONLY_FAMILIES:
        # Only masked-LM training projects onto the vocabulary; fine-tuning trains a task head
        # (classification, tagging, QA) and inference reads embeddings or a task head, even
        # where config.json names the masked-LM head (bert-base-uncased's does).
        trains_mlm = request.task == "pretrain" and masked_lm_head(shape)
        shape = replace(shape, vocab_head=trains_mlm)
    return shape


# Libraries that serve MXFP4 experts packed: vLLM (its MXFP4 MoE kernels) and transformers
# 4.55 or newer (Mxfp4HfQuantizer with the Triton kernels); None and "not_sure" mean
# transformers. transformers 4.35 predates the format; TGI's support is not established.
MXFP4_FRAMEWORKS = (None, "not_sure", "transformers", "vllm")


def _quantization_config(request: EstimateRequest) -> dict | None:
    """The checkpoint's quantization_config: the Hub's where a lookup found one, else the
    config's."""
    config = request.config or (request.hub.config if request.hub is not None else None) or {}
    quantization = config.get("quantization_config")
    if request.hub is not None and request.hub.quantization_config:
        quantization = request.hub.quantization_config
    return quantization if isinstance(quantization, dict) else None


def stored_format(request: EstimateRequest) -> str | None:
    """ "fp8" where the model's config says its weights are stored in fp8 (DeepSeek-V3/R1, the
    *-FP8 releases of Qwen3 and Llama), "mxfp4" for MXFP4 experts (gpt-oss), "gptq" or "awq"
    for a 4-bit GPTQ or AWQ checkpoint (the *-GPTQ-Int4 and *-AWQ releases), "bnb-4bit" or
    "bnb-8bit" for a pre-quantised bitsandbytes one (unsloth/*-bnb-4bit), else None."""
    quantization = _quantization_config(request)
    if quantization is None:
        return None
    method = str(quantization.get("quant_method", "")).lower()
    if method == "fp8" or method == "compressed-tensors" and "fp8" in str(quantization).lower():
        return "fp8"
    if method in ("gptq", "awq") and quantization.get("bits", 4) == 4:
        return method
    if method == "bitsandbytes":
        # Pre-quantised bitsandbytes checkpoints (unsloth/*-bnb-4bit) load in their format.
        if quantization.get("load_in_4bit") or quantization.get("_load_in_4bit"):
            return "bnb-4bit"
        if quantization.get("load_in_8bit") or quantization.get("_load_in_8bit"):
            return "bnb-8bit"
    return "mxfp4" if method == "mxfp4" else None


def quantization_method(request: EstimateRequest) -> str | None:
    """The checkpoint's quantization_config as "method" or "method, N-bit", else None."""
    quantization = _quantization_config(request)
    if quantization is None:
        return None
    method = str(quantization.get("quant_method", "") or "unnamed")[:40]  # shown in a warning
    bits = quantization.get("bits")
    return f"{method}, {bits}-bit" if isinstance(bits, int) else method


def as_published(request: EstimateRequest) -> EstimateRequest:
    """A quantised checkpoint used with the precision left open, as it is stored: a 4-bit GPTQ
    or AWQ one served (every serving library loads it so; LitGPT does not load it; AWQ is sized
    with GPTQ's layout, which it shares: 4-bit weights packed in int32, an fp16 scale and a
    4-bit zero point per group of 128 inputs), a bitsandbytes one served or LoRA-trained in its
    4 or 8 bits (transformers loads it quantised); LoRA on a GPTQ or AWQ one is QLoRA. These
    set request fields that other parts read (`quantization`, `double_quant`); fp8 and MXFP4
    checkpoints keep the request, and `_formats` gives them weight formats of their own."""
    if request.precision is not None or request.framework == "litgpt":
        return request
    stored = stored_format(request)
    if request.task == "inference" and stored in ("gptq", "awq"):
        return request.model_copy(update={"precision": "int4", "quantization": "gptq"})
    # LoRA on a GPTQ base (Qwen's Q-LoRA on its Int4 release, PEFT with gptqmodel) trains
    # adapters over 4-bit weights: QLoRA, its base sized with NF4's bytes, about the same.
    if request.task == "lora" and stored in ("gptq", "awq"):
        return request.model_copy(update={"precision": "int4", "double_quant": False})
    # A bitsandbytes checkpoint loads quantised: LoRA on its 4-bit base is QLoRA.
    if request.task in ("inference", "lora") and stored == "bnb-4bit":
        double = request.double_quant
        if double is None:
            double = bool((_quantization_config(request) or {}).get("bnb_4bit_use_double_quant"))
        return request.model_copy(update={"precision": "int4", "double_quant": double})
    if request.task in ("inference", "lora") and stored == "bnb-8bit":
        return request.model_copy(update={"precision": "int8"})
    return request


def _formats(request: EstimateRequest) -> tuple[str, str, str, str]:
    """(task, precision, how base weights are stored, what the matmuls run in); LoRA on a
    4-bit base is QLoRA, and a precision left open is bf16 where the GPU has it."""
    task, precision = request.task, request.precision or "bf16"
    stored = stored_format(request) if task == "inference" and request.precision is None else None
    if stored == "mxfp4" and request.framework in MXFP4_FRAMEWORKS:
        # Served as published: the MXFP4 experts stay packed (software.py says where the
        # kernels run), the rest computes in bf16.
        return task, precision, "mxfp4", precision
    if stored == "fp8" and request.framework not in NO_FP8_WEIGHTS:
        # An fp8 checkpoint (DeepSeek-V3/R1, the *-FP8 releases) served as published.
        return task, "fp8", "fp8", "bf16"
    if task == "lora" and precision == "int4":
        task = "qlora"
    if task == "qlora":
        return task, precision, "int4", precision if precision in ("fp16", "bf16") else "bf16"
    if precision in ("fp8", "int8", "int4"):
        # Matmuls in 16-bit: fp8 as weight-only W8A16 (vLLM's Marlin path), a lower bound on
        # Ada/Hopper, whose fp8 tensor cores (W8A8) vLLM quotes at up to 1.6x the throughput.
        return task, precision, precision, "bf16"
    return task, precision, precision, precision


def _new_tokens(request: EstimateRequest, shape: ModelShape, task: str) -> int:
    """Tokens generated per request: none for an encoder (BERT, ViT), which embeds or
    classifies a sequence in one forward pass."""
    new_tokens = request.new_tokens
    encoder_only = shape.family in ENCODER_ONLY_FAMILIES
    if task == "inference" and encoder_only and new_tokens:
        raise RequestError(
            [
                (
                    "new_tokens",
                    f"This is an encoder-only model ({shape.family}): it reads each sequence in "
                    "one forward pass and generates no tokens. Leave new_tokens out or give 0.",
                )
            ]
        )
    if task == "inference" and new_tokens == 0 and shape.encoder_positions and not encoder_only:
        raise RequestError(
            [
                (
                    "new_tokens",
                    f"{shape.family.capitalize()} reads audio and writes text: the job's tokens "
                    "are the ones it writes, so give the tokens it writes per clip (about 100 "
                    "for 30 s of speech), or leave new_tokens out.",
                )
            ]
        )
    if task == "inference" and new_tokens is None:
        new_tokens = 0 if encoder_only else c.DEFAULT_INFERENCE_NEW_TOKENS
    return new_tokens or 0


def sequence_length(request: EstimateRequest, shape: ModelShape) -> int:
    """The researcher's sequence length, else DEFAULT_SEQ_LEN, or the model's own position
    limit where that is shorter: a BERT never sees 2,048 tokens, so sizing it at 2,048 would
    quadruple its activations for a job that cannot run. A decoder's prompt leaves room for
    the tokens it generates (GPT-2's 1,024 positions: a prompt of 768 and 256 generated)."""
    if request.seq_len is not None:
        return request.seq_len
    default = int(default_seq_len(request).value)
    limit = shape.max_position_embeddings
    if not limit:
        return default
    if request.task == "inference" and not shape.is_encoder_decoder:
        limit -= _new_tokens(request, shape, "inference")
    elif rollouts.is_grpo(request):  # the prompt leaves room for its completion
        limit -= rollouts.completion_tokens(request)
    return max(min(default, limit), 1)


def default_seq_len(request: EstimateRequest) -> Constant:
    """The length assumed when none is given: TRL's preference trainers truncate a prompt and
    its answer at DPOConfig's max_length; anything else gets DEFAULT_SEQ_LEN."""
    if rollouts.is_grpo(request):
        return c.DEFAULT_GRPO_PROMPT_LEN
    if is_preference(request):
        library, _ = framework_for(request.framework, True, True)
        if library.key in preference.TRL_PREFERENCE_TRAINERS:
            return c.DEFAULT_PREFERENCE_SEQ_LEN
    return c.DEFAULT_SEQ_LEN


def with_sequence_length(request: EstimateRequest, shape: ModelShape) -> EstimateRequest:
    """`request` with its sequence length settled (sequence_length), for every reader."""
    if request.seq_len is not None:
        return request
    return request.model_copy(update={"seq_len": sequence_length(request, shape)})


def build_workload(request: EstimateRequest, shape: ModelShape) -> Workload:
    request = with_sequence_length(request, shape)
    task, precision, weight_format, compute = _formats(request)
    rank = _lora_rank(request, shape, task)
    training = task != "inference"
    framework, _ = framework_for(request.framework, training, needs_trl_trainer(request))
    loss = _loss_fields(request, shape, framework, task) if training else {}
    # Not said: 16-bit in the type each GPU has, as Unsloth's notebooks pick it
    # (is_bfloat16_supported()); the sbatch script passes fp16 where it is chosen (vLLM refuses
    # bf16 below compute capability 8.0 and asks for --dtype=half).
    fp16_where_no_bf16 = request.precision is None and (framework.fp16 or not training)
    checkpointing = request.gradient_checkpointing
    if checkpointing is None:
        checkpointing = framework.checkpointing.get(task, "none") == "full"
    mixed = request.mixed_precision
    if mixed is None:
        mixed = not (framework.pure_bf16 and training)
    new_tokens, seq_len = _trained_lengths(request, shape, task, loss)
    encoder_len, decoder_len = encoder_decoder_lengths(request, shape, new_tokens)
    return Workload(
        task=task,
        precision=precision,
        weight_format=weight_format,
        compute_dtype=compute,
        batch_size=request.micro_batch or global_batch(request),
        seq_len=seq_len,
        new_tokens=new_tokens,
        gradient_checkpointing=bool(checkpointing) and training,
        flash_attention=request.flash_attention,
        mixed_precision=mixed,
        optimizer=request.optimizer or "adamw",
        lora_rank=rank,
        lora_targets=tuple(request.lora_target_modules or ()),
        double_quant=(
            request.double_quant if request.double_quant is not None else task == "qlora"
        ),
        lora_dropout=request.lora_dropout is None or request.lora_dropout > 0,
        checkpoint_offload=_pinned_or(request.activation_offloading, framework.offloads_checkpoints)
        and training,
        optimizer_in_backward=_pinned_or(
            request.optimizer_in_backward, framework.optimizer_in_backward
        )
        and training,
        quantises_head=framework.quantises_head,
        fp32_unquantised=framework.upcasts_kbit_base
        and training
        and mixed
        and compute != "fp32"
        and weight_format in ("int4", "int8")
        and (request.quantization or "bitsandbytes") == "bitsandbytes",
        sixteen_bit_adapters=framework.sixteen_bit_kbit_adapters
        and task in ("lora", "qlora")
        and weight_format in ("int4", "int8"),
        keeps_gradients=framework.keeps_gradients and training,
        clips_gradients=framework.clips_gradients and training,
        compiled=bool(request.torch_compile) and training,
        decode_framework=framework.key,
        prefill_chunk_tokens=None if training else framework.prefill_chunk_tokens,
        tuple_kv_cache=framework.tuple_kv_cache and not training,
        quant_method=request.quantization or "bitsandbytes",
        framework_autocast=framework.autocast,
        # A batch job (tokens given): a service's concurrency is its traffic's.
        fills_kv_cache=not training
        and framework.max_num_seqs is not None
        and request.tokens is not None
        and request.batch_size is None
        and request.micro_batch is None,
        fp16_where_no_bf16=fp16_where_no_bf16,
        encoder_len=encoder_len,
        decoder_len=decoder_len,
        # A masked autoencoder's (ViT-MAE) fixed encoder length is its visible patches: its
        # job's tokens are still the image's.
        reads_text=not shape.encoder_positions or shape.family in ENCODER_ONLY_FAMILIES,
        **loss,
    )


def _trained_lengths(
    request: EstimateRequest, shape: ModelShape, task: str, loss: dict
) -> tuple[int, int]:
    """(tokens generated per request, tokens per sequence). GRPO trains on prompt +
    completion: its new_tokens are the completion's, not a decoder's target."""
    if rollouts.is_grpo(request) and task != "inference":
        return 0, request.seq_len + loss["rollout"].completion_tokens
    return _new_tokens(request, shape, task), request.seq_len


def encoder_decoder_lengths(
    request: EstimateRequest, shape: ModelShape, new_tokens: int
) -> tuple[int, int]:
    """Tokens per sequence an encoder-decoder's encoder reads and its decoder writes; (0, 0)
    for any other model. The encoder reads the request's sequence (T5's or BART's input), or
    the length the model always has (Whisper: 30 s of audio, 1,500 positions). The decoder
    writes the generated tokens in inference; in training the target, `new_tokens` where
    given, else as long as the input (the safe side: a summary or a label is shorter)."""
    if not (shape.is_encoder_decoder and shape.encoder_layers):
        return 0, 0
    seq_len = request.seq_len  # settled by with_sequence_length
    encoder = shape.encoder_positions or seq_len
    if shape.family in ENCODER_ONLY_FAMILIES:
        # A masked autoencoder (ViT-MAE): the encoder reads the visible patches, the decoder
        # all of them, in training and inference alike.
        return encoder, seq_len
    if request.task == "inference":
        return encoder, max(new_tokens, 1)
    return encoder, request.new_tokens or seq_len


def global_batch(request: EstimateRequest) -> int:
    """The global batch per optimizer step in sequences (inference: requests served together):
    the researcher's, else the task's default (batch_default). Every reader of the batch
    comes through here, so a batch left out never means one sequence per step."""
    if request.batch_size is not None:
        return request.batch_size
    default, _ = batch_default(request)
    # A pinned micro-batch is part of one step: the default batch holds at least one of it.
    batch = max(default, request.micro_batch or 1)
    if rollouts.is_grpo(request):  # and GRPO's whole groups of completions
        group = rollouts.generations(request)
        batch = group * math.ceil(batch / group)
    return batch


def batch_default(request: EstimateRequest) -> tuple[int, Constant]:
    """The batch assumed when none is given, and the constant it comes from: fine-tuning 8
    sequences, pre-training about 2^20 tokens in whole sequences, inference one request."""
    if request.task == "inference":
        return int(c.DEFAULT_INFERENCE_BATCH.value), c.DEFAULT_INFERENCE_BATCH
    if request.task == "pretrain":
        tokens = c.DEFAULT_PRETRAIN_BATCH_TOKENS.value
        sequences = math.ceil(tokens / request.seq_len)
        return min(max(sequences, 1), LIMITS["batch_size"]), c.DEFAULT_PRETRAIN_BATCH_TOKENS
    return int(c.DEFAULT_FINETUNE_BATCH.value), c.DEFAULT_FINETUNE_BATCH


def _lora_rank(request: EstimateRequest, shape: ModelShape, task: str) -> int:
    rank = request.lora_rank or c.DEFAULT_LORA_RANK
    if task in ("lora", "qlora") and rank > shape.hidden_size:
        raise RequestError(
            [
                (
                    "lora_rank",
                    f"LoRA rank {rank} is larger than the model's hidden size "
                    f"{shape.hidden_size}; a rank at most a fraction of it makes sense.",
                )
            ]
        )
    return rank


def _loss_fields(request: EstimateRequest, shape: ModelShape, framework, task: str) -> dict:
    """The Workload fields a training job's loss and objective set: the logits the loss keeps
    (_loss_terms) and, for a preference objective, the pair per sample, DPO's reference and
    the log-softmax its library keeps instead (preference.py)."""
    logits_per_entry, loss_chunk_tokens = _loss_terms(request.fused_loss, framework)
    errors = preference.model_errors(request, shape)
    if errors:
        raise RequestError(errors)
    copy, passes, precomputed = preference.reference_terms(request, task)
    if preference.is_preference(request):
        # Log-probabilities over the vocabulary, not the library's SFT loss.
        in_step = passes > 0 and not precomputed
        objective = request.training_objective or "sft"
        logits_per_entry = (
            0.0 if request.fused_loss else preference.logits_bytes(framework, in_step, objective)
        )
        loss_chunk_tokens = None
    fields = {
        "logits_per_entry": logits_per_entry,
        "loss_chunk_tokens": loss_chunk_tokens,
        "objective": request.training_objective or "sft",
        "sequences_per_sample": 2 if preference.is_pairs(request) else 1,
        "reference_copy": copy,
        "reference_passes": passes,
        "reference_precomputed": precomputed,
        "policy_passes": preference.policy_passes(request),
    }
    if rollouts.is_grpo(request):
        errors = rollouts.model_errors(request, shape)
        if errors:
            raise RequestError(errors)
        prompt, completion = request.seq_len, rollouts.completion_tokens(request)
        fields.update(
            # The completion's log-probabilities only (rollouts.py); a fused loss (Liger's
            # GRPO loss, use_liger_kernel) keeps none.
            logits_per_entry=0.0
            if request.fused_loss
            else rollouts.logits_per_entry(prompt, completion),
            loss_chunk_tokens=None,
            policy_passes=rollouts.IS_CORRECTION_PASSES,
            rollout=Rollout(
                prompt_tokens=prompt,
                completion_tokens=completion,
                generations=rollouts.generations(request),
                batch=global_batch(request),
            ),
            # GRPOTrainer loads its reference with from_pretrained (the checkpoint's 16 bits).
            reference_param_bytes=2.0 if copy else 0.0,
        )
    return fields


def _loss_terms(fused_loss: bool | None, framework) -> tuple[float | None, int | None]:
    """(bytes per token x vocabulary entry the loss keeps, tokens per loss chunk): a fused loss
    keeps no full logits (as Unsloth's profile says), a loss that is not fused keeps the fp32
    ones (None: the engine's 12 bytes), and without a pinned answer the library's own default,
    its chunking included (a fused loss said either way replaces the library's chunking)."""
    if fused_loss is None:
        return framework.logits_bytes, framework.loss_chunk_tokens
    return (0.0 if fused_loss else None), None


def run_loss_facts(request: EstimateRequest) -> tuple[int | None, bool | None]:
    """(the vocabulary its loss scores, whether the loss never forms the full logits) of a
    training job as the engine reads the request: what a trial run of it measured with, so
    that its benchmark transfers its speed without charging an unfused loss twice
    (BenchmarkSpec.vocab_size, fused_loss). (None, None) for inference; no vocabulary where
    the model cannot be counted or has no vocabulary head."""
    if request.task == "inference":
        return None, None
    framework, _ = framework_for(request.framework, True, needs_trl_trainer(request))
    fused = logits_never_formed(*_loss_terms(request.fused_loss, framework))
    try:
        shape = resolve_shape(request)
    except RequestError:
        return None, fused
    return (shape.vocab_size if shape.vocab_head and shape.vocab_size > 0 else None), fused


def _pinned_or(pinned: bool | None, default: bool) -> bool:
    """The researcher's value where given, else the library's default."""
    return default if pinned is None else pinned
