"""A GPTQ checkpoint for 4-bit inference: packed weights with per-group scales and zeros, the
LM head left in 16-bit, and no bitsandbytes needed."""

import pytest

from advisor.engine import RequestError, estimate, parse_request
from tests.engine.catalog_fixture import catalog
from tests.engine.inputs import config

LLAMA2_13B = config("meta-llama__Llama-2-13b-hf")


def _a100(**fields):
    request = parse_request(
        {
            "config": LLAMA2_13B,
            "task": "inference",
            "precision": "int4",
            "seq_len": 512,
            "new_tokens": 512,
            "num_gpus": 1,
            **fields,
        }
    )
    result = estimate(request, catalog())
    option = next(o for o in result.options if o.accelerator == "a100-80-sxm4")
    return result, option


def test_gptq_stores_less_than_nf4_without_double_quantisation_and_says_how():
    _, nf4 = _a100()
    result, gptq = _a100(quantization="gptq")
    # 12.7 B quantised parameters: 2.5 bytes per group of 128 against NF4's 4 per block of 64.
    assert gptq.memory.quantization < nf4.memory.quantization / 2
    assert gptq.memory.weights == nf4.memory.weights
    names = [a.name for a in result.assumptions]
    assert "GPTQ scales and zero points" in names
    assert "NF4 quantisation constants" not in names


def test_gptq_is_refused_for_full_training_with_the_field_named():
    with pytest.raises(RequestError) as caught:
        estimate(
            parse_request(
                {
                    "config": LLAMA2_13B,
                    "task": "full_finetune",
                    "precision": "bf16",
                    "quantization": "gptq",
                }
            ),
            catalog(),
        )
    assert [field for field, _ in caught.value.errors] == ["quantization"]


@pytest.mark.parametrize("task", ["lora", "qlora"])
def test_adapters_over_a_gptq_base_are_sized_as_qlora_as_for_its_checkpoint(task):
    """Naming GPTQ in the request gives what a GPTQ checkpoint's own config gives: QLoRA over
    the 4-bit base (NF4's bytes, no double quantisation), with a warning that says so."""
    body = {"config": LLAMA2_13B, "tokens": 10**6, "seq_len": 1024, "num_gpus": 1}
    named = estimate(parse_request({**body, "task": task, "quantization": "gptq"}), catalog())
    plain = estimate(
        parse_request({**body, "task": "qlora", "precision": "int4", "double_quant": False}),
        catalog(),
    )
    assert any("GPTQ base" in w and "QLoRA" in w for w in named.warnings)
    assert named.memory == plain.memory
    assert named.recommendation.gpu_hours == plain.recommendation.gpu_hours


def _published(quantization: dict, **fields):
    body = {
        "config": {**config("Qwen__Qwen2.5-7B"), "quantization_config": quantization},
        "task": "inference",
        "tokens": 10**6,
        **fields,
    }
    return estimate(parse_request(body), catalog())


@pytest.mark.parametrize("method", ["gptq", "awq"])
def test_a_4_bit_gptq_or_awq_checkpoint_is_sized_as_published(method):
    """Qwen2.5-7B-Instruct-GPTQ-Int4 and -AWQ are about 5.6 GB on the Hub, not the 15 GB of the
    bf16 model: with the precision left open the engine sizes what the libraries load."""
    result = _published({"quant_method": method, "bits": 4, "group_size": 128})
    assert 5e9 < result.memory.weights < 6e9
    assert any(f"4-bit {method.upper()}" in w and "as published" in w for w in result.warnings)
    asked = _published({"quant_method": method, "bits": 4, "group_size": 128}, precision="bf16")
    assert asked.memory.weights > 14e9


def test_a_quantisation_the_engine_does_not_model_is_named():
    result = _published({"quant_method": "gptq", "bits": 8, "group_size": 128})
    assert any("gptq, 8-bit" in w and "does not model" in w for w in result.warnings)


UNSLOTH_BNB_4BIT = {
    "quant_method": "bitsandbytes",
    "load_in_4bit": True,
    "load_in_8bit": False,
    "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": True,
    "bnb_4bit_compute_dtype": "bfloat16",
}


def test_a_bitsandbytes_4_bit_checkpoint_is_served_and_lora_trained_in_4_bits():
    """unsloth/*-bnb-4bit repositories load quantised: serving one is int4, LoRA on it QLoRA
    (a 16-bit LoRA of the 7B would need more than twice the memory)."""
    served = _published(UNSLOTH_BNB_4BIT)
    assert 5e9 < served.memory.weights < 6e9
    assert any("bitsandbytes (int4" in w for w in served.warnings)
    body = {
        "config": {**config("Qwen__Qwen2.5-7B"), "quantization_config": UNSLOTH_BNB_4BIT},
        "task": "lora",
        "tokens": 10**6,
    }
    lora = estimate(parse_request(body), catalog())
    assert any("LoRA on it is QLoRA" in w for w in lora.warnings)
    assert lora.memory.weights < 10e9  # 4-bit blocks; PEFT keeps embeddings and head fp32
    assert lora.memory.quantization > 0


def test_lora_on_a_gptq_checkpoint_is_qlora():
    """Qwen's README fine-tunes its Int4 (GPTQ) release with Q-LoRA: adapters over the 4-bit
    base, not a 16-bit LoRA."""
    body = {
        "config": {
            **config("Qwen__Qwen2.5-7B"),
            "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128},
        },
        "task": "lora",
        "tokens": 10**6,
    }
    result = estimate(parse_request(body), catalog())
    assert any("LoRA on it is QLoRA" in w for w in result.warnings)
    assert result.memory.weights < 10e9
