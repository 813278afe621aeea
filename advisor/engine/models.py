"""The engine's inputs and outputs: frozen pydantic models, no Django.

Field names of EstimateRequest and EstimateResult are a contract (../shared/design.md, v1):
fields may be added, never renamed. The catalog reaches the engine as the *Spec models of
catalog_schema (re-exported here), mapped from the catalog's rows by
`advisor.engine_catalog.engine_catalog()`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

# The catalog's enumerations and specs are defined once, in catalog_schema (pure pydantic,
# shared with the catalog app and its data files); the names stay importable from here.
from catalog_schema import (
    DEFAULT_TIE_BREAKERS,  # noqa: F401 (re-exported)
    AcceleratorSpec,  # noqa: F401 (re-exported)
    BenchmarkSpec,  # noqa: F401 (re-exported)
    CatalogSpec,  # noqa: F401 (re-exported)
    ChargeRateSpec,  # noqa: F401 (re-exported)
    CurrencyValueSpec,  # noqa: F401 (re-exported)
    DataSensitivity,
    NodeTypeSpec,  # noqa: F401 (re-exported)
    PartitionSpec,  # noqa: F401 (re-exported)
    Precision,
    RankingPolicySpec,  # noqa: F401 (re-exported)
    SystemKind,  # noqa: F401 (re-exported)
    SystemSpec,  # noqa: F401 (re-exported)
    SystemStatus,  # noqa: F401 (re-exported)
    Task,
    TieBreaker,  # noqa: F401 (re-exported)
)
from catalog_schema import Frozen as _Frozen

# paged_*: bitsandbytes' paged optimizers (QLoRA paper section 3): the same state bytes in CUDA
# unified memory, evicted to CPU RAM under memory pressure instead of failing.
Optimizer = Literal["adamw", "adamw_8bit", "paged_adamw", "paged_adamw_8bit", "sgd"]
# The library that runs the job (advisor/engine/frameworks.py); "not_sure" maps to the most
# common one (Transformers Trainer for training, Transformers generate() for inference).
FrameworkName = Literal[
    "not_sure",
    "hf_trainer",
    "trl",
    "torchtune",
    "unsloth",
    "axolotl",
    "llama_factory",
    "lightning",
    "deepspeed",
    "megatron",
    "transformers",
    "transformers_legacy",
    "litgpt",
    "vllm",
    "tgi",
]
# What a fine-tuning job optimises. "sft": the next-token loss on given text. "dpo": preference
# pairs scored against a frozen reference model (DPO and its variants IPO, robust DPO, BCO
# pair losses: TRL's DPOTrainer, LLaMA-Factory stage dpo, torchtune's *_dpo_* recipes);
# "reference_free_preference": preference pairs without a reference model (ORPO, SimPO,
# CPO). Both pair objectives run the chosen and the rejected sequence of every pair. "kto":
# single responses labelled desirable or undesirable, scored against a frozen reference with a
# KL estimate from mismatched prompt / response pairs (TRL's KTOTrainer, LLaMA-Factory stage kto).
# "grpo": online reinforcement learning that samples a group of completions per prompt and
# trains on them every step (GRPO and its loss variants, TRL's GRPOTrainer with vLLM colocated).
TrainingObjective = Literal["sft", "dpo", "reference_free_preference", "kto", "grpo"]
Checkpointing = Literal["none", "selective", "full"]
# What a researcher may ask for; the engine may also choose "single" (one GPU),
# "tensor_parallel" (within a node) or, for vLLM on GPUs linked by PCIe, "pipeline_parallel"
# (a stage of the layers per GPU of a node) for an option.
RequestStrategy = Literal["ddp", "fsdp", "zero1", "zero2", "zero3", "zero3_offload"]
Strategy = Literal[
    "single",
    "ddp",
    "fsdp",
    "zero1",
    "zero2",
    "zero3",
    "zero3_offload",
    "tensor_parallel",
    "pipeline_parallel",
]


# --- Hugging Face metadata, as the lookup stores it ------------------------------------------


class HubModelMetadata(_Frozen):
    """What a Hub lookup found; the engine prefers these counts over counting the config."""

    repo_id: str
    sha: str | None = None
    # safetensors parameter counts per dtype ("BF16": 7241732096, "I32": ...). They include
    # buffers and count packed quantised integers as stored (../shared/hf-hub-notes.md).
    safetensors_parameters: dict[str, int] = Field(default_factory=dict)
    safetensors_total: int | None = None
    quantization_config: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    pipeline_tag: str | None = None
    library_name: str | None = None
    license: str | None = None
    gated: bool | str = False  # False, "auto" or "manual"
    # Best parameter count the lookup found: safetensors total, else counted from config.json.
    params_total: int | None = None
    params_source: str = ""
    file_sizes: dict[str, int] = Field(default_factory=dict)  # repo file name -> bytes


# --- Request ----------------------------------------------------------------------------------


class Constraints(_Frozen):
    """What the researcher's situation rules out, from the flowchart's answers."""

    data_sensitivity: DataSensitivity = "public"
    needs_notebooks: bool = False
    needs_cloud: bool | None = None  # True: cloud only; False: no cloud; None: either
    max_gpus: int | None = Field(default=None, ge=1)
    max_wall_hours: float | None = Field(default=None, gt=0)
    systems: list[str] | None = None  # limit to these catalog systems (an institute's own)


class EstimateRequest(_Frozen):
    # One of model_id / config / params (model_id may come with hub metadata from a lookup).
    model_id: str | None = None
    config: dict[str, Any] | None = None
    params: int | None = Field(default=None, gt=0)
    hub: HubModelMetadata | None = None

    task: Task
    # None: not said, 16-bit mixed precision in whichever type each GPU has (bf16, else fp16;
    # workload.build_workload). A precision given, bf16 included, is never changed.
    precision: Precision | None = None
    # The global batch per optimizer step (sequences), split over data-parallel GPUs and
    # micro-batches with gradient accumulation by the recipe search; inference: concurrent
    # requests per replica. None: not given, the task's sourced default
    # (workload.global_batch, the one place that reads it).
    batch_size: int | None = Field(default=None, ge=1)
    # Sequences per forward pass on one GPU; None: the recipe search chooses.
    micro_batch: int | None = Field(default=None, ge=1)
    # Tokens per sequence; None: 2,048, or the model's own limit where shorter (a BERT's 512
    # positions, a ViT's image tokens), workload.sequence_length.
    seq_len: int | None = Field(default=None, ge=1)
    # Tokens processed per epoch (training), or prompt+generated tokens in total (inference).
    tokens: int | None = Field(default=None, ge=0)
    # Inference: tokens generated per request. Training an encoder-decoder (T5, BART, Whisper):
    # the target's tokens per sequence, which its decoder writes; None: as long as the input.
    new_tokens: int | None = Field(default=None, ge=0)
    epochs: float = Field(default=1, gt=0)
    # None: the recipe search decides, starting from the library's default.
    gradient_checkpointing: bool | None = None
    flash_attention: bool = True
    # True: fp32 master weights and optimizer states beside 16-bit compute (PyTorch AMP, the HF
    # Trainer); False: pure 16-bit (torchtune). None: the library's own, which a request keeps
    # through a JSON round trip (a field's absence from model_fields_set does not survive one).
    mixed_precision: bool | None = None
    # None: AdamW unless only 8-bit AdamW makes the job fit (the recipe search decides).
    optimizer: Optimizer | None = None
    framework: FrameworkName | None = None
    # Fine-tuning only (full_finetune, lora, qlora); None: "sft". For a pair objective (dpo,
    # reference_free_preference) batch_size and micro_batch count pairs, seq_len is one
    # sequence (prompt + one response) and tokens count every sequence the job trains on,
    # chosen and rejected alike; for kto they count labelled examples of one sequence each.
    training_objective: TrainingObjective | None = None
    # GRPO: completions sampled per prompt (GRPOConfig num_generations); None: 8. For GRPO,
    # seq_len is the prompt, new_tokens the longest completion (max_completion_length; None:
    # 256), batch_size and micro_batch count completions, and tokens count every completion's
    # prompt and generated tokens.
    generations_per_prompt: int | None = Field(default=None, ge=2, le=1024)
    # GRPO: a KL penalty against the starting model (GRPOConfig beta > 0), which brings a
    # frozen reference model and its forward pass every step; None: TRL's default, beta 0.
    kl_penalty: bool | None = None
    # GRPO: how many GPUs of a node each colocated vLLM engine spans (GRPOConfig
    # vllm_tensor_parallel_size); None: the recipe search decides per option.
    generation_tensor_parallel: int | None = Field(default=None, ge=1, le=8)
    # DPO and KTO: the reference model's log-probabilities computed once before training
    # (DPOConfig / KTOConfig precompute_ref_log_probs), so no reference copy stays on the GPU;
    # None: the library's default (computed alongside every step).
    precompute_reference: bool | None = None
    # Training: step each parameter inside backward as soon as its gradient exists
    # (torchtune optimizer_in_bwd; needs no gradient accumulation); None: the library's default.
    optimizer_in_backward: bool | None = None
    # Training: checkpointed activations copied to CPU memory (torchtune
    # enable_activation_offloading, Unsloth's checkpointing); None: the library's default.
    activation_offloading: bool | None = None
    # Training: the loss computed from the hidden states one chunk at a time, so the full
    # logits never exist (Liger Kernel's fused linear cross-entropy, use_liger_kernel=True in
    # TrainingArguments; torchtune's chunked loss and Unsloth's do the same by default);
    # None: the library's default.
    fused_loss: bool | None = None
    # Training: the model wrapped in torch.compile (TrainingArguments torch_compile=True,
    # torchtune compile=True, Axolotl torch_compile: true, torch.compile(model) in a Lightning
    # or DeepSpeed script), which fuses the elementwise kernels between matmuls; None: the
    # library's default, off in every profile.
    torch_compile: bool | None = None
    lora_rank: int | None = Field(default=None, ge=1)
    # Module names LoRA adapts ("q_proj", "v_proj", ...); None: every linear layer of a block,
    # as the QLoRA paper recommends.
    lora_target_modules: list[str] | None = None
    # Dropout on the adapters' input; None: on (LitGPT 0.05, QLoRA paper 0.05-0.1). 0 saves the
    # mask and the dropped-out copy of the input that every adapter keeps for backward.
    lora_dropout: float | None = Field(default=None, ge=0, lt=1)
    # 4-bit NF4 double quantisation of the constants; None: on for QLoRA (the paper's recipe),
    # off for int4 inference (transformers' BitsAndBytesConfig default).
    double_quant: bool | None = None
    # How int4 inference weights are stored; None: bitsandbytes (NF4/FP4, quantised at load).
    # "gptq": a GPTQ checkpoint (AutoGPTQ / optimum), 4-bit weights packed with one fp16 scale
    # and one 4-bit zero point per group of 128 inputs.
    quantization: Literal["bitsandbytes", "gptq"] | None = None
    strategy: RequestStrategy | None = None
    # Tensor-parallel degree within a node for training; None: the recipe search decides
    # (only for libraries that train with tensor parallelism), 1: never.
    tensor_parallel: int | None = Field(default=None, ge=1, le=8)
    # Pipeline stages for training (Megatron-style); None: the recipe search adds stages only
    # where tensor parallelism alone does not fit (libraries with pipeline parallelism only).
    pipeline_parallel: int | None = Field(default=None, ge=1, le=16)
    num_gpus: int | None = Field(default=None, ge=1)
    system: str | None = None
    accelerator: str | None = None
    constraints: Constraints = Field(default_factory=Constraints)


# --- Result -----------------------------------------------------------------------------------


class MemoryBreakdown(_Frozen):
    """Peak bytes per GPU by component; total_bytes is what nvidia-smi would show."""

    weights: int = 0
    gradients: int = 0
    optimizer_states: int = 0
    activations: int = 0
    logits: int = 0
    kv_cache: int = 0
    # GRPO's colocated vLLM engine (its weights, KV cache and profile pass; rollouts.py).
    rollout_engine: int = 0
    quantization: int = 0
    cuda_context: int = 0
    allocator_reserve: int = 0
    total_bytes: int = 0
    # The moment of the step that sets the peak (memory.PHASES): "forward", "optimizer" or
    # "inference"; the components are the tensors alive at that moment.
    peak_phase: str = ""


class Charge(_Frozen):
    """GPU hours x rate: what the job costs the institute on this option."""

    rate_per_gpu_hour: float | None  # None: unknown (never 0)
    currency: str = ""
    total: float | None = None  # requested GPU hours (billed GPUs on cloud) x rate
    source: str = ""  # "Azure price of the VM size", "profile rate", "cloud-equivalent default"
    # The total in the profile's charge currency, which the ranking compares: `total` itself,
    # or converted by the catalog's value of `currency`; None when unknown or not comparable.
    compared_total: float | None = None
    compared_currency: str = ""
    # How `total` became `compared_total` ("0.01 USD per SU: ..."), or why it was not compared.
    comparison: str = ""


class Recipe(_Frozen):
    """How to run the job on this option: the knobs a practitioner turns to make it fit."""

    micro_batch: int  # sequences (preference pairs for a preference objective) per GPU pass
    grad_accumulation: int  # micro-batches per optimizer step
    global_batch: int  # micro_batch x grad_accumulation x data-parallel GPUs
    checkpointing: Checkpointing
    optimizer: str | None  # None for inference
    strategy: Strategy
    offload: Literal["none", "optimizer_and_weights"] = "none"
    tp: int = 1  # tensor-parallel degree within a node
    pp: int = 1  # pipeline stages (Megatron-style, across nodes)
    compute_factor: float = 1.0  # time relative to the same step without recomputation
    reasons: list[str] = Field(default_factory=list)
    # What micro_batch and global_batch count: "pair" for a preference objective (chosen and
    # rejected run together), else "sequence".
    sample: Literal["sequence", "pair"] = "sequence"
    # GRPO: how many GPUs each colocated vLLM engine spans (GRPOConfig
    # vllm_tensor_parallel_size); None for a job that does not generate.
    generation_tp: int | None = None


class FrameworkInfo(_Frozen):
    key: str
    name: str
    assumed: bool  # True: the request did not name one, this is the common default
    source: str = ""


class Option(_Frozen):
    system: str
    accelerator: str
    num_gpus: int
    nodes: int
    strategy: Strategy
    memory_per_gpu_bytes: int
    memory: MemoryBreakdown | None = None
    capacity_bytes: int | None = None
    fits: bool
    gpu_hours: float | None  # compute alone
    contingency_gpu_hours: float | None
    requested_gpu_hours: float | None  # gpu_hours + contingency: what a request asks for
    wall_hours: float | None
    cost: float | None = None
    currency: str = ""
    reasons: list[str] = Field(default_factory=list)
    rank: int | None = None
    # False when a constraint, the system's status or the hardware rules the option out.
    eligible: bool = True
    headroom: bool | None = None  # fits with the memory margin to spare
    partition: str | None = None
    compute_dtype: str | None = None  # what the matmuls run in on this accelerator
    utilisation: float | None = None  # fraction of dense peak assumed
    utilisation_source: str | None = None  # "benchmark <id>" or "default for <generation>"
    charge: Charge | None = None
    supported: bool = True  # the software the job needs runs on this system's accelerators
    software_reasons: list[str] = Field(default_factory=list)
    recipe: Recipe | None = None
    # The site's own words on queue wait (SystemSpec.queue_guidance), when it gives any.
    queue_guidance: str | None = None


class Recommendation(Option):
    pass


class Assumption(_Frozen):
    name: str
    value: str
    source: str = ""


class EstimateResult(_Frozen):
    params_total: int
    params_active: int
    params_source: str = ""  # "hub safetensors", "config.json (llama)", "typed by researcher"
    architecture: str | None = None
    memory: MemoryBreakdown
    options: list[Option]
    recommendation: Recommendation | None
    # The best option per system and GPU other than the recommendation, in ranking order.
    alternatives: list[Option] = Field(default_factory=list)
    objective: str = ""  # the ranking's objective, one sentence
    why_first: str = ""  # why the recommendation won, one line
    justification: str
    slurm_script: str | None = None
    warnings: list[str] = Field(default_factory=list)
    assumptions: list[Assumption] = Field(default_factory=list)
    uncertainty: dict[str, float] = Field(default_factory=dict)
    engine_version: str
    framework: FrameworkInfo | None = None


# --- Building results the engine computed itself --------------------------------------------


def trusted(cls, values: dict):
    """Build a pydantic model from values the engine computed itself, every field present.

    Equivalent to `cls.model_construct(**values)` without its per-field default lookup: the
    ranking builds a hundred of these per estimate, and validation would only re-check our own
    arithmetic. Results still round-trip through `model_validate_json` (tested).
    """
    obj = _new(cls)  # BaseModel has no __new__ of its own
    _set_dict(obj, "__dict__", values)
    # Every field is set, so every instance of a class has the same fields set: one set per
    # class, never changed (the models are frozen), instead of a new one per object.
    fields_set = _FIELDS_SET.get(cls)
    if fields_set is None:
        fields_set = _FIELDS_SET[cls] = set(cls.model_fields)
    _set_fields_set(obj, fields_set)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


def built(cls, **fields):
    """A result model from fields the engine computed, every one given (`trusted`)."""
    return trusted(cls, fields)


# Frozen models refuse their own __setattr__; BaseModel's slots are set through their
# descriptors directly, which is about twice as fast as object.__setattr__ by name.
_new = object.__new__
_set_dict = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_FIELDS_SET: dict[type, set[str]] = {}
