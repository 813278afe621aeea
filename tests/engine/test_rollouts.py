"""GRPO sized as TRL's GRPOTrainer runs it with vLLM colocated (rollouts.py): a generation
round before every optimizer step, vLLM's own share of each GPU, the importance-sampling
forward pass, and the loss over the completion's logits only."""

from __future__ import annotations

import pytest

from advisor.engine import estimate, rollouts
from advisor.engine.architecture import architecture_from_config
from advisor.engine.models import EstimateRequest
from advisor.engine.request_checks import RequestError, check_request
from advisor.engine.shape import shape_from_architecture
from advisor.engine.workload import build_workload
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog, on_one_a100_80gb

QWEN_05B = find_bundled("Qwen/Qwen2.5-0.5B").config
QWEN_7B = find_bundled("Qwen/Qwen2.5-7B-Instruct").config
QWEN_7B_KV_PER_TOKEN = 28 * 2 * 4 * 128 * 2  # layers x (K, V) x KV heads x head dim x bf16
LLAMA_70B = find_bundled("meta-llama/Llama-2-70b-hf").config
LLAMA_70B_VLLM_BYTES = 68_976_648_192 * 2  # its parameters in 16 bits


def one_gpu(objective: str | None, *, config=QWEN_05B, task="full_finetune", **fields):
    """The single-A100-80GB option with the recipe pinned, so only the objective differs:
    64 completions a step, prompts of 768 tokens and completions of 256."""
    fields = {
        "framework": "trl",
        "seq_len": 768,
        "new_tokens": 256,
        "batch_size": 64,
        "micro_batch": 4,
        "gradient_checkpointing": True,
        "optimizer": "adamw",
        **fields,
    }
    if objective != "grpo":  # the same 1,024-token sequences, given whole
        fields["seq_len"] += fields.pop("new_tokens")
    return on_one_a100_80gb(
        config=config, task=task, tokens=10**8, training_objective=objective, **fields
    )


def test_vllm_holds_its_own_weights_and_the_steps_kv_cache_beside_training():
    """Qwen2.5-7B LoRA: 15.2 GB of 16-bit weights for vLLM (TRL's base checkpoint) and the KV
    cache of 64 sequences of 1,024 tokens (3.8 GB), on top of what supervised fine-tuning on
    the same sequences holds."""
    _, sft = one_gpu("sft", config=QWEN_7B, task="lora")
    _, grpo = one_gpu("grpo", config=QWEN_7B, task="lora")
    engine = grpo.memory.rollout_engine
    kv = 64 * 1024 * QWEN_7B_KV_PER_TOKEN
    assert engine > 7_615_616_512 * 2 + kv
    assert engine < 7_615_616_512 * 2 + kv + 1.5e9  # its profile pass's activations
    assert grpo.memory.weights == sft.memory.weights
    assert sft.memory.rollout_engine == 0


def test_the_loss_keeps_the_completions_logits_only():
    """6 bytes per completion token and vocabulary entry: 4 sequences x 256 completion tokens
    x 151,936 entries, against the SFT loss's over all 1,024 positions."""
    _, grpo = one_gpu("grpo")
    assert grpo.memory.logits == pytest.approx(4 * 256 * 151_936 * 6, rel=0.02)


def test_every_step_generates_before_it_trains():
    """Generation and the importance-sampling pass make GRPO cost more than SFT on the same
    tokens; longer completions at the same trained tokens cost more generation per token."""
    _, sft = one_gpu("sft")
    _, grpo = one_gpu("grpo")
    assert grpo.gpu_hours > 1.2 * sft.gpu_hours
    _, long = one_gpu("grpo", seq_len=256, new_tokens=768)
    assert long.gpu_hours > grpo.gpu_hours


def test_defaults_are_trls():
    """GRPOConfig: 8 completions a prompt, up to 256 tokens each; a 512-token prompt (its
    max_prompt_length while it had one); the batch rounded up to whole groups."""
    request = EstimateRequest(
        config=QWEN_7B, task="lora", training_objective="grpo", tokens=10**7,
        generations_per_prompt=16,
    )  # fmt: skip
    result = estimate(request, default_catalog())
    option = result.options[0]
    assert option.recipe.global_batch == 16
    length = next(a for a in result.assumptions if a.name == "Sequence length (not given)")
    assert length.value.startswith("512 tokens per prompt")
    assert "--num_generations 16 --max_completion_length 256" in result.slurm_script
    assert "--use_vllm True --vllm_mode colocate" in result.slurm_script
    assert result.framework.key == "trl"


def test_the_script_gives_vllm_the_share_it_needs():
    result, option = one_gpu("grpo", config=QWEN_7B, task="lora")
    share = option.memory.rollout_engine / option.capacity_bytes
    assert f"--vllm_gpu_memory_utilization {(int(share * 100) + 1) / 100:.2f}" in (
        result.slurm_script
    )
    objective = next(a for a in result.assumptions if a.name == "Training objective")
    assert "vllm_gpu_memory_utilization" in objective.value
    assert "GRPOTrainer" in objective.source or "grpo_trainer.py" in objective.source
    assert "with vLLM generating every step's completions first" in result.justification
    assert "vLLM's generation engine" in result.justification


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"framework": "unsloth"}, "framework", "shares one copy of the weights"),
        ({"framework": "llama_factory"}, "framework", "TRL's GRPOTrainer"),
        ({"batch_size": 12}, "batch_size", "not a multiple of the 8"),
        ({"batch_size": 32, "generations_per_prompt": 6}, "batch_size", "multiple of 6"),
        ({"task": "pretrain"}, "training_objective", "pre-training"),
    ],
)
def test_grpo_requests_it_cannot_size_are_refused(fields, field, words):
    request = EstimateRequest(
        config=QWEN_05B, tokens=10**6, **{"task": "lora", "training_objective": "grpo", **fields}
    )
    with pytest.raises(RequestError) as caught:
        check_request(request)
    assert caught.value.errors[0][0] == field
    assert words in caught.value.errors[0][1]


def test_generations_without_grpo_are_ignored_with_a_warning():
    request = EstimateRequest(config=QWEN_05B, task="lora", tokens=10**6, generations_per_prompt=4)
    assert any("generations_per_prompt applies to GRPO" in w for w in check_request(request))


def test_over_a_4_bit_base_vllm_holds_its_copy_in_4_bit_too():
    """TRL loads the colocated vLLM with quantization="bitsandbytes" when the model has 4-bit
    layers: Qwen2.5-7B's vLLM copy is its 4-bit weights and constants (about 5 GB with the
    16-bit embeddings and head), not 15 GB; the result says how it generates and what to
    check. An 8-bit base TRL refuses to colocate."""
    request = EstimateRequest(config=QWEN_7B, task="qlora", training_objective="grpo", tokens=10**6)
    assert any("quantization='bitsandbytes'" in w for w in check_request(request))
    shape = shape_from_architecture(architecture_from_config(QWEN_7B))
    qlora = build_workload(request, shape)
    lora = build_workload(request.model_copy(update={"task": "lora"}), shape)
    assert rollouts.vllm_weight_bytes(shape, lora) == 7_615_616_512 * 2
    assert 4.5e9 < rollouts.vllm_weight_bytes(shape, qlora) < 6e9
    result, option = one_gpu("grpo", config=QWEN_7B, task="qlora")
    assert option.memory.rollout_engine < 6e9 + 64 * 1024 * QWEN_7B_KV_PER_TOKEN + 1.5e9
    objective = next(a for a in result.assumptions if a.name == "Training objective")
    assert "bitsandbytes 4-bit weights" in objective.value
    with pytest.raises(RequestError) as caught:
        check_request(
            EstimateRequest(
                config=QWEN_7B, task="lora", precision="int8", training_objective="grpo",
                tokens=10**6,
            )
        )  # fmt: skip
    assert caught.value.errors[0][0] == "precision"
    assert "in-flight 8-bit" in caught.value.errors[0][1]


def test_a_70b_model_splits_vllm_over_a_node_instead_of_a_copy_per_gpu():
    """Llama-2-70B: a 138 GB vLLM copy on every GPU leaves no room to train beside it; vLLM's
    tensor parallelism splits it over the GPUs of a node, and the script says how."""
    result = estimate(
        EstimateRequest(config=LLAMA_70B, task="lora", training_objective="grpo", tokens=10**7),
        default_catalog(),
    )
    best = result.options[0]
    degree = best.recipe.generation_tp
    assert degree > 1
    assert best.num_gpus % degree == 0
    assert LLAMA_70B_VLLM_BYTES / degree < best.memory.rollout_engine
    assert best.memory.rollout_engine < LLAMA_70B_VLLM_BYTES / degree + 5e9
    assert f"--vllm_tensor_parallel_size {degree}" in result.slurm_script
    assert f"(one engine across every {degree} GPUs)" in result.justification
    objective = next(a for a in result.assumptions if a.name == "Training objective")
    assert f"each vLLM engine spans {degree} GPUs" in objective.value
    assert "sglang pull request 2904" in objective.source
    said = next(r for r in best.recipe.reasons if "vllm_tensor_parallel_size" in r)
    assert "with one engine per GPU" in said
    assert not any("server mode" in w for w in result.warnings)


def test_a_vllm_copy_that_still_fills_half_the_gpu_names_server_mode():
    """Pinned to one H200, vLLM's whole 16-bit Llama-2-70B (138 of 151 GB) sits beside the
    training: vLLM in server mode on GPUs of its own is named, not assumed."""
    result = estimate(
        EstimateRequest(
            config=LLAMA_70B, task="lora", training_objective="grpo", tokens=10**7,
            accelerator="h200-141-sxm", num_gpus=1,
        ),
        default_catalog(),
    )  # fmt: skip
    assert any("server mode" in w and "138 of the 151 GB" in w for w in result.warnings)
    small, _ = one_gpu("grpo", config=QWEN_7B, task="lora")
    assert not any("server mode" in w for w in small.warnings)


@pytest.mark.parametrize(("config", "splits"), [(QWEN_05B, False), (QWEN_7B, True)])
def test_vllm_spans_gpus_where_the_shared_weight_reads_outweigh_its_all_reduces(config, splits):
    """Four A100s of one node, 16 completions each. A decoding step of a small generation
    batch reads every weight: split over the node, one read serves four GPUs' completions,
    but each step also waits for two all-reduces per layer. For Qwen2.5-0.5B the all-reduces
    cost more than the reads save; for Qwen2.5-7B the reads dominate, so vLLM spans the GPUs
    and the job takes fewer GPU hours (the TRL team measured the same turn between a 1.5B and
    a 7B model: Hugging Face blog 'No GPU left behind', 2025-06-03)."""
    request = EstimateRequest(
        config=config, task="lora", training_objective="grpo", tokens=10**7, batch_size=64,
        accelerator="a100-80-sxm4", num_gpus=4, system="stanage",
    )  # fmt: skip
    best = estimate(request, default_catalog()).options[0]
    assert (best.recipe.generation_tp > 1) is splits
    if splits:
        said = next(r for r in best.recipe.reasons if "vllm_tensor_parallel_size" in r)
        assert "fewer GPU hours" in said


def test_a_pinned_vllm_degree_is_kept_or_the_option_says_why_not():
    """generation_tensor_parallel pins vllm_tensor_parallel_size: kept where the node allows
    it, an option whose nodes it does not fill says so, and a degree the model's heads do not
    split (Qwen2.5-7B's 28 over 8) or that does not divide a pinned GPU count is a 400."""
    fields = {
        "config": QWEN_7B, "task": "lora", "training_objective": "grpo", "tokens": 10**7,
        "batch_size": 64, "accelerator": "a100-80-sxm4", "num_gpus": 4, "system": "stanage",
    }  # fmt: skip
    for degree in (1, 2):
        best = estimate(
            EstimateRequest(**fields, generation_tensor_parallel=degree), default_catalog()
        ).options[0]
        assert best.recipe.generation_tp == degree
    result = estimate(
        EstimateRequest(**{**fields, "system": None, "accelerator": None},
                        generation_tensor_parallel=4),
        default_catalog(),
    )  # fmt: skip
    two_per_node = next(o for o in result.options if o.accelerator == "mi210-64")
    assert not two_per_node.eligible
    assert any(
        "vllm_tensor_parallel_size 4, which you asked for" in r and "2 GPUs per node" in r
        for r in two_per_node.reasons
    )
    for pinned, gpus, words in ((8, 8, "cannot split the model's 28 attention heads"),
                                (4, 6, "must divide num_gpus")):  # fmt: skip
        with pytest.raises(RequestError) as caught:
            estimate(
                EstimateRequest(**{**fields, "num_gpus": gpus},
                                generation_tensor_parallel=pinned),
                default_catalog(),
            )  # fmt: skip
        assert caught.value.errors[0][0] == "generation_tensor_parallel"
        assert words in caught.value.errors[0][1]


def test_vllm_keeps_one_key_value_head_per_gpu_when_there_are_fewer_heads_than_gpus():
    """TinyLlama has 32 query heads and 4 key/value heads: over 2 or 4 GPUs each keeps its
    share of the key/value heads for the group's completions (the KV cache per GPU is
    unchanged), over 8 each keeps one head for twice as many completions as 4 would give it
    (vLLM replicates heads it cannot split)."""
    tinyllama = find_bundled("TinyLlama/TinyLlama-1.1B-Chat-v1.0").config
    shape = shape_from_architecture(architecture_from_config(tinyllama))
    assert 8 in rollouts.degrees(shape, 8)
    wl = build_workload(
        EstimateRequest(
            config=tinyllama, task="lora", training_objective="grpo", tokens=10**7,
            new_tokens=4096, seq_len=1024, batch_size=64,
        ),
        shape,
    )  # fmt: skip
    per_gpu = 8
    kv = {
        degree: rollouts.engine_bytes(shape, wl, per_gpu, degree)
        - rollouts.vllm_weight_bytes(shape, wl) / degree
        for degree in (1, 4, 8)
    }
    one_gpu_kv = per_gpu * 5120 * 22 * 2 * 4 * 64 * 2  # tokens x layers x (K, V) x heads x dim
    assert kv[4] == pytest.approx(kv[1], rel=0.1)
    assert kv[8] - kv[4] == pytest.approx(one_gpu_kv, rel=0.05)


def test_a_kl_penalty_brings_a_16_bit_reference_and_its_forward_pass():
    """beta > 0: GRPOTrainer loads the reference with from_pretrained, 2 bytes a parameter
    (not the policy's fp32 copy under AMP, as DPO's deep copy is), and runs it over every
    completion; adapters switch themselves off instead. The script passes a beta."""
    _, plain = one_gpu("grpo")
    result, kl = one_gpu("grpo", kl_penalty=True)
    assert kl.memory.weights - plain.memory.weights == pytest.approx(494_032_768 * 2, rel=0.01)
    assert kl.gpu_hours > plain.gpu_hours
    assert "--beta" in result.slurm_script
    objective = next(a for a in result.assumptions if a.name == "Training objective")
    assert "a frozen 16-bit copy" in objective.value
    _, lora_plain = one_gpu("grpo", config=QWEN_7B, task="lora")
    _, lora_kl = one_gpu("grpo", config=QWEN_7B, task="lora", kl_penalty=True)
    assert lora_kl.memory.weights == lora_plain.memory.weights
    warned = check_request(
        EstimateRequest(config=QWEN_05B, task="lora", tokens=10**6, kl_penalty=True)
    )
    assert any("kl_penalty applies to GRPO" in w for w in warned)


def test_the_vllm_degree_does_not_depend_on_whether_tokens_were_given():
    """Without a token count the options are ranked by a nominal job's GPU hours; the vLLM
    degree is chosen on the same footing, so the script does not change with it."""
    fields = {
        "config": find_bundled("meta-llama/Llama-2-7b-hf").config, "task": "lora",
        "training_objective": "grpo", "num_gpus": 8, "strategy": "ddp",
        "accelerator": "h100-80-sxm5",
    }  # fmt: skip
    timed = estimate(EstimateRequest(**fields, tokens=10**7), default_catalog()).options[0]
    untimed = estimate(EstimateRequest(**fields), default_catalog()).options[0]
    assert timed.recipe.generation_tp > 1
    assert untimed.recipe.generation_tp == timed.recipe.generation_tp


def test_the_split_is_explained_by_what_one_engine_per_gpu_would_cost():
    """phi-2, 8 GPUs, 8,192-token prompts: where one engine per GPU would leave no headroom the
    reason says so instead of a saving, and a saving is never negative."""
    result = estimate(
        EstimateRequest(
            config=find_bundled("microsoft/phi-2").config, task="full_finetune",
            training_objective="grpo", tokens=10**7, seq_len=8192, batch_size=64, num_gpus=8,
            strategy="ddp",
        ),
        default_catalog(),
    )  # fmt: skip
    said = [
        r for o in result.options for r in (o.recipe.reasons if o.recipe else [])
        if "vllm_tensor_parallel_size" in r
    ]  # fmt: skip
    assert any("headroom" in r for r in said)
    assert not any("-" in r.split("fewer GPU hours")[0][-5:] for r in said if "fewer" in r)


def test_the_leaner_recipe_hint_sizes_vllm_split_as_the_recommendation_runs_it():
    """Llama-2-13B QLoRA GRPO is recommended with vLLM over two GPUs; the micro-batch 1 figure
    keeps the same split engine, so it is well below the recommended recipe's."""
    result = estimate(
        EstimateRequest(
            config=find_bundled("meta-llama/Llama-2-13b-hf").config, task="qlora",
            precision="int4", training_objective="grpo", tokens=10**7, batch_size=64,
        ),
        default_catalog(),
    )  # fmt: skip
    best = result.options[0]
    assert best.recipe.generation_tp > 1
    hint = next(w for w in result.warnings if w.startswith("The recommended recipe uses"))
    lean = float(hint.split("needs about ")[1].split(" GB")[0])
    assert lean * 1.6 <= best.memory_per_gpu_bytes / 1e9


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"constraints": {"max_gpus": 2}}, "max_gpus is 2"),
        ({"num_gpus": 1}, "must divide num_gpus (1)"),
    ],
)
def test_a_pinned_vllm_degree_no_option_could_run_is_a_400(fields, words):
    request = EstimateRequest(
        config=QWEN_7B, task="lora", training_objective="grpo", tokens=10**6,
        generation_tensor_parallel=4, **fields,
    )  # fmt: skip
    with pytest.raises(RequestError) as caught:
        check_request(request)
    assert caught.value.errors[0][0] == "generation_tensor_parallel"
    assert words in caught.value.errors[0][1]
