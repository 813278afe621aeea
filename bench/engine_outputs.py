"""Dump every estimate the ranking bench times, plus varied requests, as JSON: a speed change
must not change a single output. `python bench/engine_outputs.py OUT.json`, then diff two dumps
(e.g. this checkout's against main's: `--engine-root DIR` times another tree's `advisor`, as
bench/engine_rankings.py does)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if "--engine-root" in sys.argv:
    sys.path.insert(0, sys.argv[sys.argv.index("--engine-root") + 1])

from advisor.engine import estimate  # noqa: E402
from advisor.engine.models import EstimateRequest  # noqa: E402
from bench.engine_rankings import catalogs, config, requests  # noqa: E402


def varied() -> dict[str, EstimateRequest]:
    """Tasks, precisions, pinned counts, strategies, frameworks and constraints beyond the
    bench's six requests."""
    return {**_varied_training(), **_varied_libraries(), **_varied_inference()}


def _varied_training() -> dict[str, EstimateRequest]:
    llama7 = config("meta-llama__Llama-2-7b-hf")
    llama13 = config("meta-llama__Llama-2-13b-hf")
    gpt2 = config("openai-community__gpt2")
    gemma = config("google__gemma-7b")
    req = EstimateRequest
    return {
        "gpt2 pretrain fp32": req(config=gpt2, task="pretrain", precision="fp32", tokens=10**9),
        "gpt2 full fp16 batch 64": req(
            config=gpt2, task="full_finetune", precision="fp16", batch_size=64, tokens=10**8
        ),
        "qwen0.5 lora no tokens": req(config=config("Qwen__Qwen2.5-0.5B"), task="lora"),
        "7B full 4 GPUs zero3": req(
            config=llama7, task="full_finetune", num_gpus=4, strategy="zero3", tokens=10**8
        ),
        "7B full pinned micro 2 batch 32": req(
            config=llama7, task="full_finetune", micro_batch=2, batch_size=32, tokens=10**8
        ),
        "7B full adamw_8bit no ckpt": req(
            config=llama7,
            task="full_finetune",
            optimizer="adamw_8bit",
            gradient_checkpointing=False,
            tokens=10**8,
        ),
        "7B lora seq 8192 no flash": req(
            config=llama7, task="lora", seq_len=8192, flash_attention=False, tokens=10**7
        ),
        "13B full max 8 GPUs 24 h": req(
            config=llama13,
            task="full_finetune",
            tokens=10**9,
            constraints={"max_gpus": 8, "max_wall_hours": 24},
        ),
        "20B pretrain fsdp": req(
            config=config("EleutherAI__gpt-neox-20b"),
            task="pretrain",
            strategy="fsdp",
            tokens=10**10,
        ),  # fmt: skip
        "gemma full confidential": req(
            config=gemma,
            task="full_finetune",
            tokens=10**8,
            constraints={"data_sensitivity": "confidential"},
        ),
        "gemma lora notebooks no cloud": req(
            config=gemma,
            task="lora",
            tokens=10**8,
            constraints={"needs_notebooks": True, "needs_cloud": False},
        ),
        "7B lora cloud only 2 epochs": req(
            config=llama7, task="lora", tokens=10**8, epochs=2, constraints={"needs_cloud": True}
        ),
        "3B params full fp16 on v100": req(
            params=3_000_000_000,
            task="full_finetune",
            precision="fp16",
            tokens=10**9,
            accelerator="v100-32-sxm2",
        ),
        "1B params pretrain batch 512": req(
            params=1_000_000_000, task="pretrain", batch_size=512, tokens=10**10
        ),
        "7B full sgd ddp": req(
            config=llama7, task="full_finetune", optimizer="sgd", strategy="ddp", tokens=10**8
        ),
    }


def _varied_libraries() -> dict[str, EstimateRequest]:
    llama7 = config("meta-llama__Llama-2-7b-hf")
    llama13 = config("meta-llama__Llama-2-13b-hf")
    req = EstimateRequest
    return {
        "13B qlora deepspeed": req(
            config=llama13, task="qlora", precision="int4", framework="deepspeed", tokens=10**8
        ),
        "7B lora rank 64 torchtune": req(
            config=llama7, task="lora", lora_rank=64, framework="torchtune", tokens=10**8
        ),
        "7B lora seq 4096 trl": req(
            config=llama7, task="lora", seq_len=4096, framework="trl", tokens=10**8
        ),
        "7B full dpo trl": req(
            config=llama7, task="full_finetune", training_objective="dpo", tokens=10**8
        ),
        "7B lora kto trl": req(config=llama7, task="lora", training_objective="kto", tokens=10**8),
        "7B lora grpo trl": req(
            config=llama7, task="lora", training_objective="grpo", tokens=10**8, batch_size=64
        ),
        # vLLM split over a node (its degree chosen per option) and a 4-bit vLLM copy.
        "70B lora grpo trl": req(
            config=config("meta-llama__Llama-2-70b-hf"),
            task="lora",
            training_objective="grpo",
            tokens=10**8,
        ),
        "7B qlora grpo trl 4 GPUs": req(
            config=llama7,
            task="qlora",
            precision="int4",
            training_objective="grpo",
            tokens=10**8,
            batch_size=64,
            num_gpus=4,
        ),
        "13B qlora llama-factory 2 GPUs zero3": req(
            config=llama13,
            task="qlora",
            precision="int4",
            framework="llama_factory",
            num_gpus=2,
            strategy="zero3",
            tokens=10**8,
        ),
    }


def _varied_inference() -> dict[str, EstimateRequest]:
    llama7 = config("meta-llama__Llama-2-7b-hf")
    neox = config("EleutherAI__gpt-neox-20b")
    req = EstimateRequest
    return {
        "qwen0.5 inference int8": req(
            config=config("Qwen__Qwen2.5-0.5B"), task="inference", precision="int8", tokens=10**6
        ),
        "7B inference int4 vllm": req(
            config=llama7, task="inference", precision="int4", framework="vllm", tokens=10**8
        ),
        "20B inference 2 GPUs": req(config=neox, task="inference", num_gpus=2, tokens=10**7),
        "70B inference 1 GPU pinned": req(
            config=config("meta-llama__Llama-2-70b-hf"),
            task="inference",
            num_gpus=1,
            tokens=10**6,
        ),
        "7B inference batch 16 new 512": req(
            config=llama7, task="inference", batch_size=16, new_tokens=512, tokens=10**8
        ),
    }


def dump() -> dict:
    out = {}
    every = {**requests(), **varied()}
    for key, (_, cat) in catalogs("both").items():
        for name, request in every.items():
            try:
                result = estimate(request, cat).model_dump(mode="json")
            except ValueError as error:  # an EstimateError: its message is the output
                result = {"error": str(error)}
            out[f"{key}: {name}"] = result
    return out


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--engine-root" in sys.argv:
        args.remove(sys.argv[sys.argv.index("--engine-root") + 1])
    Path(args[0]).write_text(json.dumps(dump(), indent=1, sort_keys=True))
