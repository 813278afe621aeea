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


def test_gptq_is_refused_for_training_with_the_field_named():
    with pytest.raises(RequestError) as caught:
        estimate(
            parse_request(
                {"config": LLAMA2_13B, "task": "qlora", "precision": "int4", "quantization": "gptq"}
            ),
            catalog(),
        )
    assert [field for field, _ in caught.value.errors] == ["quantization"]
