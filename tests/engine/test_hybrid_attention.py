"""Qwen3.5 / Qwen3.6 and Qwen3-Next: three in four blocks use gated DeltaNet linear attention.

Such a block has its own projections, keeps no KV cache but a fixed recurrent state per
sequence, and scores no token pairs. Counted from the bundled configs, each equal to its
published count (advisor/model_configs/index.json; docs/qwen3_5-support.md).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.engine import estimate
from advisor.engine.activations import stored_linear_inputs, training_activations
from advisor.engine.architecture import architecture_from_config
from advisor.engine.compute import training_flops_per_token
from advisor.engine.errors import ConfigError
from advisor.engine.memory_terms import kv_cache_bytes, lora_trainable_params
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog
from tests.engine.test_memory import workload


def _arch(repo: str):
    return architecture_from_config(find_bundled(repo).config)


@pytest.mark.parametrize(
    ("repo", "total", "linear_layers", "layers"),
    [
        ("Qwen/Qwen3.5-4B", 4_539_265_536, 24, 32),
        ("Qwen/Qwen3.5-9B", 9_409_813_744, 24, 32),
        ("Qwen/Qwen3.5-27B", 27_356_728_560, 48, 64),
        ("Qwen/Qwen3.6-35B-A3B", 35_107_181_936, 30, 40),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", 79_674_391_296, 36, 48),
    ],
)
def test_hybrids_are_counted_to_the_published_parameter(repo, total, linear_layers, layers):
    """Engine 1.12 refused these; each now equals its published count (without the
    multi-token-prediction layer, which transformers does not load)."""
    arch = _arch(repo)

    assert arch.params_total == total
    assert (arch.linear_attention.layers, arch.num_layers) == (linear_layers, layers)
    assert any(f"{linear_layers} of {layers} layers use gated DeltaNet" in n for n in arch.notes)


def test_qwen3_next_active_parameters_match_the_published_figure():
    """Ten of 512 experts and the shared expert per token: 3,874,929,408 active."""
    assert _arch("Qwen/Qwen3-Next-80B-A3B-Instruct").params_active == 3_874_929_408


def test_each_block_kind_carries_its_own_layers():
    """LoRA over every linear layer adapts the DeltaNet projections in 24 blocks and the
    (double-width, gated) query projection in the other 8: r x (in + out) per block that has
    the layer."""
    shape = shape_from_architecture(_arch("Qwen/Qwen3.5-9B"))
    h, r = 4096, 16
    delta_net = (h + 8192) + (h + 4096) + 2 * (h + 32) + (4096 + h)  # qkv, z, b, a, out
    softmax = (h + 2 * 4096) + 2 * (h + 1024) + (4096 + h)  # q + gate, k, v, o
    mlp = 2 * (h + 12288) + (12288 + h)

    trainable = lora_trainable_params(shape, workload(task="lora", lora_rank=r))

    assert trainable == r * (24 * delta_net + 8 * softmax + 32 * mlp)
    only_q = lora_trainable_params(
        shape, workload(task="lora", lora_rank=r, lora_targets=("q_proj",))
    )
    assert only_q == r * 8 * (h + 2 * 4096)


def test_only_the_softmax_layers_cache_keys_and_values():
    """Qwen3.5-9B at 32,768 + 1,024 tokens and 16 sequences: 8 layers x 4 KV heads x 256 x 2
    (K and V) x 2 bytes per token, plus per sequence the 24 DeltaNet layers' state (a 4-wide
    convolution window over 8,192 channels in bf16, 32 heads of 128 x 128 in fp32)."""
    shape = shape_from_architecture(_arch("Qwen/Qwen3.5-9B"))
    wl = workload(batch_size=16, seq_len=32768, new_tokens=1024)
    tokens = 32768 + 1024
    state = 8192 * 4 * 2 + 32 * 128 * 128 * 4

    expected = 16 * (8 * tokens * 2 * 4 * 256 * 2 + 24 * state)

    assert kv_cache_bytes(shape, wl) == expected
    # Counted as a dense model of the same widths, every layer's cache would grow with the
    # context: four times the keys and values, 3.8 times the whole.
    dense = replace(shape, linear_attention=None)
    assert kv_cache_bytes(dense, wl) == 4 * (expected - 16 * 24 * state)


def test_linear_attention_scores_no_token_pairs():
    """The quadratic attention FLOPs are the 8 softmax layers' only, and eager attention's score
    matrices likewise."""
    shape = shape_from_architecture(_arch("Qwen/Qwen3.5-9B"))
    wl = workload(task="full_finetune", seq_len=32768, new_tokens=0)
    dense = replace(shape, linear_attention=None)

    hybrid_attention = training_flops_per_token(shape, wl) - 6 * shape.flop_params
    dense_attention = training_flops_per_token(dense, wl) - 6 * shape.flop_params

    assert hybrid_attention == pytest.approx(12 * 8 * 4096 * 32768)
    assert dense_attention == pytest.approx(4 * hybrid_attention)
    eager = replace(wl, flash_attention=False, seq_len=4096)
    flash = replace(eager, flash_attention=True)
    score_growth = training_activations(shape, eager) - training_activations(shape, flash)
    dense_growth = training_activations(dense, eager) - training_activations(dense, flash)
    assert score_growth == pytest.approx(dense_growth / 4, rel=1e-6)


def test_a_deltanet_block_keeps_its_wider_tensors_for_backward():
    """Per token a DeltaNet block keeps its convolution's input and output (8,192 channels
    each), the gate, the recurrence's and the norm's outputs (4,096 each) and the kernel's
    64-token chunk rows: more than a softmax block's Q, K, V and output."""
    shape = shape_from_architecture(_arch("Qwen/Qwen3.5-9B"))
    wl = workload(task="full_finetune", seq_len=2048, new_tokens=0)
    softmax_only = replace(shape, linear_attention=None)

    extra = training_activations(shape, wl) - training_activations(softmax_only, wl)

    per_token = (2 * 8192 + 3 * 4096 + 32 * 64) - (4096 + 2 * 1024 + 4096)
    logsumexp = 4 * 16 * 2048  # the flash kernel's per-head row statistics, per layer
    assert extra == pytest.approx(24 * (2 * 2048 * per_token - logsumexp))


def test_moe_linear_layers_count_only_the_blocks_that_have_them():
    """Llama 4 Maverick routes in every second block and has a dense MLP in the others: its
    expert weights are 24 blocks x 128 experts x 3 x 5,120 x 8,192, its dense MLP 24 blocks'
    worth, no longer every block's experts."""
    shape = shape_from_architecture(_arch("meta-llama/Llama-4-Maverick-17B-128E-Instruct"))
    experts = sum(
        lin.in_features * lin.out_features * lin.count_per_layer * shape.blocks_with(lin)
        for lin in shape.linears
        if lin.role.startswith("expert")
    )
    dense = [lin for lin in shape.linears if lin.role.startswith("mlp")]

    assert experts == 24 * 128 * 3 * 5120 * 8192
    assert dense
    assert all(shape.blocks_with(lin) == 24 for lin in dense)
    assert shape.params_linear < shape.params_total


def test_qwen3_5_moe_lora_and_qlora_leave_its_parameter_tensor_experts_alone():
    """Qwen3.5's experts are 3-D parameters: PEFT's "all-linear" does not adapt them and
    bitsandbytes keeps them 16-bit, so QLoRA of the 35B-A3B holds over 60 GB of weights."""
    shape = shape_from_architecture(_arch("Qwen/Qwen3.6-35B-A3B"))
    experts = [lin for lin in shape.linears if lin.role.startswith("expert")]

    assert experts
    assert not any(lin.module for lin in experts)
    assert shape.params_quantisable < 0.1 * shape.params_total


def test_a_qwen3_5_request_is_estimated_with_its_hybrid_notes():
    config = find_bundled("Qwen/Qwen3.5-9B").config
    result = estimate(
        EstimateRequest(model_id="Qwen/Qwen3.5-9B", config=config, task="lora", tokens=10**8),
        default_catalog(),
    )

    assert result.params_total == 9_409_813_744
    assert result.recommendation is not None
    assert result.recommendation.fits
    notes = " ".join(result.warnings)
    assert "24 of 32 layers use gated DeltaNet linear attention" in notes
    assert "flash-linear-attention" in notes
    assert "(height / 32)" in notes


@pytest.mark.parametrize(
    "layer_types",
    [["linear_attention"] * 31, ["linear_attention"] * 31 + ["sliding_attention"]],
)
def test_layer_types_that_do_not_describe_the_blocks_are_refused(layer_types):
    config = find_bundled("Qwen/Qwen3.5-9B").config
    text = {**config["text_config"], "layer_types": layer_types}

    with pytest.raises(ConfigError) as raised:
        architecture_from_config({**config, "text_config": text})

    assert raised.value.field == "layer_types"
    assert "must name 32 layers" in str(raised.value)


def test_adapting_only_the_deltanet_projections_keeps_their_input_for_backward():
    """A LoRA adapter on in_proj_qkv needs the block's normed input in backward, as one on
    q_proj does: the frozen 16-bit base keeps it."""
    shape = shape_from_architecture(_arch("Qwen/Qwen3.5-9B"))
    wl = workload(task="lora", seq_len=2048, new_tokens=0, lora_dropout=0.0)
    deltanet = replace(wl, lora_targets=("in_proj_qkv",))
    output_only = replace(wl, lora_targets=("out_proj",))

    assert stored_linear_inputs(shape, deltanet) == (True, False, False)
    assert stored_linear_inputs(shape, output_only) == (False, False, False)
    # the normed input, 2 bytes x 4,096 per token, in each of the 32 blocks
    kept = training_activations(shape, deltanet) - training_activations(shape, output_only)
    assert kept == pytest.approx(32 * 2048 * 4096 * 2, rel=0.05)
