"""Preference training (DPO, and ORPO / SimPO without a reference) sized as the libraries run
it: a pair's chosen and rejected sequences in one pass, DPO's frozen reference copy for full
fine-tuning (none with adapters, none when its log-probabilities are precomputed), the
reference's forward pass every step, and each library's log-softmax over the vocabulary."""

from __future__ import annotations

import pytest

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from advisor.engine.request_checks import RequestError, check_request
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog, on_one_a100_80gb

QWEN_05B = find_bundled("Qwen/Qwen2.5-0.5B").config
LLAMA3_8B = find_bundled("meta-llama/Meta-Llama-3-8B").config
MISTRAL_7B = find_bundled("mistralai/Mistral-7B-v0.1").config


def one_gpu(objective: str | None, *, config=QWEN_05B, task="full_finetune", **fields):
    """The single-A100-80GB option, with the recipe pinned so only the objective differs."""
    fields = {
        "framework": "trl",
        "seq_len": 1024,
        "batch_size": 8,
        "micro_batch": 2,
        "gradient_checkpointing": True,
        "optimizer": "adamw",
        **fields,
    }
    return on_one_a100_80gb(
        config=config, task=task, tokens=10**8, training_objective=objective, **fields
    )


def test_a_pair_holds_twice_the_activations_of_one_sequence():
    _, sft = one_gpu("sft")
    _, pairs = one_gpu("reference_free_preference")
    assert pairs.memory.activations == pytest.approx(2 * sft.memory.activations, rel=0.02)
    assert pairs.memory.weights == sft.memory.weights  # no reference


def test_full_dpo_keeps_a_reference_copy_in_the_policys_dtype():
    """TRL deep-copies the policy: under AMP the Trainer holds it in fp32, so 4 bytes per
    parameter more on one GPU; precomputing the reference's log-probabilities drops it."""
    _, free = one_gpu("reference_free_preference")
    _, dpo = one_gpu("dpo")
    _, precomputed = one_gpu("dpo", precompute_reference=True)
    params = 494_032_768  # Qwen2.5-0.5B
    assert dpo.memory.weights - free.memory.weights == pytest.approx(params * 4, rel=0.01)
    assert precomputed.memory.weights == free.memory.weights


def test_dpo_with_adapters_uses_the_model_without_them_as_reference():
    _, free = one_gpu("reference_free_preference", config=LLAMA3_8B, task="lora")
    _, dpo = one_gpu("dpo", config=LLAMA3_8B, task="lora")
    assert dpo.memory.weights == free.memory.weights


def test_zero3_shards_the_reference_like_the_policy():
    """Mistral 7B on 8 GPUs: 14.5 GB of 16-bit reference (DeepSpeed casts the model), an
    eighth on each."""
    request = EstimateRequest(
        config=MISTRAL_7B, task="full_finetune", training_objective="dpo", framework="trl",
        seq_len=1024, batch_size=128, micro_batch=8, gradient_checkpointing=True,
        strategy="zero3", num_gpus=8, tokens=10**8, system="stanage",
    )  # fmt: skip
    other = request.model_copy(update={"training_objective": "reference_free_preference"})
    dpo = estimate(request, default_catalog()).options[0]
    free = estimate(other, default_catalog()).options[0]
    assert dpo.strategy == free.strategy == "zero3"
    assert dpo.num_gpus == 8
    assert dpo.memory.weights - free.memory.weights == pytest.approx(7.24e9 * 2 / 8, rel=0.01)


def test_the_reference_forward_adds_a_quarter_to_a_checkpointed_step():
    """Per token: the policy's 6 FLOPs per parameter and 2 recomputed, the reference's 2 more
    (10 against 8); a precomputed reference costs the same once per epoch."""
    _, free = one_gpu("reference_free_preference")
    _, dpo = one_gpu("dpo")
    assert dpo.gpu_hours / free.gpu_hours == pytest.approx(1.25, abs=0.04)
    _, two_epochs = one_gpu("dpo", precompute_reference=True, epochs=2)
    _, free_two = one_gpu("reference_free_preference", epochs=2)
    assert two_epochs.gpu_hours / free_two.gpu_hours == pytest.approx(1.125, abs=0.03)


@pytest.mark.parametrize(
    ("framework", "per_entry"),
    [("trl", 4), ("torchtune", 8), ("llama_factory", 16), ("lightning", 16)],
)
def test_each_library_keeps_its_own_log_softmax(framework, per_entry):
    """Two pairs of 1,024 tokens, 151,936 vocabulary entries, four sequences."""
    fields = {"framework": framework}
    if framework == "torchtune":
        fields.update(mixed_precision=False)
    _, option = one_gpu("dpo", **fields)
    assert option.memory.logits == pytest.approx(4 * 1024 * 151_936 * per_entry, rel=0.01)


def test_a_fused_preference_loss_keeps_no_logits():
    _, option = one_gpu("dpo", fused_loss=True)
    assert option.memory.logits == 0


def test_not_sure_and_the_trainer_mean_trls_dpo_trainer():
    result, _ = one_gpu("dpo", framework="not_sure")
    assert result.framework.key == "trl"
    assert result.framework.assumed
    result, _ = one_gpu("dpo", framework="hf_trainer")
    assert result.framework.key == "trl"
    assert any("no preference loss" in w for w in result.warnings)


def test_the_result_says_what_the_objective_adds():
    result, option = one_gpu("dpo")
    objective = next(a for a in result.assumptions if a.name == "Training objective")
    assert "micro-batch of 2 pairs holds 4 sequences" in objective.value
    assert "a frozen copy of the model, 2.0 GB per GPU" in objective.value
    logits = next(a for a in result.assumptions if a.name.startswith("Logits"))
    assert "4 bytes per token" in logits.value
    assert "the reference's on top" in logits.value
    assert option.recipe.micro_batch == 2  # pairs, as TRL's per_device_train_batch_size
    assert option.recipe.sample == "pair"
    assert one_gpu("sft")[1].recipe.sample == "sequence"


def test_the_script_names_the_preference_trainer():
    result, _ = one_gpu("dpo", precompute_reference=True)
    assert "# Objective: DPO" in result.slurm_script
    assert "--precompute_ref_log_probs True" in result.slurm_script
    result, _ = one_gpu("reference_free_preference", framework="llama_factory")
    assert "stage=dpo pref_loss=orpo" in result.slurm_script
    result, _ = one_gpu("dpo", framework="torchtune", task="lora", config=LLAMA3_8B)
    assert "tune run lora_dpo_single_device" in result.slurm_script


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"task": "inference", "training_objective": "dpo"}, "training_objective", "inference"),
        ({"task": "pretrain", "training_objective": "dpo"}, "training_objective", "pre-training"),
        (
            {"task": "lora", "training_objective": "dpo", "precompute_reference": True,
             "framework": "llama_factory"},
            "precompute_reference",
            "cannot precompute",
        ),
    ],
)  # fmt: skip
def test_a_preference_objective_outside_fine_tuning_is_refused(fields, field, words):
    request = EstimateRequest(config=QWEN_05B, tokens=10**6, **fields)
    with pytest.raises(RequestError) as caught:
        check_request(request)
    assert caught.value.errors[0][0] == field
    assert words in caught.value.errors[0][1]


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ("google-bert/bert-base-uncased", "no language-model head"),
        ("google-t5/t5-base", "encoder-decoder"),
    ],
)
def test_models_that_cannot_score_a_response_are_refused(model, words):
    request = EstimateRequest(
        config=find_bundled(model).config, task="full_finetune", tokens=10**6,
        training_objective="dpo",
    )  # fmt: skip
    with pytest.raises(RequestError) as caught:
        estimate(request, default_catalog())
    assert caught.value.errors[0][0] == "training_objective"
    assert words in caught.value.errors[0][1]


def test_precompute_without_dpo_is_ignored_with_a_warning():
    request = EstimateRequest(config=QWEN_05B, task="lora", tokens=10**6, precompute_reference=True)
    assert any("precompute_reference applies to DPO" in w for w in check_request(request))


def test_a_precomputed_reference_rules_out_zero3():
    """TRL's DPOTrainer refuses precompute_ref_log_probs under DeepSpeed ZeRO-3."""
    request = EstimateRequest(
        config=MISTRAL_7B, task="full_finetune", training_objective="dpo", framework="trl",
        precompute_reference=True, seq_len=1024, batch_size=64, tokens=10**8,
    )  # fmt: skip
    options = estimate(request, default_catalog()).options
    zero3 = [o for o in options if o.strategy in ("zero3", "zero3_offload")]
    assert zero3
    assert not any(o.eligible for o in zero3)
    assert any(o.eligible for o in options)


def test_a_large_log_softmax_names_trls_fused_preference_loss_only():
    """Four pairs of 4,096 tokens over Llama 3's 128,256 entries: 16.8 GB under TRL, which has
    Liger's fused preference loss; LLaMA-Factory's Liger switch patches the cross-entropy its
    DPO trainer never calls, so no hint there."""
    fields = {"seq_len": 4096, "batch_size": 8, "micro_batch": 4}
    result, _ = one_gpu("dpo", config=LLAMA3_8B, task="lora", **fields)
    hint = [r for r in result.recommendation.reasons if "fused preference loss" in r]
    assert hint
    assert "use_liger_kernel=True in DPOConfig" in hint[0]
    fields["micro_batch"] = 1  # the same 16.8 GB at LLaMA-Factory's 16 bytes an entry
    result, option = one_gpu(
        "dpo", config=LLAMA3_8B, task="lora", framework="llama_factory", **fields
    )
    assert option.memory.logits > 0.25 * option.memory_per_gpu_bytes
    assert not [r for r in result.recommendation.reasons if "Liger" in r]


def test_a_length_left_open_is_trls_max_length_for_its_preference_trainers():
    """DPOConfig truncates a prompt and its answer at max_length 1,024; LLaMA-Factory's
    cutoff_len and supervised fine-tuning keep the 2,048 default."""
    request = {"config": LLAMA3_8B, "task": "lora", "tokens": 10**7}
    for objective, framework, expected in (
        ("dpo", None, 1024),
        ("reference_free_preference", "unsloth", 1024),
        ("dpo", "llama_factory", 2048),
        (None, "trl", 2048),
    ):
        fields = {"training_objective": objective, "framework": framework}
        result = estimate(EstimateRequest(**request, **fields), default_catalog())
        length = next(a for a in result.assumptions if a.name == "Sequence length (not given)")
        assert length.value.startswith(f"{expected:,} tokens"), (objective, framework)


# --- KTO: one labelled response per sample, a KL pass, a reference run twice -------------------


def test_a_kto_example_is_one_sequence_with_a_reference_copy_when_training_everything():
    _, sft = one_gpu("sft")
    _, kto = one_gpu("kto")
    _, dpo = one_gpu("dpo")
    assert kto.memory.activations == pytest.approx(sft.memory.activations, rel=0.02)
    assert kto.memory.weights == dpo.memory.weights  # the same frozen copy as DPO's
    assert kto.recipe.sample == "sequence"
    _, precomputed = one_gpu("kto", precompute_reference=True)
    assert precomputed.memory.weights == sft.memory.weights


def test_kto_runs_three_forward_passes_more_than_sft_every_step():
    """Per token, checkpointed: the policy's 6 + 2 recomputed FLOPs per parameter, its KL pass
    2, the reference's passes over the real and the KL sequences 4 (14 against 8). Precomputed
    over two epochs, the reference's 4 come once: 8 + 2 + 2 per token trained."""
    _, sft = one_gpu("sft")
    _, kto = one_gpu("kto")
    assert kto.gpu_hours / sft.gpu_hours == pytest.approx(14 / 8, abs=0.06)
    _, sft_two = one_gpu("sft", epochs=2)
    _, kto_two = one_gpu("kto", precompute_reference=True, epochs=2)
    assert kto_two.gpu_hours / sft_two.gpu_hours == pytest.approx(12 / 8, abs=0.05)


@pytest.mark.parametrize(
    ("framework", "reference_in_step", "per_entry"),
    [("trl", True, 8), ("trl", False, 6), ("llama_factory", True, 12), ("lightning", True, 12)],
)
def test_each_library_keeps_its_own_kto_logits(framework, reference_in_step, per_entry):
    """Two examples of 1,024 tokens over 151,936 entries: TRL keeps index_select copies of the
    desirable and undesirable logits beside its kept log-softmax rows, LLaMA-Factory an fp32
    log-softmax beside the fp32 one of a pass without gradients."""
    fields = {"framework": framework}
    if not reference_in_step:
        fields["precompute_reference"] = True
    _, option = one_gpu("kto", **fields)
    assert option.memory.logits == pytest.approx(2 * 1024 * 151_936 * per_entry, rel=0.01)


def test_trl_kto_never_runs_one_example_per_gpu_pass():
    """TRL's KTOTrainer: 'Actual (not effective) batch size must be > 1'. The search keeps two
    examples a pass even where one would fit more easily; LLaMA-Factory checks only the global
    batch."""
    request = EstimateRequest(
        config=LLAMA3_8B, task="full_finetune", training_objective="kto", framework="trl",
        seq_len=2048, batch_size=16, tokens=10**8,
    )  # fmt: skip
    options = [o for o in estimate(request, default_catalog()).options if o.recipe]
    assert options
    assert all(o.recipe.micro_batch >= 2 for o in options)
    sft = estimate(request.model_copy(update={"training_objective": "sft"}), default_catalog())
    assert any(o.recipe.micro_batch == 1 for o in sft.options if o.recipe)


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"micro_batch": 1, "framework": "trl"}, "micro_batch", "at least 2 examples per GPU"),
        ({"batch_size": 1, "framework": "llama_factory"}, "batch_size", "global batch of 1"),
        ({"framework": "torchtune"}, "training_objective", "no KTO recipe"),
        ({"task": "inference"}, "training_objective", "inference"),
    ],
)
def test_kto_requests_it_cannot_run_are_refused(fields, field, words):
    request = EstimateRequest(
        config=QWEN_05B, tokens=10**6, **{"task": "lora", "training_objective": "kto", **fields}
    )
    with pytest.raises(RequestError) as caught:
        check_request(request)
    assert caught.value.errors[0][0] == field
    assert words in caught.value.errors[0][1]


def test_the_kto_result_and_script_say_what_it_runs():
    result, _ = one_gpu("kto")
    objective = next(a for a in result.assumptions if a.name == "Training objective")
    assert "KTO" in objective.value
    assert "KL sequences" in objective.value
    assert "kto_trainer.py" in objective.source
    assert "a global batch of 8 labelled examples" in result.justification
    assert "# Objective: KTO" in result.slurm_script
    assert "count labelled examples" in result.slurm_script
    result, _ = one_gpu("kto", framework="llama_factory")
    assert "stage=kto" in result.slurm_script
    result, _ = one_gpu("kto", framework="hf_trainer")
    assert any("TRL's KTOTrainer" in w for w in result.warnings)
