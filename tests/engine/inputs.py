"""What the engine tests estimate from: the real model configurations kept beside them
(tests/engine/configs) and the default catalog as the app loads it (the data file with the
shared benchmarks, bench/engine_rankings.catalog_from_file)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from bench.engine_rankings import catalog_from_file

CONFIGS = Path(__file__).resolve().parent / "configs"


def config(name: str) -> dict:
    """config.json of a model kept in tests/engine/configs ("owner__name")."""
    return json.loads((CONFIGS / name / "config.json").read_text())


@cache
def default_catalog():
    return catalog_from_file()


def on_one_a100_80gb(**fields):
    """(the result, its one-GPU option on the A100 80GB SXM4) for a request of `fields` pinned
    to that GPU, on the default catalog."""
    from advisor.engine import estimate
    from advisor.engine.models import EstimateRequest

    request = EstimateRequest(accelerator="a100-80-sxm4", num_gpus=1, **fields)
    result = estimate(request, default_catalog())
    option = next(
        o for o in result.options if o.accelerator == "a100-80-sxm4" and o.strategy == "single"
    )
    return result, option


def llama2_13b_prompts(
    batch: int,
    *,
    new_tokens: int,
    batches: int,
    framework: str = "transformers",
    gptq: bool = False,
    accelerator: str = "a100-80-sxm4",
    flash_attention: bool | None = None,
):
    """(the option on one GPU, the result) for `batches` batches of `batch` 512-token prompts
    to Llama-2-13B, fp16 or GPTQ 4-bit, each generating `new_tokens`, on the default catalog."""
    from advisor.engine import estimate
    from advisor.engine.models import EstimateRequest

    attention = {} if flash_attention is None else {"flash_attention": flash_attention}
    request = EstimateRequest(
        config=config("meta-llama__Llama-2-13b-hf"),
        task="inference",
        precision="int4" if gptq else "fp16",
        quantization="gptq" if gptq else None,
        seq_len=512,
        new_tokens=new_tokens,
        batch_size=batch,
        tokens=batches * batch * (512 + new_tokens),
        framework=framework,
        accelerator=accelerator,
        **attention,
        num_gpus=1,
    )
    result = estimate(request, default_catalog())
    option = next(o for o in result.options if o.gpu_hours and o.num_gpus == 1)
    return option, result
