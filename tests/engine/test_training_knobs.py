"""Knobs a researcher can pin that the library otherwise sets (stepping the optimizer inside
backward, offloading checkpointed activations: torchtune's optimizer_in_bwd and
enable_activation_offloading), and what a sharded layout keeps whole."""

from dataclasses import replace

import pytest

from advisor.engine import RequestError, estimate
from advisor.engine.architecture import architecture_from_config
from advisor.engine.compute import training_flops_per_token
from advisor.engine.memory import MemoryModel
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.engine.workload import build_workload
from tests.engine.catalog_fixture import catalog
from tests.engine.inputs import config, default_catalog

LLAMA32_1B = config("meta-llama__Llama-3.2-1B")
LLAMA2_7B = config("meta-llama__Llama-2-7b-hf")


def _one_gpu(seq_len=4096, **knobs):
    request = EstimateRequest(
        config=LLAMA32_1B,
        task="full_finetune",
        precision="bf16",
        batch_size=8,
        seq_len=seq_len,
        gradient_checkpointing=True,
        optimizer="adamw",
        framework="torchtune",
        num_gpus=1,
        **knobs,
    )
    result = estimate(request, catalog())
    return next(o for o in result.options if o.num_gpus == 1 and o.accelerator == "a100-80-sxm4")


def test_stepping_the_optimizer_in_backward_frees_the_gradients_and_never_accumulates():
    # Short sequences: the optimizer step, with every gradient alive, is the peak.
    plain = _one_gpu(seq_len=256, optimizer_in_backward=False)
    fused = _one_gpu(seq_len=256, optimizer_in_backward=True)
    assert plain.memory.peak_phase == "optimizer"
    # Only the largest gradient (the 128,256 x 2,048 embedding, 16-bit) exists at a time.
    assert fused.memory.gradients == 128256 * 2048 * 2
    assert plain.memory.gradients > 4 * fused.memory.gradients
    assert fused.memory.total_bytes < plain.memory.total_bytes
    # torchtune refuses gradient accumulation with optimizer_in_bwd: the whole batch per GPU
    # goes through at once.
    long = _one_gpu(optimizer_in_backward=True)
    assert long.recipe.grad_accumulation == 1
    assert long.recipe.micro_batch == 8


def test_offloading_checkpointed_activations_keeps_fewer_layer_inputs_on_the_gpu():
    kept = _one_gpu(activation_offloading=False, micro_batch=8)
    offloaded = _one_gpu(activation_offloading=True, micro_batch=8)
    assert offloaded.memory.activations < kept.memory.activations
    assert offloaded.memory.weights == kept.memory.weights


def _sharded_head_share(config):
    request = EstimateRequest(
        config=config, task="full_finetune", precision="bf16", framework="torchtune"
    )
    shape = shape_from_architecture(architecture_from_config(config))
    parts = MemoryModel(shape, build_workload(request, shape)).per_gpu(
        "zero3_offload", 8, micro=1, accumulation=1
    )
    return shape, parts


def test_a_sharded_job_gathers_the_lm_head_whole_when_it_outgrows_a_layer():
    """Llama 3.2's 128,256-token head is larger than one of its layers: FSDP gathers it, and
    its gradient is whole until reduce-scattered, whatever the GPU count."""
    shape, parts = _sharded_head_share(LLAMA32_1B)
    head = shape.vocab_size * shape.hidden_size
    assert head > shape.params_per_layer
    assert parts["weights"] == (shape.params_per_layer + head) * 2
    assert parts["gradients"] == head * 2
    # Llama 2's 32,000-token head is smaller than a layer: two layers are gathered.
    shape, parts = _sharded_head_share(LLAMA2_7B)
    assert parts["weights"] == 2 * shape.params_per_layer * 2


def test_the_torchtune_command_carries_the_stepping_the_estimate_assumed():
    result = estimate(
        EstimateRequest(
            config=LLAMA32_1B,
            task="full_finetune",
            precision="bf16",
            batch_size=8,
            seq_len=4096,
            framework="torchtune",
            optimizer_in_backward=True,
            activation_offloading=True,
            system="baskerville",
            num_gpus=1,
        ),
        catalog(),
    )
    assert "tune run full_finetune" in result.slurm_script
    assert "optimizer_in_bwd=True enable_activation_offloading=True" in result.slurm_script


def llama2_13b_on_short_sequences(task: str, seq_len: int = 128):
    """Llama 2 13B adapters on short sequences (128 tokens), 64 per step: small micro-batches
    leave a GPU idle, so recomputation can pay for a larger one."""
    from tests.engine.inputs import default_catalog

    request = EstimateRequest(
        config=config("meta-llama__Llama-2-13b-hf"),
        task=task,
        tokens=10**8,
        seq_len=seq_len,
        batch_size=64,
    )
    return estimate(request, default_catalog())


def test_the_checkpointing_reason_says_whether_it_buys_memory_or_speed():
    """Checkpointing chosen because nothing fits without it names what even one sequence per
    micro-batch would need; chosen because a larger micro-batch runs faster, it says so and
    names the largest micro-batch that fits without it (the first read "needs 585 GB" for
    Qwen2.5-14B QLoRA at micro-batch 8, the second claimed it was needed to fit)."""
    from tests.engine.inputs import config, default_catalog

    needed = estimate(
        EstimateRequest(
            config=config("Qwen__Qwen2.5-7B"),
            task="qlora",
            precision="int4",
            tokens=10**8,
            seq_len=8192,
            accelerator="a100-40-sxm4",
        ),
        default_catalog(),
    ).recommendation
    why = " ".join(needed.recipe.reasons)
    assert needed.recipe.checkpointing == "full"
    if needed.recipe.micro_batch > 1:
        assert "without it even a micro-batch of 1 needs" in why
    else:
        assert "without it it needs" in why
    # Llama 2 13B QLoRA on one 16 GB T4 at 128-token sequences: micro-batch 1 fits without
    # recomputation (with the margin free) but leaves the GPU idle; micro-batch 16 with it
    # takes about two thirds of the GPU hours.
    result = llama2_13b_on_short_sequences("qlora")
    faster = next(o for o in result.options if o.accelerator == "t4-16" and o.strategy == "single")
    assert faster.recipe.checkpointing == "full"
    assert (
        f"lets micro-batch {faster.recipe.micro_batch} fit, which runs faster even at +49% "
        "compute than micro-batch 1, the largest that fits without it"
    ) in " ".join(faster.recipe.reasons)


def test_checkpointing_chosen_to_keep_the_memory_margin_says_so_not_that_it_is_faster():
    """Llama 2 13B LoRA on one 32 GB MI100 (34.4e9 bytes) at 256-token sequences (eager
    attention: the MI100 has no fused kernel): without recomputation even one sequence per
    micro-batch needs 32.2 GB, inside the margin the sizing keeps free, so the recipe
    checkpoints. The reason used to claim that checkpointing's larger micro-batch was the
    faster run; without the margin, micro-batch 2 would have been."""
    result = llama2_13b_on_short_sequences("lora", seq_len=256)
    (kept,) = [o for o in result.options if o.accelerator == "mi100-32" and o.num_gpus == 1]
    why = " ".join(kept.recipe.reasons)
    assert kept.recipe.checkpointing == "full"
    assert kept.headroom is True
    assert "full activation checkpointing keeps 10% of the memory free on one GPU" in why
    assert "without it even a micro-batch of 1 needs 32.2 of the 34 GB per GPU" in why
    assert "runs faster" not in why


def test_library_defaults_survive_a_json_round_trip_of_the_request():
    """The API re-validates a request from its JSON when the Hub lookup adds metadata, and a
    staff re-run reads the frozen JSON: torchtune's pure bf16 must not turn into the Trainer's
    fp32 master weights on the way (before, it did: 2 A100s instead of one for Llama 3.1 8B)."""
    request = EstimateRequest(
        config=LLAMA2_7B, task="full_finetune", framework="torchtune", tokens=10**8
    )
    again = EstimateRequest.model_validate_json(request.model_dump_json())
    first, second = estimate(request, catalog()), estimate(again, catalog())
    assert first.recommendation == second.recommendation
    assert first.memory == second.memory
    shape = shape_from_architecture(architecture_from_config(LLAMA2_7B))
    assert build_workload(again, shape).mixed_precision is False  # torchtune's pure bf16
    amp = EstimateRequest.model_validate_json(
        request.model_copy(update={"framework": "hf_trainer"}).model_dump_json()
    )
    assert build_workload(amp, shape).mixed_precision is True  # the Trainer's AMP


def test_a_training_result_says_it_assumes_full_sequences_and_what_padding_costs():
    """The GPU hours count the tokens given as full sequences; batches padded to their longest
    example compute on the padding (torchtune: packing ran 3.4 x faster)."""
    result = estimate(
        EstimateRequest(config=LLAMA32_1B, task="lora", seq_len=1024, tokens=10**7), catalog()
    )
    (said,) = [a for a in result.assumptions if a.name == "Sequences (training)"]
    assert said.value.startswith("every sequence 1,024 tokens long")
    assert "padded" in said.value
    assert "expandable segments" in said.value  # unpacked batches and the allocator's cache
    assert "7,075 with the examples packed" in said.source
    inference = estimate(
        EstimateRequest(config=LLAMA32_1B, task="inference", tokens=10**7), catalog()
    )
    assert not [a for a in inference.assumptions if a.name == "Sequences (training)"]


def test_the_script_says_how_to_pack_where_the_library_leaves_it_to_the_researcher():
    def script(task, framework=None):
        request = EstimateRequest(
            config=LLAMA32_1B, task=task, tokens=10**7, framework=framework, system="baskerville"
        )
        return estimate(request, catalog()).slurm_script

    assert "pack short examples (TRL's SFTConfig(packing=True))" in script("lora")
    assert "pack short examples (dataset.packed=True)" in script("lora", "torchtune")
    assert "pack short examples" not in script("pretrain")


def test_a_recipe_that_does_not_fit_says_so_and_not_that_checkpointing_makes_it_fit():
    """Llama 3 8B LoRA on 131,072-token sequences with the Trainer's fp32 logits (about 200 GB
    for one sequence): no GPU holds it. Each option carries its leanest recipe, whose reason
    used to read "full activation checkpointing makes it fit one GPU"."""
    from tests.engine.inputs import default_catalog

    result = estimate(
        EstimateRequest(
            config=config("meta-llama__Meta-Llama-3-8B"),
            task="lora",
            tokens=5 * 10**7,
            seq_len=131072,
        ),
        default_catalog(),
    )
    assert result.recommendation is None
    option = next(o for o in result.options if o.accelerator == "a100-80-sxm4" and o.num_gpus == 1)
    why = " ".join(option.recipe.reasons)
    assert not option.fits
    assert "makes it fit" not in why
    assert why.startswith("even with full activation checkpointing (+")
    assert "it needs" in why


def _checkpointing_reason(**knobs) -> str:
    request = EstimateRequest(
        config=LLAMA32_1B,
        task="full_finetune",
        batch_size=128,
        seq_len=1024,
        tokens=10**8,
        accelerator="a100-80-sxm4",
        num_gpus=1,
        **knobs,
    )
    option = next(o for o in estimate(request, catalog()).options if o.num_gpus == 1)
    return option.recipe.reasons[0]


def test_checkpointing_the_researcher_asked_for_says_so_and_what_it_costs():
    """Pinned checkpointing with a micro-batch of 2 that fits without it: the reason used to
    claim checkpointing 'lets micro-batch 2 fit, which runs faster than micro-batch 13'."""
    reason = _checkpointing_reason(gradient_checkpointing=True, micro_batch=2)
    assert reason == (
        "full activation checkpointing as you asked, at +27% compute; it fits without, and "
        "would run faster (gradient_checkpointing false)."
    )
    reason = _checkpointing_reason(gradient_checkpointing=True, micro_batch=32)
    assert reason.startswith("full activation checkpointing as you asked, at +27% compute; ")
    assert "without it it needs 130 GB per GPU" in reason


def test_checkpointing_chosen_for_a_pinned_micro_batch_says_it_makes_that_micro_batch_fit():
    reason = _checkpointing_reason(micro_batch=32)
    assert reason == (
        "full activation checkpointing makes your micro-batch of 32 fit one GPU at +27% "
        "compute; without it it needs 130 GB per GPU."
    )


def _recompute_cost(model: str) -> float:
    """Recomputation's FLOPs as a share of a step's without it (seq 1024, flash attention)."""
    shape = shape_from_architecture(architecture_from_config(config(model)))
    request = EstimateRequest(config=config(model), task="full_finetune", seq_len=1024)
    plain = build_workload(request, shape)
    checkpointed = replace(plain, gradient_checkpointing=True)
    return (
        training_flops_per_token(shape, checkpointed) / training_flops_per_token(shape, plain) - 1
    )


def test_checkpointing_recomputes_the_blocks_not_the_lm_head():
    """Every stack checkpoints per transformer block; the vocabulary projection and the loss
    after the last block run once. Llama 3.2 1B's tied 128,256 x 2,048 head is a fifth of its
    matmuls, so recomputation costs +27 %, not the +33 % of a model whose head is small
    (Llama 2 70B: 0.2 % of its matmuls). Engine 1.11 charged +33 % for both."""
    assert round(_recompute_cost("meta-llama__Llama-3.2-1B"), 2) == 0.27
    assert round(_recompute_cost("meta-llama__Llama-2-70b-hf"), 2) == 0.33


def test_megatron_never_plans_or_accepts_a_bitsandbytes_optimizer():
    """Megatron-LM's optimizer is Adam or SGD (megatron/core/optimizer/optimizer_config.py),
    sharded by its distributed optimizer: 8-bit AdamW is not a knob it has."""
    mixtral = config("mistralai__Mixtral-8x7B-v0.1")
    result = estimate(
        EstimateRequest(config=mixtral, task="pretrain", tokens=10**10, framework="megatron"),
        default_catalog(),
    )
    recipes = [o.recipe for o in result.options if o.recipe is not None]
    assert recipes
    assert {r.optimizer for r in recipes} == {"adamw"}
    with pytest.raises(RequestError) as refused:
        estimate(
            EstimateRequest(
                config=mixtral, task="pretrain", tokens=10**10, framework="megatron",
                optimizer="adamw_8bit",
            ),
            default_catalog(),
        )  # fmt: skip
    assert "optimizer" in str(refused.value)
    assert "not bitsandbytes' adamw_8bit" in str(refused.value)
