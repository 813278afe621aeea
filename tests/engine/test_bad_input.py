"""Bad input gets a clear message naming the field; nothing else happens."""

import subprocess
import sys

import pytest

from advisor.engine import EstimateError, RequestError, estimate, parse_request
from tests.engine.catalog_fixture import catalog
from tests.engine.inputs import config

LLAMA2_7B = config("meta-llama__Llama-2-7b-hf")


def errors_for(data: dict) -> list[tuple[str, str]]:
    with pytest.raises(RequestError) as caught:
        estimate(parse_request(data), catalog())
    return caught.value.errors


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (
            {"params": 7_000_000_000, "task": "finetune"},
            "task",
            "must be one of 'inference', 'full_finetune', 'lora', 'qlora' or 'pretrain'; "
            "got 'finetune'.",
        ),
        (
            {"params": 7_000_000_000, "task": "inference", "precision": "fp64"},
            "precision",
            "must be one of 'fp32', 'fp16', 'bf16', 'fp8', 'int8' or 'int4'; got 'fp64'.",
        ),
        (
            {"params": 0, "task": "inference"},
            "params",
            "must be greater than 0; got 0.",
        ),
        (
            {"params": 7_000_000_000, "task": "inference", "batch_size": -4},
            "batch_size",
            "must be at least 1; got -4.",
        ),
        (
            {"params": 7_000_000_000, "task": "inference", "temperature": 0.7},
            "temperature",
            "is not a field the estimate understands.",
        ),
        (
            {"params": 7_000_000_000, "task": "inference", "seq_len": 10**9},
            "seq_len",
            "1,000,000,000 is beyond any real workload (limit 2,097,152).",
        ),
        (
            {"params": 10**15, "task": "inference"},
            "params",
            "1,000,000,000,000,000 is beyond any real workload (limit 10,000,000,000,000).",
        ),
        (
            {"params": 7_000_000_000, "task": "qlora", "precision": "fp32"},
            "precision",
            "QLoRA keeps the base model in 4-bit NF4 and computes in 16-bit; fp32 is not a "
            "QLoRA precision (use bf16, fp16 or int4).",
        ),
        (
            {"params": 7_000_000_000, "task": "full_finetune", "precision": "int4"},
            "precision",
            "int4 full finetune is not possible: the optimizer cannot update quantised "
            "weights. Use lora/qlora, or fp32, fp16 or bf16.",
        ),
        (
            {"config": LLAMA2_7B, "task": "lora", "lora_rank": 8192},
            "lora_rank",
            "LoRA rank 8192 is larger than the model's hidden size 4096; a rank at most a "
            "fraction of it makes sense.",
        ),
        (
            {"params": 7_000_000_000, "task": "inference", "strategy": "zero3"},
            "strategy",
            "zero3 shards training state; inference runs on one GPU or with tensor "
            "parallelism, which the engine chooses.",
        ),
        (
            {"model_id": "meta-llama/Llama-2-7b-hf", "task": "inference"},
            "model_id",
            "'meta-llama/Llama-2-7b-hf' has not been looked up: run the Hub lookup first "
            "(it fills hub), or give config or params.",
        ),
        (
            {"task": "inference"},
            "model_id",
            "Name the model: give model_id, config or params.",
        ),
        (
            {"params": 7_000_000_000, "task": "inference", "system": "archer3"},
            "system",
            "Unknown system 'archer3'; known: azure, baskerville, bede, cosma8, dawn, hex, "
            "jade2, stanage.",
        ),
    ],
)
def test_bad_input_names_the_field(data, field, message):
    assert (field, message) in errors_for(data)


def test_a_config_that_is_not_one_names_a_config_field():
    errors = errors_for({"config": {"hello": "world"}, "task": "inference"})
    assert errors[0][0].startswith("config")


def test_request_errors_are_value_errors_for_callers_that_catch_broadly():
    assert issubclass(RequestError, EstimateError)
    assert issubclass(EstimateError, ValueError)


def test_not_a_json_object():
    with pytest.raises(RequestError) as caught:
        parse_request(["inference"])
    assert caught.value.errors == [("", "The request must be a JSON object.")]


def test_engine_imports_nothing_from_django():
    code = (
        "import sys, advisor.engine, advisor.engine.architecture; "
        "assert not [m for m in sys.modules if m == 'django' or m.startswith('django.')], "
        "'django imported'; print('clean')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "clean", done.stderr


def test_a_diffusers_component_is_named_and_the_parameter_count_asked_for():
    """A researcher pastes a diffusers UNet's config.json: it has no transformers family, and
    the message says what it is rather than listing every family."""
    unet = {
        "_class_name": "UNet2DConditionModel",
        "_diffusers_version": "0.19.0",
        "block_out_channels": [320, 640, 1280],
        "cross_attention_dim": 2048,
    }
    with pytest.raises(RequestError) as caught:
        estimate(
            parse_request({"config": unet, "task": "full_finetune", "tokens": 10**6}), catalog()
        )
    message = dict(caught.value.errors)["config.model_type"]
    assert "diffusers model component (UNet2DConditionModel)" in message
    assert "parameter count" in message
    assert "apertus" not in message
