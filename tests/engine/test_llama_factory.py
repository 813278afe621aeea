"""LLaMA-Factory: what the library allocates by default and the script that launches it.

Its own prepare_model_for_training checkpoints every job unless disable_gradient_checkpointing
and leaves a 4-bit base's embeddings and norms 16-bit (upcast_layernorm off), unlike PEFT's
prepare_model_for_kbit_training under the Trainer; llamafactory-cli takes the recipe as
`key=value` overrides after its YAML config, and several GPUs through FORCE_TORCHRUN."""

from __future__ import annotations

import pytest

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog

LLAMA2_7B = find_bundled("meta-llama/Llama-2-7b-hf").config
LLAMA2_70B = find_bundled("meta-llama/Llama-2-70b-hf").config


def run(config=LLAMA2_7B, framework="llama_factory", **fields):
    request = EstimateRequest(config=config, framework=framework, tokens=10**8, **fields)
    return estimate(request, default_catalog())


def option(result, strategy: str, accelerator: str = "a100-40-sxm4"):
    return next(
        o for o in result.options if o.strategy == strategy and o.accelerator == accelerator
    )


def test_every_training_task_checkpoints_by_default():
    """Asked to keep the library's default (the flowchart's 'not sure' leaves the field unset
    and the recipe may still turn it off where that is cheaper), the assumed library says so:
    a LoRA pinned to one A100 40GB at 4 x 4,096 fits only with the recomputation."""
    result = run(
        task="lora", seq_len=4096, batch_size=4, micro_batch=4, accelerator="a100-40-sxm4",
        num_gpus=1,
    )  # fmt: skip
    recipe = option(result, "single").recipe
    assert recipe.checkpointing == "full"
    library = next(a for a in result.assumptions if a.name == "Library")
    assert library.value == "LLaMA-Factory"
    assert "disable_gradient_checkpointing" in library.source


def test_qlora_at_long_context_keeps_the_residual_stream_16_bit():
    """LLaMA-Factory's wiki ran Llama 2 7B QLoRA at 32,768 tokens in 32 GB of an A100 40GB;
    the Trainer's fp32 upcast of the same job would need far more than the card."""
    fields = {
        "task": "qlora", "precision": "int4", "seq_len": 32_768, "batch_size": 4,
        "micro_batch": 1, "gradient_checkpointing": True, "accelerator": "a100-40-sxm4",
        "num_gpus": 1, "lora_rank": 8,
    }  # fmt: skip
    factory = option(run(**fields), "single")
    trainer = estimate(
        EstimateRequest(config=LLAMA2_7B, framework="hf_trainer", tokens=10**8, **fields),
        default_catalog(),
    )
    assert factory.fits
    assert factory.memory_per_gpu_bytes < 40e9
    assert not option(trainer, "single").fits


def test_one_gpu_runs_the_cli_with_the_recipe_as_overrides():
    result = run(
        task="lora", seq_len=2048, batch_size=16, micro_batch=2, accelerator="a100-80-sxm4",
        num_gpus=1, gradient_checkpointing=False,
    )  # fmt: skip
    script = result.slurm_script
    assert (
        "llamafactory-cli train YOUR_CONFIG.yaml per_device_train_batch_size=2 "
        "gradient_accumulation_steps=8 disable_gradient_checkpointing=true bf16=true "
        "optim=adamw_torch"
    ) in script
    assert "torchrun" not in script
    assert "FORCE_TORCHRUN" not in script
    assert "# Library assumed: LLaMA-Factory." in script


def seventy_b_full(strategy: str):
    """Full fine-tuning of a 70B model on 16 A100 80GB of Baskerville's 4-GPU nodes."""
    return run(
        config=LLAMA2_70B, task="full_finetune", seq_len=2048, batch_size=64,
        system="baskerville", accelerator="a100-80-sxm4", num_gpus=16, strategy=strategy,
    ).slurm_script  # fmt: skip


def test_zero3_over_nodes_uses_force_torchrun_and_its_deepspeed_config():
    """One srun task per node sets NODE_RANK from Slurm, and the ZeRO-3 layout names the
    repository's example config."""
    script = seventy_b_full("zero3")
    assert "#SBATCH --ntasks-per-node=1" in script
    launch = next(line for line in script.splitlines() if "llamafactory-cli" in line)
    assert launch.startswith('srun bash -c "FORCE_TORCHRUN=1 NNODES=4 NODE_RANK=\\$SLURM_NODEID')
    assert "NPROC_PER_NODE=4" in launch
    assert "MASTER_ADDR=$head_node" in launch
    assert "deepspeed=examples/deepspeed/ds_z3_config.json" in launch


def test_fsdp_goes_through_accelerate_and_the_repositorys_train_script():
    script = seventy_b_full("fsdp")
    assert "--use_fsdp --fsdp_sharding_strategy=FULL_SHARD src/train.py YOUR_CONFIG.yaml" in script


@pytest.mark.parametrize(
    ("framework", "launch"),
    [
        ("llama_factory", 'srun bash -c "FORCE_TORCHRUN=1 NNODES=2'),
        ("torchtune", "srun tune run --nnodes 2 --nproc_per_node 4 lora_finetune_distributed"),
    ],
)
def test_intel_gpus_launch_through_the_librarys_own_cli_too(framework, launch):
    """On Dawn's Max 1550s the recipe still goes to the library's CLI as its config overrides,
    not to an MPI launch of a script that would not read them; the script says what to do
    where torchrun does not start XPU workers."""
    script = run(
        task="lora", seq_len=2048, batch_size=32, system="dawn", accelerator="max1550-128",
        num_gpus=8, strategy="fsdp" if framework == "torchtune" else "ddp", framework=framework,
    ).slurm_script  # fmt: skip
    assert any(line.startswith(launch) for line in script.splitlines())
    assert not any(line.startswith("mpiexec") for line in script.splitlines())
    assert "pytorch/pytorch#158722" in script
