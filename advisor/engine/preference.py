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
"""

from __future__ import annotations

from advisor.engine.frameworks import Framework
from advisor.engine.models import Assumption, EstimateRequest, built
from advisor.engine.shape import ModelShape
from advisor.engine.words import plural

PREFERENCE_OBJECTIVES = ("dpo", "reference_free_preference")
# Libraries whose preference training is TRL's trainers with TRL's configs (Unsloth patches
# and runs TRL's DPOTrainer).
TRL_PREFERENCE_TRAINERS = frozenset({"trl", "unsloth"})
OBJECTIVE_NAMES = {
    "sft": "supervised fine-tuning",
    "dpo": "DPO (preference pairs against a frozen reference model)",
    "reference_free_preference": "preference pairs without a reference model (ORPO, SimPO, CPO)",
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


def is_preference(request: EstimateRequest) -> bool:
    return request.training_objective in PREFERENCE_OBJECTIVES


def logits_bytes(framework: Framework, reference_forward: bool) -> float:
    """Bytes per token and vocabulary entry of the preference loss (PREFERENCE_LOGITS_BYTES)."""
    with_ref, without = PREFERENCE_LOGITS_BYTES.get(framework.key, _FP32_STYLE)
    return with_ref if reference_forward else without


def reference_terms(request: EstimateRequest, task: str) -> tuple[bool, float, bool]:
    """(a frozen reference copy on the GPUs, reference forward passes per token trained on,
    whether its log-probabilities are computed once before training)."""
    if request.training_objective != "dpo":
        return False, 0.0, False
    precomputed = bool(request.precompute_reference)
    copy = task == "full_finetune" and not precomputed
    # Precomputed: one pass over the whole data however many epochs (or what share of one)
    # train on it.
    passes = 1.0 / request.epochs if precomputed else 1.0
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
            "DPOConfig / ORPOConfig / CPOConfig(gradient_checkpointing=False) (TRL's default "
            "is True)"
        )
    return framework.checkpointing_off


def library_words(framework: Framework, objective: str = "dpo") -> str:
    """How the library names the objective's trainer, for the assumptions and the script."""
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
    if not is_preference(request):
        return []
    name = shape.architecture or shape.family
    if shape.is_encoder_decoder and shape.encoder_layers:
        why = f"{name} is an encoder-decoder; preference training is modelled for decoders"
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


def assumption(wl, framework: Framework, reference_bytes: float | None) -> Assumption:
    """What the objective adds to the job, for the result's assumptions. `reference_bytes`:
    the reference copy per GPU on the recommended option (None: no option)."""
    parts = [
        f"{OBJECTIVE_NAMES[wl.objective]} with {library_words(framework, wl.objective)}: every "
        "sample is a "
        f"pair of {wl.seq_len:,}-token sequences, chosen and rejected, run in one pass, so a "
        f"micro-batch of {plural(wl.batch_size, 'pair')} holds "
        f"{plural(wl.batch_size * wl.sequences_per_sample, 'sequence')}; tokens count both"
    ]
    if wl.objective == "dpo":
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
            parts.append(
                f"the reference is {where}; its forward pass over the same sequences every "
                "step adds 2 FLOPs per parameter and token and its logits come on top of the "
                "policy's"
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
        source=SOURCE,
    )


# How a library's preference trainer turns on Liger Kernel's fused preference loss, which
# computes the policy's and the reference's log-probabilities from the hidden states in chunks:
# TRL's DPOConfig (use_liger_kernel since TRL 0.28; use_liger_loss before). LLaMA-Factory's
# enable_liger_kernel patches the model's cross-entropy, which its DPO trainer does not call.
FUSED_PREFERENCE_SWITCH = {"trl": "use_liger_kernel=True in DPOConfig"}


def logits_words(wl, framework: Framework, fused: bool) -> str:
    """The logits assumption's text for a preference objective."""
    if fused:
        return (
            "0 bytes per token x vocabulary entry: a fused preference loss (you said so; "
            f"Liger Kernel's, {FUSED_PREFERENCE_SWITCH['trl']} under TRL) computes the policy's "
            "and the reference's log-probabilities from the hidden states one chunk at a time"
        )
    return (
        f"{wl.logits_per_entry:g} bytes per token x vocabulary entry of every sequence: "
        f"{framework.name} gathers each response's log-probability from a log-softmax over "
        "the whole vocabulary"
        + (", the reference's on top of the policy's" if wl.reference_in_step else "")
        + "; the SFT loss's chunking or fusion does not apply"
    )
