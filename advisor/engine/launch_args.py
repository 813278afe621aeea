"""A training recipe in its library's own terms: the comments a starter script documents it
with and the command-line arguments that apply it (slurm.py writes them into the script)."""

from __future__ import annotations

from typing import NamedTuple

from advisor.engine.frameworks import Framework
from advisor.engine.models import Recipe
from advisor.engine.preference import NO_PRECOMPUTE, OBJECTIVE_NAMES, library_words
from advisor.engine.preference import checkpointing_off as preference_checkpointing_off
from advisor.engine.words import plural


class PreferenceLaunch(NamedTuple):
    """The training objective as the script needs it: its name (models.TrainingObjective),
    whether DPO's reference log-probabilities are computed before training, and for GRPO the
    completions per prompt, the longest completion, vLLM's share of each GPU, whether a KL
    penalty brings a reference model and how many GPUs each vLLM engine spans."""

    name: str = "sft"
    precomputed: bool = False
    generations: int = 0
    completion_tokens: int = 0
    vllm_share: float = 0.0
    kl_penalty: bool = False
    generation_tp: int = 1  # vllm_tensor_parallel_size


SFT = PreferenceLaunch()

# Hugging Face TrainingArguments.optim names for the engine's optimizers.
HF_OPTIM = {
    "adamw": "adamw_torch",
    "adamw_8bit": "adamw_bnb_8bit",
    "paged_adamw": "paged_adamw_32bit",
    "paged_adamw_8bit": "paged_adamw_8bit",
    "sgd": "sgd",
}


def recipe_lines(
    recipe: Recipe | None,
    framework: Framework,
    task: str,
    compiled: bool = False,
    objective: PreferenceLaunch = SFT,
) -> list[str]:
    """The recipe as comments, so the script documents what the estimate assumed."""
    if recipe is None or task == "inference":
        return [f"# Library assumed: {framework.name}."]
    off_note = []
    # The library checkpoints this task by default unless the script says otherwise (PEFT's
    # prepare_model_for_kbit_training, Unsloth, Axolotl): left on, the job fits in less
    # memory but runs slower than its estimate.
    on_by_default = framework.checkpointing.get(task, "none") != "none"
    if recipe.checkpointing == "none" and on_by_default and framework.checkpointing_off:
        switch = framework.checkpointing_off
        if objective.name != "sft":
            switch = preference_checkpointing_off(framework)
        off_note = [
            f"# No activation checkpointing, as estimated: {switch} (the "
            "library's default recomputes every layer: less memory, slower)."
        ]
    return (
        [
            f"# Library assumed: {framework.name}.",
            f"# Recipe: micro-batch {recipe.micro_batch} per GPU x "
            f"{plural(recipe.grad_accumulation, 'accumulation step')} = global batch "
            f"{recipe.global_batch}; "
            f"activation checkpointing {recipe.checkpointing}; optimizer {recipe.optimizer}"
            + (
                f"; tensor parallel {recipe.tp} within each node (sequence parallel)"
                + (f" x {recipe.pp} pipeline stages." if recipe.pp > 1 else ".")
                if recipe.tp > 1 and recipe.strategy == "tensor_parallel"
                else "."
            ),
        ]
        + off_note
        + ([f"# torch.compile, as estimated: {framework.compile_switch}."] if compiled else [])
        + objective_lines(framework, objective)
        + packing_note(framework, task, objective)
    )


def objective_lines(framework: Framework, objective: PreferenceLaunch) -> list[str]:
    """What a preference objective changes in the script's terms (preference.py)."""
    if objective.name == "sft":
        return []
    reference = ""
    if objective.precomputed:
        reference = (
            " The reference log-probabilities are computed once before training, as estimated "
            "(precompute_ref_log_probs=True; not with DeepSpeed ZeRO-3)."
        )
    elif objective.name in ("dpo", "kto"):
        reference = " The reference model runs beside the policy every step, as estimated" + (
            "."
            if framework.key in NO_PRECOMPUTE
            else " (precompute_ref_log_probs=True computes it once beforehand instead)."
        )
    if objective.name == "grpo":
        return [
            f"# Objective: {OBJECTIVE_NAMES['grpo']}, with TRL's GRPOTrainer and vLLM colocated "
            "on these GPUs; the batch sizes count completions, "
            f"{objective.generations} per prompt. Your reward functions go to "
            "GRPOTrainer(reward_funcs=...); their time is not in the estimate.",
            "# vllm_gpu_memory_utilization is vLLM's share of each GPU, sized by the estimate "
            "for its weights, the step's KV cache and its profile pass; training uses the rest.",
        ]
    trainer = library_words(framework, objective.name)
    counted = (
        "the batch sizes count labelled examples (at least 2 per GPU pass, for the KL term)"
        if objective.name == "kto"
        else "the batch sizes count preference pairs, whose chosen and rejected sequences run "
        "together"
    )
    return [
        f"# Objective: {OBJECTIVE_NAMES[objective.name]}, with {trainer}; {counted}.{reference}"
    ]


def packing_note(framework: Framework, task: str, objective: PreferenceLaunch = SFT) -> list[str]:
    """The estimate counts full sequences (result assumption 'Sequences (training)'): say how
    the library packs short examples, where the researcher's script chooses it."""
    if objective.name == "grpo":
        return [
            "# The estimate counts every completion at max_completion_length; completions that "
            "stop earlier cost less."
        ]
    if objective.name == "kto":
        return [
            "# The estimate counts every example at the full length; examples padded to the "
            "longest in their batch compute on the padding too."
        ]
    if objective.name != "sft":
        return [
            "# The estimate counts every sequence of a pair at the full length; pairs padded "
            "to the longest in their batch compute on the padding too."
        ]
    if not framework.packing or task == "pretrain":  # pre-training corpora stream full-length
        return []
    return [
        f"# The estimate counts full sequences: pack short examples ({framework.packing}); "
        "padded batches compute on their padding too."
    ]


def train_args(
    recipe: Recipe | None,
    framework: Framework,
    fused_loss: bool = False,
    dtype: str | None = None,
    compiled: bool = False,
    objective: PreferenceLaunch = SFT,
) -> str:
    """Command-line arguments that apply the recipe in the framework's own terms. `dtype`: the
    option's 16-bit compute type, as a flag where the library trains in fp32 unless told
    (TrainingArguments and Megatron-LM default to fp32; torchtune's configs say bf16)."""
    if recipe is None:
        return ""
    dtype_flag = f"--{dtype}" if dtype in ("bf16", "fp16") else None
    if framework.key == "torchtune":
        args = [
            f"batch_size={recipe.micro_batch}",
            f"gradient_accumulation_steps={recipe.grad_accumulation}",
            f"enable_activation_checkpointing={recipe.checkpointing != 'none'}",
        ]
        if recipe.tp > 1:  # full_finetune_distributed: TP within the node, FSDP over the rest
            args.append(f"tensor_parallel_dim={recipe.tp}")
        if compiled:
            args.append("compile=True")
        return " " + " ".join(args)
    if framework.key == "llama_factory":
        overrides = _llama_factory_overrides(recipe, fused_loss, dtype, compiled)
        if objective.name == "kto":
            overrides.append("stage=kto")
        elif objective.name != "sft":  # its preference stage; ORPO / SimPO need no reference
            free = objective.name == "reference_free_preference"
            overrides += ["stage=dpo", "pref_loss=orpo" if free else "pref_loss=sigmoid"]
        return " " + " ".join(overrides)
    if framework.key == "megatron" or (framework.key == "deepspeed" and recipe.tp > 1):
        # Megatron-LM, or Megatron-DeepSpeed for DeepSpeed with tensor parallelism.
        args = [
            f"--micro-batch-size {recipe.micro_batch}",
            f"--global-batch-size {recipe.global_batch}",
        ]
        if recipe.checkpointing != "none":
            args.append(f"--recompute-granularity {recipe.checkpointing}")
        if recipe.tp > 1:
            args.append(
                f"--tensor-model-parallel-size {recipe.tp} --sequence-parallel"
                + (" --use-distributed-optimizer" if framework.key == "megatron" else "")
            )
        if recipe.pp > 1:
            args.append(f"--pipeline-model-parallel-size {recipe.pp}")
        if dtype_flag:
            args.append(dtype_flag)
        return " " + " ".join(args)
    args = [
        f"--per_device_train_batch_size {recipe.micro_batch}",
        f"--gradient_accumulation_steps {recipe.grad_accumulation}",
    ]
    if dtype_flag:
        args.append(dtype_flag)
    if recipe.checkpointing != "none":
        args.append("--gradient_checkpointing")
    elif framework.key == "trl":
        args.append("--gradient_checkpointing False")  # TRL's configs default to True
    if recipe.optimizer:
        args.append(f"--optim {HF_OPTIM.get(recipe.optimizer, recipe.optimizer)}")
    if fused_loss:
        args.append("--use_liger_kernel")  # TrainingArguments: Liger's fused loss and kernels
    if compiled and framework.key in ("hf_trainer", "trl"):
        args.append("--torch_compile")
    if objective.precomputed:
        args.append("--precompute_ref_log_probs True")  # DPOConfig
    if objective.name == "grpo":
        args += _grpo_args(objective)
    return " " + " ".join(args)


def _grpo_args(objective: PreferenceLaunch) -> list[str]:
    """GRPOConfig's arguments: the group, the completion, vLLM colocated with its share of
    each GPU and its tensor-parallel size, and a beta where a KL penalty brings a reference."""
    args = []
    if objective.kl_penalty:  # a reference model; beta is the researcher's coefficient
        args.append("--beta 0.001")  # DeepSeek-R1's, as GRPOConfig's docs cite it
    args += [
        f"--num_generations {objective.generations}",
        f"--max_completion_length {objective.completion_tokens}",
        "--use_vllm True --vllm_mode colocate",
        f"--vllm_gpu_memory_utilization {objective.vllm_share:.2f}",
    ]
    if objective.generation_tp > 1:
        args.append(f"--vllm_tensor_parallel_size {objective.generation_tp}")
    return args


def _llama_factory_overrides(
    recipe: Recipe, fused_loss: bool, dtype: str | None, compiled: bool
) -> list[str]:
    """`key=value` overrides after the YAML config: llamafactory-cli merges them into it with
    OmegaConf (hparams/parser.py read_args). Its checkpointing is on unless disabled."""
    args = [
        f"per_device_train_batch_size={recipe.micro_batch}",
        f"gradient_accumulation_steps={recipe.grad_accumulation}",
        f"disable_gradient_checkpointing={str(recipe.checkpointing == 'none').lower()}",
    ]
    if dtype in ("bf16", "fp16"):
        args.append(f"{dtype}=true")
    if recipe.optimizer:
        args.append(f"optim={HF_OPTIM.get(recipe.optimizer, recipe.optimizer)}")
    if fused_loss:
        args.append("enable_liger_kernel=true")
    if compiled:
        args.append("torch_compile=true")
    return args
