"""TRL's SFTTrainer as it ships since 1.7: gradient checkpointing on for every trainer
(base_config.py) and the loss in checkpointed chunks of 256 tokens (loss_type "chunked_nll"),
so no logits are kept per token; a 4-bit base is wrapped without PEFT's fp32 preparation."""

from __future__ import annotations

import pytest

from advisor.model_configs import find_bundled
from tests.engine.inputs import on_one_a100_80gb

LLAMA3_8B = find_bundled("meta-llama/Meta-Llama-3-8B").config
VOCAB = 128_256


def one_gpu(framework: str, task: str = "lora", **fields):
    return on_one_a100_80gb(
        config=LLAMA3_8B, task=task, tokens=10**8, framework=framework, **fields
    )


def test_one_chunk_of_logits_whatever_the_micro_batch():
    """256 tokens x 128,256 entries x 12 bytes and the head weight's fp32 copy (128,256 x 4,096
    x 4 bytes), at micro-batch 1 and 4 alike; the Trainer keeps 12 bytes for every token of the
    micro-batch."""
    chunk = 256 * VOCAB * 12 + VOCAB * 4096 * 4
    for micro in (1, 4):
        fields = {"seq_len": 4096, "batch_size": 8, "micro_batch": micro}
        _, trl = one_gpu("trl", gradient_checkpointing=True, **fields)
        _, trainer = one_gpu("hf_trainer", gradient_checkpointing=True, **fields)
        assert trl.memory.logits == pytest.approx(chunk, rel=0.01)
        assert trainer.memory.logits == pytest.approx(micro * 4096 * VOCAB * 12, rel=0.01)


def test_a_fused_loss_said_either_way_replaces_the_chunking():
    _, liger = one_gpu("trl", seq_len=4096, batch_size=8, micro_batch=2, fused_loss=True)
    _, nll = one_gpu("trl", seq_len=4096, batch_size=8, micro_batch=2, fused_loss=False)
    assert liger.memory.logits == 0
    assert nll.memory.logits == pytest.approx(2 * 4096 * VOCAB * 12, rel=0.01)


def test_the_result_says_how_the_loss_is_chunked():
    result, _ = one_gpu("trl", seq_len=4096, batch_size=8)
    logits = next(a for a in result.assumptions if a.name.startswith("Logits"))
    assert "over 256 tokens at a time" in logits.value
    assert "(2.50 GB)" in logits.value
    library = next(a for a in result.assumptions if a.name == "Library")
    assert library.value == "TRL 1.7 or newer (SFTTrainer, DPOTrainer)"
    assert "gradient_checkpointing default True" in library.source


def test_the_script_turns_trls_checkpointing_off_when_the_recipe_runs_without_it():
    """A LoRA of 8B at 1 x 1,024 fits an 80 GB card without recomputation, the cheaper
    recipe; TRL would recompute unless told."""
    result, option = one_gpu("trl", seq_len=1024, batch_size=8, system="baskerville")
    assert option.recipe.checkpointing == "none"
    assert "--gradient_checkpointing False" in result.slurm_script
    assert "SFTConfig(gradient_checkpointing=False)" in result.slurm_script


def test_the_script_asks_for_checkpointing_where_the_recipe_needs_it():
    result, option = one_gpu("trl", seq_len=8192, batch_size=8, micro_batch=8, system="baskerville")
    assert option.recipe.checkpointing == "full"
    assert "--gradient_checkpointing --optim" in result.slurm_script


def test_adapters_on_a_4_bit_base_are_bf16():
    """TRL casts a quantised base's trainable adapters to bf16 (sft_trainer.py, after the QLoRA
    paper): 2-byte weights and AdamW moments, where AMP's fp32 adapters take 4 + 2 (autocast's
    copy) and 8 (the gradients are freed before this peak, the end of the forward pass).
    LLaMA-Factory keeps them fp32 and upcasts nothing else either."""
    fields = {
        "task": "qlora", "precision": "int4", "seq_len": 2048, "batch_size": 1,
        "gradient_checkpointing": True, "lora_rank": 32, "lora_dropout": 0.0,
    }  # fmt: skip
    trl = one_gpu("trl", **fields)[1].memory
    factory = one_gpu("llama_factory", **fields)[1].memory
    # Rank 32 x 32 layers x (in + out) of q, k, v, o, gate, up and down.
    adapters = 32 * 32 * (4096 + 4096 + 4096 + 1024 + 4096 + 1024 + 4096 + 4096)
    adapters += 32 * 32 * 3 * (4096 + 14336)
    assert factory.weights - trl.weights == adapters * (4 + 2 - 2)
    assert factory.optimizer_states - trl.optimizer_states == adapters * (8 - 4)
