"""QLoRA through the Trainer or Axolotl: PEFT's prepare_model_for_kbit_training casts every
16-bit parameter the base does not quantise to fp32, and the hidden states follow.

Unsloth's benchmark table of the largest context the Trainer ran (Llama 3.1 8B QLoRA, rank 32,
checkpointing) grows about 2.65 MB a token from a 12 GiB to an 80 GiB card; counted in 16 bits
the engine grew 2.20 MB a token and sat at 79-82 % of each card at its measured limit."""

from __future__ import annotations

import pytest

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog

LLAMA31_8B = find_bundled("meta-llama/Llama-3.1-8B-Instruct").config


def qlora(**fields):
    request = EstimateRequest(
        config=LLAMA31_8B,
        task="qlora",
        precision="bf16",
        batch_size=1,
        micro_batch=1,
        gradient_checkpointing=True,
        lora_rank=32,
        lora_dropout=0.0,
        double_quant=False,
        tokens=10**6,
        accelerator="a100-80-sxm4",
        num_gpus=1,
        **fields,
    )
    result = estimate(request, default_catalog())
    option = next(o for o in result.options if o.strategy == "single")
    return result, option.memory


def test_the_trainer_keeps_embeddings_head_and_norms_in_fp32():
    """Llama 3.1 8B's embeddings, untied head and norms are 1.05B parameters: 2.1 GB more in
    fp32 than in the pure-bf16 run (which also keeps its adapters in bf16)."""
    _, hf = qlora(framework="hf_trainer", seq_len=2048)
    _, pure = qlora(framework="hf_trainer", seq_len=2048, mixed_precision=False)
    kept = 2 * 128_256 * 4096 + (2 * 32 + 1) * 4096
    # Rank 32 x 32 layers x (in + out) of q, k, v, o, gate, up, down. Under AMP an adapter is
    # fp32 plus the bf16 copy autocast caches (6 bytes), in pure bf16 just 2.
    adapters = 32 * 32 * (8192 + 5120 + 5120 + 8192 + 3 * (4096 + 14336))
    assert hf.weights - pure.weights == 2 * kept + 4 * adapters


def test_the_trainers_growth_per_token_matches_unsloths_table():
    """From 932 to 28,454 tokens the Trainer's limit moves from a 12 GiB to an 80 GiB card:
    68 GiB over 27,522 tokens, 2.65 MB a token. The engine's estimate grows within 3 % of it."""
    _, short = qlora(framework="hf_trainer", seq_len=932)
    _, long = qlora(framework="hf_trainer", seq_len=28_454)
    per_token = (long.total_bytes - short.total_bytes) / (28_454 - 932)
    measured = 68 * 2**30 / 27_522
    assert per_token == pytest.approx(measured, rel=0.03)


def test_only_the_trainer_keeps_the_upcast():
    """Axolotl (and qlora.py) cast norms and embeddings back to the model's dtype after the
    preparation; torchtune, Unsloth, LLaMA-Factory (its own prepare_model_for_training,
    upcast_layernorm off by default) and TRL's current SFTTrainer (get_peft_model without the
    preparation) never upcast them."""
    _, hf = qlora(framework="hf_trainer", seq_len=2048)
    for framework in ("axolotl", "torchtune", "unsloth", "llama_factory", "trl"):
        _, other = qlora(framework=framework, seq_len=2048)
        assert other.weights < hf.weights - 2e9, framework


def test_the_result_says_what_peft_upcasts_and_how_to_avoid_it():
    result, _ = qlora(framework="hf_trainer", seq_len=2048)
    upcast = next(a for a in result.assumptions if a.name == "Parameters PEFT upcasts")
    assert upcast.value.startswith("1,050,939,392 parameters the base does not quantise")
    assert "mixed_precision false" in upcast.value
    assert "prepare_model_for_kbit_training" in upcast.source
    pure, _ = qlora(framework="hf_trainer", seq_len=2048, mixed_precision=False)
    assert not any(a.name == "Parameters PEFT upcasts" for a in pure.assumptions)
