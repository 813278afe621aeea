"""Memory per GPU by component, against formulas whose numbers are known exactly."""

from dataclasses import replace

import pytest

from advisor.engine.activations import lora_dropout_bytes_per_token, training_activations_per_layer
from advisor.engine.architecture import architecture_from_config
from advisor.engine.memory import MemoryModel, memory_per_gpu
from advisor.engine.memory_terms import (
    Workload,
    base_weight_bytes,
    kv_cache_bytes,
    lora_trainable_params,
)
from advisor.engine.shape import ModelShape, llama_like_shape, shape_from_architecture
from tests.engine.inputs import config


def llama2_7b() -> ModelShape:
    return llama_like_shape(
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        intermediate_size=11008,
        vocab_size=32000,
    )


def mistral_7b() -> ModelShape:
    return llama_like_shape(
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        intermediate_size=14336,
        vocab_size=32000,
        family="mistral",
    )


def gpt2_like(*, layers=12, h=768, heads=12, vocab=50257) -> ModelShape:
    """GPT-2 small's block: GELU MLP of 4h, dropout on, biases ignored for the formulas."""
    return ModelShape(
        params_total=124_439_808,
        params_active=124_439_808,
        num_layers=layers,
        hidden_size=h,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_dim=h // heads,
        intermediate_size=4 * h,
        vocab_size=vocab,
        gated_mlp=False,
        family="gpt2",
        tied_embeddings=True,
        params_embedding=vocab * h + 1024 * h,
        params_lm_head=0,
    )


def workload(**overrides) -> Workload:
    base = {
        "task": "inference",
        "precision": "bf16",
        "weight_format": "bf16",
        "compute_dtype": "bf16",
        "batch_size": 1,
        "seq_len": 2048,
        "new_tokens": 256,
        "gradient_checkpointing": False,
        "flash_attention": True,
        "mixed_precision": True,
        "optimizer": "adamw",
        "lora_rank": 16,
    }
    base.update(overrides)
    return Workload(**base)


def test_llama2_7b_shape_counts_the_published_parameters():
    assert llama2_7b().params_total == 6_738_415_616


def test_shape_from_the_real_config_matches_the_test_shape():
    llama = config("meta-llama__Llama-2-7b-hf")
    shape = shape_from_architecture(architecture_from_config(llama))
    assert shape.params_total == 6_738_415_616
    assert shape.params_linear == llama2_7b().params_linear == 6_476_005_376


@pytest.mark.parametrize(
    ("weight_format", "weights", "constants"),
    [
        ("fp32", 26_953_662_464, 0),
        ("bf16", 13_476_831_232, 0),
        ("fp16", 13_476_831_232, 0),
        # int8: 6,476,005,376 linear weights x 1 B + 262,410,240 kept in 16-bit x 2 B;
        # one fp32 scale per output row: 32 x (3x4096 + 4096 + 2x11008... ) rows.
        ("int8", 7_000_825_856, 32 * (4096 * 4 + 11008 * 2 + 4096) * 4),
        # int4 NF4: half a byte per linear weight; an fp32 absmax per 64 weights.
        ("int4", 3_762_823_168, 6_476_005_376 * 4 / 64),
    ],
)
def test_weight_bytes_by_precision(weight_format, weights, constants):
    got_weights, got_constants = base_weight_bytes(llama2_7b(), weight_format)
    assert got_weights == weights
    assert got_constants == pytest.approx(constants)


@pytest.mark.parametrize(
    ("shape", "batch", "prompt", "new", "expected"),
    [
        # 2 (K and V) x 32 layers x 32 KV heads x 128 dims x tokens x 2 bytes
        (llama2_7b(), 1, 2048, 256, 2 * 32 * 32 * 128 * 2304 * 2),
        (llama2_7b(), 8, 512, 512, 2 * 32 * 32 * 128 * 8 * 1024 * 2),
        # grouped-query attention: 8 KV heads, a quarter of the cache
        (mistral_7b(), 1, 2048, 256, 2 * 32 * 8 * 128 * 2304 * 2),
    ],
)
def test_kv_cache_bytes(shape, batch, prompt, new, expected):
    wl = workload(batch_size=batch, seq_len=prompt, new_tokens=new)
    assert kv_cache_bytes(shape, wl) == expected


def test_korthikanti_formula_for_a_gpt_block_with_eager_attention_and_dropout():
    shape = gpt2_like()
    s, b, h, a = 1024, 2, 768, 12
    wl = workload(
        task="full_finetune",
        batch_size=b,
        seq_len=s,
        flash_attention=False,
        mixed_precision=False,
    )
    assert training_activations_per_layer(shape, wl) == s * b * h * 34 + 5 * a * s * s * b


def test_autocast_keeps_softmax_and_the_residual_stream_in_fp32():
    """Mixed precision (torch.autocast): norm inputs 4 bytes, eager attention keeps fp32
    probabilities (4), mask (1), fp32 dropout output (4) and the fp16 cast for AV (2)."""
    shape = gpt2_like()
    s, b, h, a = 512, 4, 768, 12
    wl = workload(task="full_finetune", batch_size=b, seq_len=s, flash_attention=False)
    assert training_activations_per_layer(shape, wl) == s * b * h * (34 + 4) + 11 * a * s * s * b


def test_tensor_parallel_activations_follow_korthikanti_table_2():
    shape = gpt2_like()
    s, b, h, a, t = 1024, 1, 768, 12, 4
    wl = workload(
        task="full_finetune",
        batch_size=b,
        seq_len=s,
        flash_attention=False,
        mixed_precision=False,
    )
    expected = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    assert training_activations_per_layer(shape, wl, tp=t) == pytest.approx(expected)


def test_flash_attention_drops_the_quadratic_term():
    shape = llama2_7b()
    wl = workload(task="full_finetune", seq_len=4096, mixed_precision=False)
    s, h, f = 4096, 4096, 11008
    # RMSNorm inputs kept in fp32 8sbh, attention/MLP inputs 4sbh, Q/K/V/O 8sbh (no GQA),
    # SwiGLU inner 8sbf, logsumexp 4bas
    expected = 8 * s * h + 4 * s * h + 8 * s * h + 8 * s * f + 4 * 32 * s
    assert training_activations_per_layer(shape, wl) == expected


@pytest.mark.parametrize(
    ("targets", "rank", "expected"),
    [
        # PEFT's famous counts for LLaMA-7B
        (("q_proj", "v_proj"), 8, 4_194_304),
        ((), 16, 39_976_960),  # every linear layer
    ],
)
def test_lora_trainable_parameters(targets, rank, expected):
    wl = workload(task="lora", lora_rank=rank, lora_targets=targets)
    assert lora_trainable_params(llama2_7b(), wl) == expected


@pytest.mark.parametrize(
    ("mixed", "precision", "optimizer", "weights", "grads", "optim"),
    [
        # PyTorch AMP on one GPU: fp32 weights + 16-bit cast cache, fp32 grads, fp32 moments
        (True, "bf16", "adamw", 6, 4, 8),
        (True, "bf16", "adamw_8bit", 6, 4, 2),
        (True, "bf16", "sgd", 6, 4, 4),
        (False, "bf16", "adamw", 2, 2, 4),  # pure 16-bit (torchtune)
        (True, "fp32", "adamw", 4, 4, 8),
    ],
)
def test_full_training_state_per_parameter(mixed, precision, optimizer, weights, grads, optim):
    shape = llama2_7b()
    wl = workload(
        task="full_finetune",
        precision=precision,
        weight_format=precision,
        compute_dtype=precision,
        mixed_precision=mixed,
        optimizer=optimizer,
    )
    parts = memory_per_gpu(shape, wl, "single", 1)
    assert parts["weights"] == shape.params_total * weights
    assert parts["gradients"] == shape.params_total * grads
    assert parts["optimizer_states"] == shape.params_total * optim


@pytest.mark.parametrize(("optimizer", "optim"), [("adamw", 12), ("adamw_8bit", 6), ("sgd", 8)])
def test_deepspeed_mixed_precision_follows_the_zero_paper(optimizer, optim):
    """ZeRO's accounting: 2 (16-bit weights) + 2 (16-bit grads) + K (fp32 master + states)."""
    shape = llama2_7b()
    wl = workload(task="full_finetune", optimizer=optimizer)
    parts = memory_per_gpu(shape, wl, "zero1", 2)
    assert parts["weights"] == shape.params_total * 2
    assert parts["gradients"] == shape.params_total * 2
    assert parts["optimizer_states"] == shape.params_total * optim // 2


def test_zero_stages_shard_what_the_paper_says():
    shape = llama2_7b()
    # A stack that keeps its gradients (DeepSpeed's buffers) shows every component at once.
    wl = workload(task="full_finetune", keeps_gradients=True)
    p = shape.params_total
    single = memory_per_gpu(shape, wl, "single", 1)
    ddp = memory_per_gpu(shape, wl, "ddp", 8)
    zero1 = memory_per_gpu(shape, wl, "zero1", 8)
    zero2 = memory_per_gpu(shape, wl, "zero2", 8)
    zero3 = memory_per_gpu(shape, wl, "zero3", 8)
    offload = memory_per_gpu(shape, wl, "zero3_offload", 8)
    assert ddp["gradients"] == 2 * single["gradients"]  # DDP bucket copy
    assert zero1["optimizer_states"] == 12 * p // 8
    assert zero2["gradients"] == 2 * p // 8
    gathered = 2 * (shape.params_linear // 32) * 2
    assert zero3["weights"] == int(2 * p / 8 + gathered)
    assert offload["optimizer_states"] == 0
    totals = [m["total_bytes"] for m in (ddp, zero1, zero2, zero3, offload)]
    assert totals == sorted(totals, reverse=True)


def test_total_is_the_sum_of_the_components_and_includes_context_and_reserve():
    parts = memory_per_gpu(llama2_7b(), workload(), "single", 1)
    components = {k: v for k, v in parts.items() if k not in ("total_bytes", "peak_phase")}
    assert parts["total_bytes"] == sum(components.values())
    assert parts["cuda_context"] == 600 * 2**20
    assert parts["allocator_reserve"] > 0


def test_7b_bf16_inference_is_near_the_published_measurement():
    """HF's 'LLM optimisation' guide measures ~14-15 GB peak for a 7B model in bf16 at short
    prompts; the seed's 1.2x rule gives 16.2 GB. The component sum must not undershoot."""
    parts = memory_per_gpu(llama2_7b(), workload(seq_len=512, new_tokens=128), "single", 1)
    assert 14.0e9 < parts["total_bytes"] < 16.5e9


def test_qlora_keeps_the_base_model_in_4_bit_and_adds_the_dequantisation_workspace():
    shape = llama2_7b()
    wl = workload(task="qlora", weight_format="int4", precision="int4", double_quant=True)
    parts = memory_per_gpu(shape, wl, "single", 1)
    adapters = lora_trainable_params(shape, wl)
    head = 32000 * 4096
    # Llama-2's 32000 x 4096 head is larger than its largest block layer (4096 x 11008), so the
    # layout with a 4-bit head dequantised whole (Lightning/LitGPT) needs more than the one
    # with a 16-bit head (transformers): 0.2 GB saved on the weights, 0.35 GB more workspace.
    # fp32 adapters, plus the 16-bit casts autocast caches for them during the forward pass.
    assert parts["weights"] == 3_762_823_168 - head * 2 + head // 2 + adapters * (4 + 2)
    # QLoRA's double quantisation: 0.127 bits of constants per weight; two 16-bit copies of
    # the head while it is dequantised.
    assert parts["quantization"] == int((6_476_005_376 + head) * 0.127 / 8 + 2 * head * 2)
    assert parts["optimizer_states"] == adapters * 8


def test_4_bit_head_layout_is_used_only_where_it_needs_more_memory():
    """A head smaller than the largest block layer costs less quantised than in 16-bit, so the
    16-bit-head layout (transformers' default) is the one that must fit."""
    shape = llama_like_shape(
        num_layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        intermediate_size=28672,
        vocab_size=32000,
    )
    wl = workload(task="inference", weight_format="int4", precision="int4")
    parts = memory_per_gpu(shape, wl, "single", 1)
    linear = shape.params_linear
    assert parts["weights"] == int(linear * 0.5 + (shape.params_total - linear) * 2)
    assert parts["quantization"] == int(linear * 4 / 64 + 2 * (8192 * 28672) * 2)


def test_tensor_parallel_splits_weights_and_kv_cache():
    shape = llama2_7b()
    wl = workload()
    one = memory_per_gpu(shape, wl, "single", 1)
    four = memory_per_gpu(shape, wl, "tensor_parallel", 4)
    assert four["weights"] == one["weights"] // 4
    assert four["kv_cache"] == one["kv_cache"] // 4


def test_deepseek_latent_kv_cache_is_narrower_than_heads_times_dims():
    deepseek = config("deepseek-ai__deepseek-llm-7b-base")
    shape = shape_from_architecture(architecture_from_config(deepseek))
    wl = workload(seq_len=1000, new_tokens=24)
    width = shape.kv_cache_width or 2 * shape.num_kv_heads * shape.head_dim
    assert kv_cache_bytes(shape, wl) == shape.num_layers * width * 1024 * 2


def test_lora_dropout_keeps_a_mask_and_a_copy_of_the_input_for_every_adapter():
    """PEFT gives each adapted module its own nn.Dropout: on q and v of Llama-2-7B that is two
    16-bit copies of the attention input plus two bool masks, and the frozen base then keeps
    no input of its own."""
    shape = llama2_7b()
    s, h = 2048, 4096
    plain = workload(task="lora", lora_targets=("q_proj", "v_proj"), mixed_precision=False)
    dropped = workload(
        task="lora", lora_targets=("q_proj", "v_proj"), mixed_precision=False, lora_dropout=True
    )
    extra = training_activations_per_layer(shape, dropped) - training_activations_per_layer(
        shape, plain
    )
    assert extra == 2 * (2 + 1) * s * h - 2 * s * h


def test_lora_dropout_on_experts_copies_only_the_tokens_routed_to_each_expert():
    """Mixtral routes each token to 2 of its 8 experts, and an expert's adapter (with its own
    dropout) sees only the tokens routed to it: per token, 2 copies of each expert input, not
    8. Counting every expert made a LoRA of Qwen3-30B-A3B (8 of 128 experts) keep 16x its
    real expert copies, about 190 GB at one 2,048-token sequence."""
    mixtral = config("mistralai__Mixtral-8x7B-v0.1")
    shape = shape_from_architecture(architecture_from_config(mixtral))
    h, f = 4096, 14336
    wl = workload(task="lora", lora_targets=("w1", "w3", "w2"), lora_dropout=True)
    # w1 and w3 read the hidden state, w2 the expert's inner state: a 16-bit copy and a
    # 1-byte mask of each, in the 2 experts the token visits.
    assert lora_dropout_bytes_per_token(shape, wl) == 2 * (2 + 1) * (h + h + f)
    eight_of_eight = replace(shape, experts_per_token=8)
    assert lora_dropout_bytes_per_token(eight_of_eight, wl) == 8 * (2 + 1) * (h + h + f)


def test_rmsnorm_inputs_are_kept_in_fp32_even_in_pure_16_bit_training():
    """transformers' LlamaRMSNorm upcasts to fp32 before normalising; GPT-NeoX's LayerNorm
    does not, so the same shape costs 2 bytes per norm input less under that family."""
    shape = llama2_7b()
    wl = workload(task="full_finetune", mixed_precision=False)
    neox = replace(shape, family="gpt_neox")
    s, h = 2048, 4096
    assert (
        training_activations_per_layer(shape, wl) - training_activations_per_layer(neox, wl)
        == 2 * (4 - 2) * s * h
    )


def test_frozen_16_bit_layers_keep_no_inputs_but_4_bit_layers_do():
    """LoRA on q/v only: the MLP's input and the down projection's input are not kept (their
    weights need no gradient); bitsandbytes' 4-bit matmul keeps its input regardless."""
    shape = llama2_7b()
    s, h, f = 2048, 4096, 11008
    lora = workload(task="lora", lora_targets=("q_proj", "v_proj"), mixed_precision=False)
    qlora = workload(
        task="qlora",
        weight_format="int4",
        precision="int4",
        lora_targets=("q_proj", "v_proj"),
        mixed_precision=False,
    )
    full = workload(task="full_finetune", mixed_precision=False)
    kept_by_full = training_activations_per_layer(shape, full)
    assert training_activations_per_layer(shape, qlora) == kept_by_full
    assert training_activations_per_layer(shape, lora) == kept_by_full - 2 * s * (h + f)


def test_sharded_mixed_precision_keeps_16_bit_layer_inputs_under_checkpointing():
    """Plain PyTorch AMP keeps fp32 parameters, so the residual stream (each checkpointed
    layer's input) is fp32; ZeRO and FSDP compute with 16-bit parameters, so it is 16-bit."""
    shape = llama2_7b()
    wl = workload(task="pretrain", gradient_checkpointing=True, seq_len=2048, keeps_gradients=True)
    amp = memory_per_gpu(shape, wl, "single", 1)["activations"]
    for strategy in ("zero2", "fsdp"):
        sharded = memory_per_gpu(shape, wl, strategy, 8)["activations"]
        # 32 layer inputs plus the embedding output and final norm input, 2 bytes less each
        assert amp - sharded == (32 + 2) * 2048 * 4096 * 2


# --- The phases of a training step ------------------------------------------------------------


def test_a_pytorch2_step_peaks_at_the_larger_phase_not_the_sum():
    """zero_grad(set_to_none=True) frees the gradients, so a step without accumulation never
    holds all gradients and all activations at once: full fine-tuning of a 7B model with a
    small batch peaks at the optimizer step, with no activations alive."""
    shape = llama2_7b()
    wl = workload(task="full_finetune", mixed_precision=False, seq_len=512)
    freed = memory_per_gpu(shape, wl, "single", 1)
    kept = memory_per_gpu(shape, replace(wl, keeps_gradients=True), "single", 1)
    assert freed["peak_phase"] == "optimizer"
    assert freed["activations"] == 0
    assert freed["gradients"] == shape.params_total * 2
    assert kept["peak_phase"] == "forward"
    assert kept["activations"] > 0
    assert kept["total_bytes"] - freed["total_bytes"] > 0.9 * kept["activations"]


def test_a_large_batch_peaks_at_the_end_of_the_forward_pass_with_only_the_head_gradient():
    shape = llama2_7b()
    wl = workload(task="full_finetune", mixed_precision=False, batch_size=16, seq_len=4096)
    parts = memory_per_gpu(shape, wl, "single", 1)
    assert parts["peak_phase"] == "forward"
    head = shape.vocab_size * shape.hidden_size
    assert parts["gradients"] == pytest.approx(2 * head, rel=1e-6)


def test_gradient_accumulation_keeps_the_gradients_alive_during_the_forward_pass():
    shape = llama2_7b()
    wl = workload(task="full_finetune", mixed_precision=False, batch_size=8, seq_len=512)
    model = MemoryModel(shape, wl)
    whole = model.per_gpu("single", 1, micro=8, accumulation=1)
    accumulated = model.per_gpu("single", 1, micro=4, accumulation=2)
    assert accumulated["peak_phase"] == "forward"
    assert accumulated["gradients"] == shape.params_total * 2
    # Half the activations, but every gradient beside them: accumulation is not free.
    assert accumulated["total_bytes"] > whole["total_bytes"]
    assert model.step_total("single", 1, "none", "adamw", 4, 2) == pytest.approx(
        accumulated["total_bytes"], rel=1e-6
    )
    assert model.step_total("single", 1, "none", "adamw", 8, 1) == pytest.approx(
        whole["total_bytes"], rel=1e-6
    )


def test_adapters_have_no_gradients_at_the_end_of_the_forward_pass():
    wl = workload(task="qlora", weight_format="int4", gradient_checkpointing=True)
    parts = memory_per_gpu(llama2_7b(), wl, "single", 1)
    assert parts["peak_phase"] == "forward"
    assert parts["gradients"] == 0


def test_only_an_encoders_masked_lm_training_builds_vocabulary_logits():
    """Fine-tuning BERT trains a task head: BertForSequenceClassification's loss reads two
    logits per sequence, not 30,522 per token, even where the checkpoint's config.json names
    BertForMaskedLM (bert-base-uncased's does), and the result says it assumed a task head.
    Masked-LM training (task pretrain) scores every token against the vocabulary."""
    from advisor.engine import estimate
    from advisor.engine.models import EstimateRequest
    from tests.engine.inputs import default_catalog

    def result(architecture, task):
        cfg = {**config("google-bert__bert-base-uncased"), "architectures": [architecture]}
        request = EstimateRequest(
            config=cfg, task=task, batch_size=32, seq_len=512, tokens=10**7,
            system="stanage", accelerator="a100-80-sxm4",
        )  # fmt: skip
        return estimate(request, default_catalog())

    assert result("BertForSequenceClassification", "full_finetune").memory.logits == 0
    fine_tuned = result("BertForMaskedLM", "full_finetune")
    assert fine_tuned.memory.logits == 0
    assert any(
        w.startswith("Fine-tuning BertForMaskedLM: a task head") for w in fine_tuned.warnings
    )
    assert result("BertForMaskedLM", "pretrain").memory.logits >= 32 * 512 * 30522 * 4
