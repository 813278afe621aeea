"""Counts from a config or the Hub are bounded: a number no real model has is refused, by field.

Issue 11: vocab_size or num_hidden_layers of 1e308 overflowed the memory formulas, 1e40 gave a
9e42-parameter answer with a 200, and a Hub safetensors total of 1e308 crashed math.log.
"""

from __future__ import annotations

import pytest

from advisor.engine import RequestError, estimate, parse_request
from advisor.engine.architecture import (
    architecture_from_config,
    architecture_from_hub,
    architecture_from_params,
)
from advisor.engine.errors import ConfigError
from advisor.engine.models import HubModelMetadata
from tests.engine.catalog_fixture import catalog
from tests.engine.inputs import config

LLAMA2_7B = config("meta-llama__Llama-2-7b-hf")
MIXTRAL = config("mistralai__Mixtral-8x7B-v0.1")


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"vocab_size": 1e308}, "vocab_size", "'vocab_size' is 1e+308, beyond any real model"),
        ({"vocab_size": 10**40}, "vocab_size", "beyond any real model (limit 4,194,304)"),
        ({"num_hidden_layers": 1e308}, "num_hidden_layers", "beyond any real model"),
        ({"num_hidden_layers": 10**40}, "num_hidden_layers", "(limit 4,096)"),
        ({"hidden_size": 2**40}, "hidden_size", "'hidden_size' is 1,099,511,627,776"),
        ({"intermediate_size": float("inf")}, "intermediate_size", "must be a positive integer"),
        ({"intermediate_size": float("nan")}, "intermediate_size", "must be a positive integer"),
        ({"num_key_value_heads": 10**30}, "num_key_value_heads", "beyond any real model"),
        ({"max_position_embeddings": 10**20}, "max_position_embeddings", "beyond any real"),
    ],
    ids=[
        "vocab-1e308",
        "vocab-1e40",
        "layers-1e308",
        "layers-1e40",
        "hidden-2e40",
        "ffn-inf",
        "ffn-nan",
        "kv-heads-1e30",
        "positions-1e20",
    ],
)
def test_config_values_beyond_any_real_model_are_refused(changes, field, message):
    with pytest.raises(ConfigError) as raised:
        architecture_from_config({**LLAMA2_7B, **changes})

    assert raised.value.field == field
    assert message in raised.value.message


def test_each_value_within_bounds_but_a_total_beyond_any_real_model_is_refused():
    config = {**LLAMA2_7B, "hidden_size": 1_048_576, "intermediate_size": 1_048_576}

    with pytest.raises(ConfigError, match="beyond any real model"):
        architecture_from_config({**config, "num_attention_heads": 8192, "num_hidden_layers": 4096})


def test_expert_counts_beyond_any_real_model_are_refused():
    with pytest.raises(ConfigError) as raised:
        architecture_from_config({**MIXTRAL, "num_local_experts": 10**9})

    assert raised.value.field == "num_local_experts"


def test_mlp_only_layers_longer_than_any_model_is_refused():
    config = {
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "vocab_size": 151936,
        "mlp_only_layers": list(range(100_000)),
    }

    with pytest.raises(ConfigError) as raised:
        architecture_from_config(config)

    assert raised.value.field == "mlp_only_layers"


@pytest.mark.parametrize(
    "metadata",
    [
        {"safetensors_total": 10**308},
        {"safetensors_parameters": {"F32": 10**308}},
        {"safetensors_parameters": {"BF16": 10**14}},
        {"safetensors_parameters": {"F32": -5}},
    ],
    ids=["total-1e308", "count-1e308", "count-1e14", "negative"],
)
def test_hub_counts_beyond_any_real_model_are_refused_not_a_crash(metadata):
    with pytest.raises(ConfigError) as raised:
        architecture_from_hub(HubModelMetadata(repo_id="someone/huge", **metadata))

    assert raised.value.field in ("safetensors_total", "safetensors_parameters")
    assert "safetensors count" in raised.value.message


def test_typed_count_beyond_any_real_model_is_refused():
    with pytest.raises(ConfigError) as raised:
        architecture_from_params(10**308)

    assert raised.value.field == "params"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"config": {**LLAMA2_7B, "vocab_size": 1e308}}, "config.vocab_size"),
        ({"config": {**LLAMA2_7B, "num_hidden_layers": 1e40}}, "config.num_hidden_layers"),
        (
            {"hub": {"repo_id": "someone/huge", "safetensors_total": 10**308}},
            "hub.safetensors_total",
        ),
        (
            {
                "hub": {
                    "repo_id": "someone/huge",
                    "safetensors_parameters": {"F32": 10**300},
                    "config": LLAMA2_7B,
                }
            },
            "hub.safetensors_parameters",
        ),
    ],
    ids=["config-vocab", "config-layers", "hub-total", "hub-count"],
)
def test_estimate_names_the_field_of_an_unreal_count(data, field):
    with pytest.raises(RequestError) as raised:
        estimate(parse_request({"task": "inference", **data}), catalog())

    fields = [f for f, _ in raised.value.errors]
    assert fields == [field]
