"""Preference optimisation: DPO and the objectives without a reference model (ORPO, SimPO, CPO).

What changes against supervised fine-tuning of the same model, as the libraries run it:

- **Two sequences per sample.** Every trainer of pairs concatenates the chosen and the
  rejected sequence into one forward pass (TRL's DPOTrainer.concatenated_forward, "to avoid
  doing two forward passes, because it's faster for FSDP"; LLaMA-Factory's and torchtune's
  recipes do the same), so a micro-batch of B pairs holds the activations and logits of 2B
  sequences. The engine's batch and micro-batch count pairs; its tokens count every sequence.
- **A reference model (DPO).** Full fine-tuning keeps a frozen copy of the starting model on
  each GPU (TRL `create_reference_model`, a deep copy in the policy's own dtype; under ZeRO-3
  it is sharded like the policy); adapter training uses the same model with its adapters
  switched off (`disable_adapter()`), so no copy. The reference runs a forward pass over the
  same 2B sequences every step, after the policy's forward, while the policy's activations
  are held for backward: its logits come on top of the policy's. DPOConfig
  `precompute_ref_log_probs=True` runs it once over the data before training instead (no
  copy, no per-step pass; TRL refuses it under DeepSpeed ZeRO-3).
- **The log-probabilities, not a cross-entropy.** The sequence log-probability is gathered
  from a log-softmax over the whole vocabulary, which each library keeps differently
  (`PREFERENCE_LOGITS_BYTES`); the chunked or fused SFT losses (TRL's chunked_nll, Unsloth's
  Cut Cross-Entropy) do not apply. Liger Kernel's fused preference losses (DPOConfig
  `use_liger_kernel`, `use_liger_loss` before TRL 0.28) compute policy and reference
  log-probabilities in chunks from the hidden states: a fused loss (request `fused_loss`)
  keeps no logits. ORPO's added NLL term on the chosen answer reuses the same logits and is
  not counted apart.
- **KTO: one labelled response per sample, and a KL estimate.** KTO (Ethayarajh et al. 2024)
  learns from single responses marked desirable or undesirable, so a sample is one sequence.
  Its loss subtracts an estimate of the policy's KL divergence from the reference, which the
  trainers take from mismatched pairs: each prompt with the next example's response in the
  same batch (TRL's _get_kl_dataset shifts the responses by one; LLaMA-Factory does the same).
  Every step the policy runs a forward pass without gradients over those KL sequences
  (`KTO_POLICY_PASSES`) and the reference runs two, over the KL sequences and the real ones.
  With precompute_ref_log_probs (TRL's KTOConfig) the reference's two passes run once before
  training; the policy's KL pass stays in every step. TRL refuses a per-device batch of one
  ("Actual (not effective) batch size must be > 1. KTO will not work properly because the KL
  term will be equivalent to the implied reward"): `min_micro_batch`.
"""

from __future__ import annotations

from advisor.engine.frameworks import Framework
from advisor.engine.models import Assumption, EstimateRequest, built
from advisor.engine.shape import ModelShape
from advisor.engine.words import plural

PREFERENCE_OBJECTIVES = ("dpo", "reference_free_preference", "kto")
# Objectives whose samples are pairs (chosen and rejected in one pass).
PAIR_OBJECTIVES = ("dpo", "reference_free_preference")
# Objectives scored against a frozen reference model, and the reference's forward passes per
# token trained on when it runs every step: DPO's over the pair, KTO's over the real and the
# KL sequences.
REFERENCE_PASSES = {"dpo": 1.0, "kto": 2.0}
# KTO's policy forward pass without gradients over the KL sequences, per token trained on.
KTO_POLICY_PASSES = 1.0
# Libraries whose preference training is TRL's trainers with TRL's configs (Unsloth patches
# and runs TRL's DPOTrainer).
TRL_PREFERENCE_TRAINERS = frozenset({"trl", "unsloth"})
OBJECTIVE_NAMES = {
    "sft": "supervised fine-tuning",
    "dpo": "DPO (preference pairs against a frozen reference model)",
    "reference_free_preference": "preference pairs without a reference model (ORPO, SimPO, CPO)",
    "kto": "KTO (single responses labelled desirable or undesirable, against a frozen "
    "reference model)",
    "grpo": "GRPO (a group of completions sampled per prompt and scored by reward functions, "
    "every step)",
}

# Bytes per (token x vocabulary entry) a library's preference loss holds at its peak in 16-bit
# training, (with the reference's forward pass in the step, without one), per sequence:
# - TRL's DPOTrainer (and Unsloth's and Axolotl's, which run it): 16-bit logits, then
#   selective_log_softmax one row at a time "to reduce peak mem consumption", keeping each
#   row's 16-bit log-softmax for backward (2) while the logits exist (2); the reference's
#   16-bit logits (2) meet the policy's kept log-softmax (2). trl/trainer/dpo_trainer.py
#   concatenated_forward, trl/trainer/utils.py selective_log_softmax.
# - torchtune's *_dpo_* recipes: the model's 16-bit logits, which the recipe keeps for its
#   metrics (2), and a full log-softmax over them (2, torchtune/rlhf/_utils.py
#   get_batch_log_probs); the reference repeats both under no_grad (4 more).
# - LLaMA-Factory's CustomDPOTrainer: `.logits.to(torch.float32)` (4, kept through the step
#   as chosen_logits / rejected_logits) and a full fp32 log-softmax (4); the reference's
#   pass does the same (8 more). src/llamafactory/train/dpo/trainer.py concatenated_forward.
#   The reference implementation (eric-mitchell/direct-preference-optimization, trainers.py)
#   upcasts the same way; libraries without a preference trainer of their own (Lightning,
#   DeepSpeed, Megatron: the researcher's code) are taken to follow it.
_TRL_STYLE = (4.0, 4.0)
_FP32_STYLE = (16.0, 8.0)
PREFERENCE_LOGITS_BYTES = {
    "trl": _TRL_STYLE,
    "unsloth": _TRL_STYLE,
    "axolotl": _TRL_STYLE,
    "torchtune": (8.0, 4.0),
    "llama_factory": _FP32_STYLE,
}

# The same for KTO, per sequence:
# - TRL's KTOTrainer (trl/experimental/kto/kto_trainer.py; Unsloth and Axolotl run it): the
#   policy's 16-bit logits, selective_log_softmax's kept rows (2) and the desirable and
#   undesirable logits, copied out with index_select and kept for the metrics (2); once the
#   forward pass returns, the logits themselves are freed. The policy's forward peaks at 6
#   while the copies are made; the reference's forward then adds its own logits and copies
#   (4). The policy's KL pass runs before the policy's forward, when nothing is held yet.
# - LLaMA-Factory's CustomKTOTrainer (src/llamafactory/train/kto/trainer.py): the policy's
#   fp32 log-softmax kept for backward (4), then the KL pass without gradients after it, and
#   the reference's two, each holding `.logits.to(torch.float32)` (4) and its fp32
#   log-softmax (4) at once: 12 with or without a precomputed reference (it has none).
# torchtune has no KTO recipe (request_checks refuses it).
# Libraries whose KTO is TRL's KTOTrainer.
TRL_KTO_TRAINERS = frozenset({"trl", "unsloth", "axolotl"})
_FP32_KTO = (12.0, 12.0)
KTO_LOGITS_BYTES = {
    **dict.fromkeys(TRL_KTO_TRAINERS, (8.0, 6.0)),
    "llama_factory": _FP32_KTO,
}
# Libraries that run KTO (a preference trainer of their own, or TRL's).
KTO_LIBRARIES = frozenset(KTO_LOGITS_BYTES)


def is_preference(request: EstimateRequest) -> bool:
    return request.training_objective in PREFERENCE_OBJECTIVES


def needs_trl_trainer(request: EstimateRequest) -> bool:
    """An objective the Transformers Trainer has no loss for, which TRL's trainers run: the
    preference objectives and GRPO (rollouts.py). "Not sure" means TRL for them."""
    return request.training_objective in (*PREFERENCE_OBJECTIVES, "grpo")


def is_pairs(request: EstimateRequest) -> bool:
    """The objective's samples are pairs whose two sequences run in one pass."""
    return request.training_objective in PAIR_OBJECTIVES


def logits_bytes(framework: Framework, reference_forward: bool, objective: str = "dpo") -> float:
    """Bytes per token and vocabulary entry of the preference loss (PREFERENCE_LOGITS_BYTES,
    KTO_LOGITS_BYTES)."""
    if objective == "kto":
        with_ref, without = KTO_LOGITS_BYTES.get(framework.key, _FP32_KTO)
    else:
        with_ref, without = PREFERENCE_LOGITS_BYTES.get(framework.key, _FP32_STYLE)
    return with_ref if reference_forward else without


def policy_passes(request: EstimateRequest) -> float:
    """The policy's forward passes without gradients per token trained on: KTO's over its KL
    sequences, every step."""
    return KTO_POLICY_PASSES if request.training_objective == "kto" else 0.0


def min_micro_batch(framework: Framework, objective: str) -> int:
    """The smallest per-GPU micro-batch the library accepts for the objective: TRL's
    KTOTrainer estimates the KL term within a device's batch and refuses one example."""
    if objective == "kto" and framework.key in TRL_KTO_TRAINERS:
        return 2
    return 1


def reference_terms(request: EstimateRequest, task: str) -> tuple[bool, float, bool]:
    """(a frozen reference copy on the GPUs, reference forward passes per token trained on,
    whether its log-probabilities are computed once before training)."""
    per_step = REFERENCE_PASSES.get(request.training_objective or "sft")
    if request.training_objective == "grpo" and request.kl_penalty:
        # GRPO's KL penalty (beta > 0): the reference's log-probabilities over every
        # completion, computed with the generation batch (grpo_trainer.py).
        per_step = 1.0
    if per_step is None:
        return False, 0.0, False
    precomputed = bool(request.precompute_reference)
    copy = task == "full_finetune" and not precomputed
    # Precomputed: one pass over the whole data however many epochs (or what share of one)
    # train on it.
    passes = per_step / request.epochs if precomputed else per_step
    return copy, passes, precomputed


# Libraries whose preference trainer runs the reference every step, with no switch to
# compute its log-probabilities beforehand (LLaMA-Factory's compute_reference_log_probs,
# torchtune's DPO recipes).
NO_PRECOMPUTE = frozenset({"torchtune", "llama_factory"})


def checkpointing_off(framework: Framework) -> str:
    """How a script turns off the checkpointing the library applies to a preference job:
    TRL's preference trainers take it from their own configs, not SFTConfig."""
    if framework.key == "trl":
        return (
            "DPOConfig / ORPOConfig / CPOConfig / KTOConfig / GRPOConfig"
            "(gradient_checkpointing=False) (TRL's default is True)"
        )
    return framework.checkpointing_off


def library_words(framework: Framework, objective: str = "dpo") -> str:
    """How the library names the objective's trainer, for the assumptions and the script."""
    if objective == "kto":
        return {
            "trl": "TRL's KTOTrainer (trl.experimental.kto)",
            "unsloth": "TRL's KTOTrainer under Unsloth",
            "axolotl": "Axolotl's rl: kto (TRL's KTOTrainer)",
            "llama_factory": "LLaMA-Factory stage: kto",
        }.get(framework.key, f"your own KTO loss under {framework.name}")
    free = objective == "reference_free_preference"
    return {
        "trl": "TRL's ORPOTrainer or CPOTrainer (loss_type simpo)" if free else "TRL's DPOTrainer",
        "unsloth": "Unsloth's patched TRL trainers (PatchDPOTrainer)",
        "axolotl": f"Axolotl's rl: {'orpo or simpo' if free else 'dpo'} (TRL's trainers)",
        "torchtune": "torchtune's lora_dpo_* / full_dpo_distributed recipes"
        + (" with a reference-free loss" if free else ""),
        "llama_factory": "LLaMA-Factory stage: dpo, pref_loss "
        + ("orpo or simpo" if free else "sigmoid"),
    }.get(framework.key, f"your own preference loss under {framework.name}")


def model_errors(request: EstimateRequest, shape: ModelShape) -> list[tuple[str, str]]:
    """A preference objective scores each response by the model's own next-token
    probabilities: it needs a decoder with its LM head. Encoders (BERT, ViT, wav2vec 2.0) have
    none to score with, and encoder-decoders (T5, BART, Whisper) are not modelled for it."""
    if not needs_trl_trainer(request):
        return []
    name = shape.architecture or shape.family
    if shape.is_encoder_decoder and shape.encoder_layers:
        why = f"{name} is an encoder-decoder; this objective is modelled for decoders"
    elif not shape.vocab_head:
        why = f"{name} has no language-model head to score responses with"
    else:
        return []
    return [
        (
            "training_objective",
            f"{why}. Use a causal language model (Llama, Qwen, Mistral, ...) or "
            "training_objective sft.",
        )
    ]


SOURCE = (
    "huggingface/trl trl/trainer/dpo_trainer.py (concatenated_forward: chosen and rejected in "
    "one pass; create_reference_model unless PEFT or precompute_ref_log_probs; null_ref_context "
    "disables the adapters; the reference's log-probabilities after the policy's forward) and "
    "dpo_config.py; hiyouga/LLaMA-Factory src/llamafactory/train/dpo/trainer.py; pytorch/"
    "torchtune torchtune/rlhf/_utils.py get_batch_log_probs; Rafailov et al. 2023, "
    "arXiv:2305.18290"
)
KTO_SOURCE = (
    "huggingface/trl trl/experimental/kto/kto_trainer.py (_get_kl_dataset, _compute_kl_logps, "
    "forward, get_batch_loss_metrics; the per-device batch check) and kto_config.py; "
    "hiyouga/LLaMA-Factory src/llamafactory/train/kto/trainer.py; Ethayarajh et al. 2024, "
    "arXiv:2402.01306"
)


def assumption(wl, framework: Framework, reference_bytes: float | None) -> Assumption:
    """What the objective adds to the job, for the result's assumptions. `reference_bytes`:
    the reference copy per GPU on the recommended option (None: no option)."""
    trainer = f"{OBJECTIVE_NAMES[wl.objective]} with {library_words(framework, wl.objective)}"
    if wl.objective == "kto":
        parts = [
            f"{trainer}: every sample is one {wl.seq_len:,}-token sequence, a prompt and a "
            "response labelled desirable or undesirable; every step the policy also runs a "
            "forward pass without gradients over the KL sequences (each prompt with another "
            "example's response from the same batch), 2 FLOPs per parameter and token"
        ]
        if min_micro_batch(framework, "kto") > 1:
            parts.append("the library needs at least 2 examples per GPU per pass for that")
    else:
        parts = [
            f"{trainer}: every sample is a pair of {wl.seq_len:,}-token sequences, chosen and "
            f"rejected, run in one pass, so a micro-batch of {plural(wl.batch_size, 'pair')} "
            f"holds {plural(wl.batch_size * wl.sequences_per_sample, 'sequence')}; tokens "
            "count both"
        ]
    over = "the real and the KL sequences" if wl.objective == "kto" else "the same sequences"
    if wl.objective in REFERENCE_PASSES:
        if wl.reference_precomputed:
            parts.append(
                "the reference model's log-probabilities computed once before training "
                "(precompute_ref_log_probs=True): no reference on the GPUs during training, "
                f"its forward pass ({wl.reference_passes:.2g} per token trained) counted in "
                "the GPU hours"
            )
        else:
            where = (
                f"a frozen copy of the model, {reference_bytes / 1e9:.1f} GB per GPU on the "
                "recommended option"
                if wl.reference_copy and reference_bytes is not None
                else (
                    "a frozen copy of the model on each GPU"
                    if wl.reference_copy
                    else "the same model with its adapters switched off (no copy)"
                )
            )
            passes = "forward passes" if wl.reference_passes > 1 else "forward pass"
            parts.append(
                f"the reference is {where}; its {passes} over {over} every step "
                f"add{'' if wl.reference_passes > 1 else 's'} {2 * wl.reference_passes:g} FLOPs "
                "per parameter and token and its logits come on top of the policy's"
                + (
                    ""
                    if framework.key in NO_PRECOMPUTE
                    else " (precompute_ref_log_probs=True computes it once beforehand and "
                    "drops the copy)"
                )
            )
    return built(
        Assumption,
        name="Training objective",
        value="; ".join(parts),
        source=KTO_SOURCE if wl.objective == "kto" else SOURCE,
    )


# How a library's preference trainer turns on Liger Kernel's fused preference loss, which
# computes the policy's and the reference's log-probabilities from the hidden states in chunks:
# TRL's DPOConfig (use_liger_kernel since TRL 0.28; use_liger_loss before). LLaMA-Factory's
# enable_liger_kernel patches the model's cross-entropy, which its DPO trainer does not call.
FUSED_PREFERENCE_SWITCH = {"trl": "use_liger_kernel=True in DPOConfig"}


def fused_switch(library: str, objective: str) -> str | None:
    """FUSED_PREFERENCE_SWITCH of library `library` (a framework key) in the objective's own
    config (TRL's KTOConfig has the same use_liger_kernel switch, LigerFusedLinearKTOLoss)."""
    switch = FUSED_PREFERENCE_SWITCH.get(library)
    if switch and objective in ("kto", "grpo"):
        return switch.replace("DPOConfig", f"{objective.upper()}Config")
    return switch


def logits_words(wl, framework: Framework, fused: bool) -> str:
    """The logits assumption's text for a preference objective."""
    if fused:
        return (
            "0 bytes per token x vocabulary entry: a fused preference loss (you said so; "
            f"Liger Kernel's, {fused_switch('trl', wl.objective)} under TRL) computes the "
            "policy's and the reference's log-probabilities from the hidden states one chunk "
            "at a time"
        )
    return (
        f"{wl.logits_per_entry:g} bytes per token x vocabulary entry of every sequence: "
        f"{framework.name} gathers each response's log-probability from a log-softmax over "
        "the whole vocabulary"
        + (", the reference's on top of the policy's" if wl.reference_in_step else "")
        + (
            "; TRL also keeps index_select copies of the desirable and undesirable logits"
            if wl.objective == "kto" and framework.key in TRL_KTO_TRAINERS
            else ""
        )
        + "; the SFT loss's chunking or fusion does not apply"
    )
