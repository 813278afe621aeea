"""Online reinforcement learning with group sampling (GRPO and its loss variants: DAPO, Dr.
GRPO, GSPO, CISPO), as TRL's GRPOTrainer runs it with vLLM colocated on the training GPUs.

A step of GRPO does two things on every GPU:

- **Generates.** Each GPU's share of the step's completions (its generation batch: the
  per-device batch x `steps_per_generation`, which defaults to the gradient accumulation, so one
  generation per optimizer step) is sampled by a vLLM engine living in the same process
  (`use_vllm=True, vllm_mode="colocate"`): a prefill of the prompts and `max_completion_length`
  decoding steps, at the speed the engine gives vLLM (decode_speed.py), in 16-bit weights (vLLM
  loads the base checkpoint; TRL merges the adapters into it before each generation), or in
  bitsandbytes 4-bit over a QLoRA base, which TRL asks vLLM to quantise as it loads
  (`vllm_holds_4bit`; an 8-bit base TRL refuses). Prompts are repeated `num_generations` times;
  vLLM's prefix cache is not credited. TRL caps vLLM's batch at the generation batch
  (`max_num_seqs`) and its tokens per pass at 4,096 (`max_num_batched_tokens`). With vLLM's
  importance-sampling correction (`vllm_importance_sampling_correction`, on by default since TRL
  0.23) the trainer recomputes the old policy's log-probabilities with a forward pass without
  gradients over the whole generation batch (`Workload.policy_passes` 1).
- **Trains** on prompt + completion sequences as supervised fine-tuning would, except that the
  loss needs only the completion's log-probabilities: TRL asks the model for the logits of the
  completion positions alone (`logits_to_keep`), divides them by the temperature (a copy) and
  keeps selective_log_softmax's rows for backward: 6 bytes per completion token and vocabulary
  entry (`_get_per_token_logps_and_entropies`; the entropies are computed without gradients).

Memory: vLLM reserves `vllm_gpu_memory_utilization` of the GPU for itself (TRL's default 0.3)
beside the trainer's own peak: its copy of the weights, the KV cache of the generation
batch at full length, and its profile pass's activations for 4,096 tokens. The engine sizes
that need (`engine_bytes`) and the script sets the fraction to cover it.

Tensor parallelism (`vllm_tensor_parallel_size`, a recipe knob: `degrees`): TRL groups
consecutive ranks, gathers the group's prompts, and each engine generates for the whole group
with its weights split over the group's GPUs, then hands each rank its own completions. Each GPU
then holds 1/t of the weights and of the key/value heads (but at least one head) for t times the
sequences, and a decoding step reads 1/t of the weights for t GPUs' completions: the weight
reads, which bound small generation batches, are shared. Every forward pass pays two all-reduces
of the hidden states per layer (tensor_parallel.generation_collectives_seconds), timed from
vLLM's own kernel as measured (tensor_parallel.VLLM_ALL_REDUCE_US); for the smallest models at
small batches they cost more than the shared reads save, as the TRL team measured (Hugging Face
blog 'No GPU left behind', 2025-06-03: tensor parallelism slowed a 1.5B model and sped up a 7B
one).

Assumed from GRPOConfig: beta 0 (no reference model, the default since TRL 0.19) unless the
request asks for a KL penalty (`kl_penalty`: a frozen reference loaded afresh in 16 bits for
full fine-tuning, the adapters switched off otherwise, and its forward pass every step),
num_iterations 1, every completion running to `max_completion_length` (an upper bound: most
stop earlier at EOS), the reward computed by functions whose time is not counted. Not
modelled: TRL's default generation through `model.generate()` (use_vllm=False), which is far
slower; vLLM in server mode on GPUs of its own; vLLM's sleep mode (`vllm_enable_sleep_mode`),
which frees its memory while the model trains; a reward model on the GPUs.
"""

from __future__ import annotations

import math
from dataclasses import replace

from advisor.engine.activations import inference_activations
from advisor.engine.compute import decode_steps, inference_gpu_hours
from advisor.engine.memory_terms import Workload, kv_cache_bytes, quantised_base_bytes
from advisor.engine.models import (
    AcceleratorSpec,
    Assumption,
    EstimateRequest,
    NodeTypeSpec,
    built,
)
from advisor.engine.shape import ModelShape
from advisor.engine.tensor_parallel import VLLM_ALL_REDUCE_SOURCE, vllm_splits_heads
from advisor.engine.tensor_parallel import degrees as tp_degrees
from advisor.engine.tensor_parallel import generation_collectives_seconds as collectives_seconds
from advisor.engine.tensor_parallel import split as split_layout
from advisor.engine.words import plural

# GRPOConfig's defaults (trl/trainer/grpo_config.py): completions per prompt and the longest
# completion. The prompt has no default length since TRL dropped max_prompt_length; 512 was
# its default before (GRPOConfig max_prompt_length, TRL 0.14-0.2x).
DEFAULT_GENERATIONS = 8
DEFAULT_COMPLETION_TOKENS = 256
DEFAULT_PROMPT_TOKENS = 512
# TRL's colocated LLM(max_num_batched_tokens=4096): vLLM's tokens per forward pass, which its
# start-up profile runs once to size the memory it keeps beside the KV cache.
VLLM_BATCHED_TOKENS = 4096
# GRPOConfig vllm_gpu_memory_utilization: the share of the GPU vLLM takes when not told.
TRL_VLLM_MEMORY_SHARE = 0.3
# Bytes per completion token and vocabulary entry of the loss (module docstring).
LOGITS_BYTES_PER_COMPLETION_ENTRY = 6.0
# TRL's importance-sampling correction's forward pass without gradients per token trained.
IS_CORRECTION_PASSES = 1.0

SOURCE = (
    "huggingface/trl trl/trainer/grpo_trainer.py (_generate_and_score_completions, "
    "_get_per_token_logps_and_entropies, the colocated LLM(...) arguments) and grpo_config.py; "
    "Shao et al. 2024 (DeepSeekMath), arXiv:2402.03300; Hugging Face blog 'No GPU left behind: "
    "co-located vLLM in TRL', 2025-06-03"
)


def is_grpo(request: EstimateRequest) -> bool:
    return request.training_objective == "grpo"


def generations(request: EstimateRequest) -> int:
    return request.generations_per_prompt or DEFAULT_GENERATIONS


def completion_tokens(request: EstimateRequest) -> int:
    return request.new_tokens or DEFAULT_COMPLETION_TOKENS


def logits_per_entry(prompt: int, completion: int) -> float:
    """The loss's bytes per token of the whole sequence and vocabulary entry: TRL keeps them for
    the completion's positions only."""
    return LOGITS_BYTES_PER_COMPLETION_ENTRY * completion / max(prompt + completion, 1)


def vllm_holds_4bit(wl: Workload) -> bool:
    """A QLoRA base: TRL loads the colocated vLLM with quantization="bitsandbytes" when the
    model has bitsandbytes 4-bit layers (trl/generation/vllm_generation.py, and GRPOTrainer
    before it), so vLLM quantises its copy to 4-bit as it loads."""
    return wl.weight_format == "int4" and wl.quant_method == "bitsandbytes"


def rollout_workload(wl: Workload, sequences: int) -> Workload:
    """What vLLM runs for one GPU's generation batch: `sequences` prompts (each repeated
    completion counted) of the prompt's length, generating the completion, in 16-bit (4-bit
    bitsandbytes over a QLoRA base, its LM head kept 16-bit as vLLM's loader does). A new
    inference workload, so nothing else of the training (its loss or objective) carries
    over."""
    sixteen = wl.compute_dtype if wl.compute_dtype in ("bf16", "fp16") else "bf16"
    stored = "int4" if vllm_holds_4bit(wl) else sixteen
    return Workload(
        task="inference",
        precision=stored,
        weight_format=stored,
        compute_dtype=sixteen,
        quant_method="bitsandbytes",
        quantises_head=False,
        batch_size=max(sequences, 1),
        seq_len=wl.rollout.prompt_tokens,
        new_tokens=wl.rollout.completion_tokens,
        gradient_checkpointing=False,
        flash_attention=wl.flash_attention,
        mixed_precision=False,
        optimizer=wl.optimizer,
        lora_rank=0,
        decode_framework="vllm",
        prefill_chunk_tokens=VLLM_BATCHED_TOKENS,
    )


def per_gpu_sequences(batch: int, strategy: str, n: int) -> int:
    """Completions each GPU's vLLM generates at once: its data-parallel rank's share of the
    step's `batch`."""
    _, _, dp = split_layout(strategy, n)
    return math.ceil(max(batch, 1) / max(dp, 1))


def vllm_weight_bytes(shape: ModelShape, wl: Workload) -> float:
    """vLLM's copy of the weights, whole: the base checkpoint in 16 bits, or in bitsandbytes
    4-bit with its constants over a QLoRA base (`vllm_holds_4bit`)."""
    if not vllm_holds_4bit(wl):
        return shape.params_total * 2
    weights, constants, _ = quantised_base_bytes(shape, rollout_workload(wl, 1))
    return weights + constants


def engine_bytes(shape: ModelShape, wl: Workload, sequences: int, degree: int = 1) -> float:
    """What the colocated vLLM engine needs on one GPU for `sequences` completions at once:
    its weights (`vllm_weight_bytes`), their KV cache at full length, and its profile pass's
    activations.
    With vLLM's tensor parallelism over `degree` GPUs (vllm_tensor_parallel_size) the group
    generates its GPUs' completions together: the weights (the vocabulary-parallel embedding
    and head included) and the projections' activations are split `degree` ways, and so are
    the key/value heads, each GPU keeping at least one (vLLM replicates them where there are
    fewer heads than GPUs)."""
    gen = rollout_workload(wl, sequences * degree)
    profile = replace(gen, batch_size=1, seq_len=VLLM_BATCHED_TOKENS, new_tokens=0)
    return (
        vllm_weight_bytes(shape, wl) / degree
        + kv_cache_bytes(shape, gen, tp=degree)
        + inference_activations(shape, profile, tp=degree)
    )


def degrees(shape: ModelShape, gpus_per_node: int) -> tuple[int, ...]:
    """vllm_tensor_parallel_size values open on a node: 1, and each degree the node's GPUs
    split into (tensor_parallel.degrees, at most 8) that splits the attention heads (vLLM
    splits the query heads evenly, and the key/value heads evenly or replicated whole). TRL
    refuses a degree that does not divide the world size, and its groups are consecutive
    ranks, so a group stays within a node (ParallelPlanning.plan_generation keeps the GPU
    counts the degree divides)."""
    return (1,) + tuple(t for t in tp_degrees(gpus_per_node) if vllm_splits_heads(shape, t))


def model_errors(request: EstimateRequest, shape: ModelShape) -> list[tuple[str, str]]:
    """A pinned vLLM degree (generation_tensor_parallel) that the model's heads do not allow
    on any node: vLLM refuses to start with it."""
    pinned = request.generation_tensor_parallel
    if pinned is None or vllm_splits_heads(shape, pinned):
        return []
    heads, kv_heads = shape.num_attention_heads, shape.num_kv_heads
    fits = [t for t in range(2, 9) if vllm_splits_heads(shape, t)]
    split = f"{heads} attention heads" + (
        f" and {plural(kv_heads, 'key/value head')}" if kv_heads != heads else ""
    )
    could = f" (up to 8 GPUs: {', '.join(map(str, fits))})" if fits else ""
    return [
        (
            "generation_tensor_parallel",
            f"vLLM cannot split the model's {split} over {pinned} GPUs; choose a degree that "
            f"divides them{could}, or leave generation_tensor_parallel empty.",
        )
    ]


def memory_share(need_bytes: float, capacity_bytes: float) -> float:
    """vllm_gpu_memory_utilization covering `need_bytes` on a GPU of `capacity_bytes`, rounded
    up to a hundredth (what the rounding adds, under 1 % of the GPU, comes out of the training's
    headroom)."""
    if capacity_bytes <= 0:
        return TRL_VLLM_MEMORY_SHARE
    return min(math.ceil(need_bytes / capacity_bytes * 100) / 100, 0.95)


def generation_gpu_hours(
    shape: ModelShape,
    wl: Workload,
    acc: AcceleratorSpec,
    node: NodeTypeSpec,
    tokens: float,
    global_batch: int,
    per_gpu: int,
    n: int,
    speed: tuple[float, float],
    degree: int = 1,
) -> float:
    """GPU hours of every generation round of a job of `tokens` trained tokens: one round per
    optimizer step of `global_batch` sequences, each GPU generating its `per_gpu` at once, or
    each group of `degree` GPUs their completions together over vLLM's tensor parallelism,
    whose all-reduces every GPU of the group waits for
    (tensor_parallel.generation_collectives_seconds). `speed`: the
    chip's peak TFLOP/s and the prompt pass's utilisation."""
    rounds = max(tokens / max(global_batch * wl.seq_len, 1), 1.0)
    group = per_gpu * degree
    gen = rollout_workload(wl, group)
    peak, util = speed
    waits = collectives_seconds(shape, gen, degree, decode_steps(gen), node, acc)
    one_round = inference_gpu_hours(
        shape, gen, acc, group * gen.tokens_per_request, peak, util, degree, 1.0,
        collectives=waits, tp=degree,
    )  # fmt: skip
    return rounds * one_round * n / degree


def assumption(
    wl: Workload, share: float | None, need_bytes: float | None, degree: int = 1
) -> Assumption:
    """What GRPO adds, for the result's assumptions. `share`/`need_bytes`/`degree`: vLLM's on
    the recommended option (None: no option)."""
    prompt, completion = wl.rollout.prompt_tokens, wl.rollout.completion_tokens
    parts = [
        "GRPO with TRL's GRPOTrainer and vLLM colocated on the training GPUs (use_vllm=True, "
        f"vllm_mode='colocate'): {plural(wl.rollout.generations, 'completion')} per "
        f"prompt, each a {prompt:,}-token prompt and up to {completion:,} generated tokens, "
        "counted at full length; every optimizer step first generates its batch (vLLM's "
        "prefill and one decoding step per token, in "
        + (
            "bitsandbytes 4-bit weights, as TRL loads vLLM over a 4-bit base"
            if vllm_holds_4bit(wl)
            else "16-bit weights"
        )
        + "), recomputes the "
        "log-probabilities without gradients for vLLM's importance-sampling correction (2 FLOPs "
        "per parameter and token), then trains on prompt + completion with the loss over the "
        "completion only"
    ]
    if wl.reference_passes:
        where = (
            "a frozen 16-bit copy of the model loaded beside the policy (from_pretrained)"
            if wl.reference_copy
            else "the same model with its adapters switched off"
        )
        parts.append(
            f"a KL penalty (beta > 0, you said so): the reference is {where}, and its forward "
            "pass over every completion with the generation batch adds 2 FLOPs per parameter "
            "and token"
        )
    else:
        parts.append("beta 0: no reference model (TRL's default)")
    if share is not None and need_bytes is not None:
        parts.append(
            f"vLLM needs {need_bytes / 1e9:.1f} GB per GPU on the recommended option (its weights, "
            f"the generation batch's KV cache, its profile pass): vllm_gpu_memory_utilization "
            f"{share:.2f}"
        )
        parts.append(
            f"each vLLM engine spans {degree} GPUs (vllm_tensor_parallel_size {degree}), and "
            "every forward pass all-reduces the hidden states twice per layer, timed from "
            "vLLM's all-reduce as measured on H100"
            if degree > 1
            else "one vLLM engine per GPU"
        )
    parts.append(
        "not counted: the reward functions' time, vLLM's start-up, its CUDA graphs' capture "
        "memory and the weight synchronisation; "
        "TRL's default generation through model.generate() (use_vllm=False) is many times "
        "slower and is not estimated"
    )
    source = SOURCE + (f"; {VLLM_ALL_REDUCE_SOURCE}" if degree > 1 else "")
    return built(Assumption, name="Training objective", value="; ".join(parts), source=source)


def logits_words(wl: Workload, fused: bool) -> str:
    """The logits assumption's text for GRPO."""
    if fused:
        return (
            "0 bytes per token x vocabulary entry: Liger Kernel's fused GRPO loss (you said so; "
            "use_liger_kernel=True in GRPOConfig) computes the completion's log-probabilities "
            "from the hidden states one chunk at a time"
        )
    return (
        f"{LOGITS_BYTES_PER_COMPLETION_ENTRY:g} bytes per completion token x vocabulary entry: "
        "TRL asks the model for the logits of the completion's positions only (logits_to_keep), "
        "divides them by the sampling temperature (a copy) and keeps selective_log_softmax's "
        f"rows for backward; the prompt's {wl.rollout.prompt_tokens:,} positions keep none"
    )
