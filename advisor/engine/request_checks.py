"""Reading a request and checking it: pydantic's errors, contradictions between fields and
numbers beyond any real workload, each a field-level error (`RequestError`).

Every problem is reported against the request field that caused it, so the web form and the
API can show it next to that field.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from advisor.engine import rollouts
from advisor.engine.errors import EstimateError
from advisor.engine.frameworks import FRAMEWORKS, framework_for
from advisor.engine.knob_checks import knob_errors
from advisor.engine.models import CatalogSpec, EstimateRequest
from advisor.engine.preference import (
    KTO_LIBRARIES,
    NO_PRECOMPUTE,
    library_words,
    min_micro_batch,
    needs_trl_trainer,
)

# Beyond these a number is a typo, not a workload.
LIMITS = {
    "params": 10**13,  # 10 trillion parameters
    "batch_size": 65_536,
    "seq_len": 2**21,  # 2M tokens of context
    "tokens": 10**15,
    "new_tokens": 2**21,
    "epochs": 1_000,
    "num_gpus": 100_000,
    "lora_rank": 65_536,
}

# Libraries with no fp8 weights (check_request refuses precision fp8 with them).
NO_FP8_WEIGHTS = ("transformers_legacy", "litgpt")


class RequestError(EstimateError):
    """One or more field-level problems with a request."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = errors
        message = "; ".join(f"{field}: {text}" for field, text in errors)
        super().__init__(message, field=errors[0][0])


def parse_request(data: Any) -> EstimateRequest:
    """Validate JSON-like data into a request; pydantic errors become field-level errors."""
    if not isinstance(data, dict):
        raise RequestError([("", "The request must be a JSON object.")])
    try:
        return EstimateRequest.model_validate(data)
    except ValidationError as exc:
        errors = []
        for err in exc.errors(include_url=False):
            field = ".".join(str(part) for part in err["loc"]) or ""
            errors.append((field, _plain(err)))
        raise RequestError(errors) from None


def _plain(err: dict) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')}; got {err.get('input')!r}."
    if kind == "extra_forbidden":
        return "is not a field the estimate understands."
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}; got {err.get('input')!r}."
    if kind == "greater_than":
        return f"must be greater than {ctx.get('gt')}; got {err.get('input')!r}."
    if kind == "missing":
        return "is required."
    return err["msg"] + "."


def check_request(request: EstimateRequest, catalog: CatalogSpec | None = None) -> list[str]:
    """Raise RequestError for contradictions and absurd numbers; return warnings."""
    errors: list[tuple[str, str]] = []
    warnings: list[str] = []
    task, precision = request.task, request.precision

    for field, limit in LIMITS.items():
        value = getattr(request, field)
        if value is not None and value > limit:
            errors.append((field, f"{value:,} is beyond any real workload (limit {limit:,})."))

    errors.extend(_combination_errors(request))
    errors.extend(knob_errors(request))
    if (
        request.batch_size is not None
        and request.micro_batch is not None
        and request.micro_batch > request.batch_size
    ):
        errors.append(
            (
                "micro_batch",
                f"micro_batch {request.micro_batch} is larger than the global batch "
                f"{request.batch_size}; the micro-batch is the part of the batch one GPU "
                "processes at a time.",
            )
        )
    if catalog is not None:
        errors.extend(_catalog_errors(request, catalog))
    if errors:
        raise RequestError(errors)

    if request.lora_rank is not None and task not in ("lora", "qlora"):
        warnings.append(f"lora_rank is ignored for {task}.")
    if task == "inference" and request.gradient_checkpointing:
        warnings.append("gradient_checkpointing is ignored for inference.")
    if needs_trl_trainer(request) and request.framework == "hf_trainer":
        objective_is_grpo = request.training_objective == "grpo"
        trainer = {"kto": "KTOTrainer", "grpo": "GRPOTrainer"}.get(
            request.training_objective or "", "DPOTrainer"
        )
        warnings.append(
            f"The Transformers Trainer has no {'GRPO' if objective_is_grpo else 'preference'} "
            f"loss: estimated as TRL's {trainer}, which runs on it (framework trl)."
        )
    if request.training_objective == "grpo" and task == "qlora":
        warnings.append(
            "GRPO over a 4-bit base (QLoRA): TRL loads the colocated vLLM with "
            "quantization='bitsandbytes', so vLLM holds its copy in 4-bit too and generates "
            "with bitsandbytes' kernels, slower than 16-bit ones; before each generation TRL "
            "merges the adapters into the 4-bit layers and loads them into vLLM. Check that "
            "your TRL, PEFT and vLLM versions support that sync, or train LoRA on the 16-bit "
            "model."
        )
    if request.kl_penalty is not None and request.training_objective != "grpo":
        warnings.append("kl_penalty applies to GRPO (training_objective grpo) only; ignored.")
    for field in ("generations_per_prompt", "generation_tensor_parallel"):
        if getattr(request, field) is not None and request.training_objective != "grpo":
            warnings.append(f"{field} applies to GRPO (training_objective grpo) only; ignored.")
    if request.precompute_reference is not None and request.training_objective not in (
        "dpo",
        "kto",
    ):
        warnings.append(
            "precompute_reference applies to DPO and KTO (training_objective dpo or kto) "
            "only; ignored."
        )
    if task == "lora" and precision == "int4":
        warnings.append("LoRA on a 4-bit base model is QLoRA; estimated as QLoRA.")
    if precision == "fp32" and task != "inference" and request.mixed_precision:
        warnings.append("fp32 training: mixed_precision does not apply; everything is fp32.")
    return warnings


def _combination_errors(request: EstimateRequest) -> list[tuple[str, str]]:
    """Fields that contradict each other: the model given twice, a precision the task
    cannot train in, a training strategy for inference, a library of the other kind."""
    errors: list[tuple[str, str]] = []
    task, precision = request.task, request.precision
    if request.config is not None and request.params is not None:
        errors.append(("params", "Give either config or params, not both."))
    if task == "qlora" and precision == "fp32":
        errors.append(
            (
                "precision",
                "QLoRA keeps the base model in 4-bit NF4 and computes in 16-bit; "
                "fp32 is not a QLoRA precision (use bf16, fp16 or int4).",
            )
        )
    if task == "qlora" and precision == "int8":
        errors.append(
            ("precision", "QLoRA is 4-bit; for an 8-bit base model use task lora with int8.")
        )
    if task != "inference" and precision == "fp8":
        errors.append(
            (
                "precision",
                "fp8 is offered for inference (vLLM, transformers' fine-grained FP8); fp8 "
                "training (Transformer Engine, torchao float8) keeps bf16 master weights and is "
                "not modelled here. Use bf16 to train, or int4 for QLoRA.",
            )
        )
    if task in ("full_finetune", "pretrain") and precision in ("int8", "int4"):
        errors.append(
            (
                "precision",
                f"{precision} {task.replace('_', ' ')} is not possible: the optimizer cannot "
                "update quantised weights. Use lora/qlora, or fp32, fp16 or bf16.",
            )
        )
    if task == "inference" and request.strategy is not None:
        errors.append(
            (
                "strategy",
                f"{request.strategy} shards training state; inference runs on one GPU or "
                "with tensor parallelism, which the engine chooses.",
            )
        )
    if precision == "fp8" and request.framework in NO_FP8_WEIGHTS:
        errors.append(
            (
                "precision",
                f"{FRAMEWORKS[request.framework].name} has no fp8 weights (transformers added "
                "FineGrainedFP8Config in 4.49); use vLLM, TGI or a current transformers, or int8.",
            )
        )
    if request.quantization == "gptq" and not _gptq_supported(task, request.precision):
        errors.append(
            (
                "quantization",
                "GPTQ is modelled for 4-bit weights (precision int4): served, or as the frozen "
                "base of LoRA/QLoRA adapters; its packed weights cannot be trained in full.",
            )
        )
    errors.extend(_compile_errors(request))
    errors.extend(_objective_errors(request))
    if request.framework not in (None, "not_sure"):
        profile = FRAMEWORKS[request.framework]
        wanted = "inference" if task == "inference" else "training"
        if profile.kind != wanted:
            others = ", ".join(k for k, f in FRAMEWORKS.items() if f.kind == wanted)
            errors.append(
                (
                    "framework",
                    f"{profile.name} is {'an' if profile.kind == 'inference' else 'a'} "
                    f"{profile.kind} library; for {task.replace('_', ' ')} "
                    f"choose one of: not_sure, {others}.",
                )
            )
    return errors


def _objective_errors(request: EstimateRequest) -> list[tuple[str, str]]:
    """training_objective: preference pairs fine-tune a trained model (full, LoRA, QLoRA);
    pre-training and inference have no such objective."""
    objective, task = request.training_objective, request.task
    if request.precompute_reference and request.framework in NO_PRECOMPUTE:
        name = FRAMEWORKS[request.framework].name
        return [
            (
                "precompute_reference",
                f"{name} runs the reference model every step and cannot precompute its "
                "log-probabilities (TRL's DPOTrainer can); leave precompute_reference empty.",
            )
        ]
    if objective is None or objective == "sft" and task != "inference":
        return []
    if task in ("full_finetune", "lora", "qlora"):
        if objective == "grpo":
            return _grpo_errors(request)
        return _kto_errors(request) if objective == "kto" else []
    what = "inference trains nothing" if task == "inference" else "pre-training learns from text"
    return [
        (
            "training_objective",
            f"{objective} is a fine-tuning objective and {what}; use task full_finetune, lora "
            "or qlora, or leave training_objective empty.",
        )
    ]


# Why a library is not estimated for GRPO (rollouts.py models TRL's GRPOTrainer with vLLM
# colocated).
_GRPO_ELSEWHERE = {
    "unsloth": "Unsloth's GRPO shares one copy of the weights between vLLM and training "
    "(fast_inference), which this estimate does not model",
    "axolotl": "Axolotl runs GRPO with vLLM as a separate server on GPUs of its own, which this "
    "estimate does not model",
}


def _grpo_errors(request: EstimateRequest) -> list[tuple[str, str]]:
    """GRPO is sized as TRL's GRPOTrainer runs it with vLLM colocated; its generation batch
    holds whole groups of completions (GRPOConfig: 'generation_batch_size must be divisible by
    num_generations')."""
    library = framework_for(request.framework, True, True)[0]
    if library.key != "trl":
        why = _GRPO_ELSEWHERE.get(library.key, f"{library.name} has no GRPO trainer modelled here")
        return [
            (
                "framework",
                f"GRPO is estimated for TRL's GRPOTrainer with vLLM colocated (framework trl or "
                f"not_sure); {why}.",
            )
        ]
    if request.precision == "int8":
        return [
            (
                "precision",
                "TRL cannot colocate vLLM with an 8-bit base ('vLLM does not support in-flight "
                "8-bit quantization'): train LoRA on the 16-bit model, or QLoRA (int4).",
            )
        ]
    degree = request.generation_tensor_parallel
    if degree is not None and degree > 1:
        most = request.constraints.max_gpus
        why = None
        if request.num_gpus is not None and request.num_gpus % degree:
            why = f"it must divide num_gpus ({request.num_gpus})"
        elif most is not None and degree > most:
            why = f"it needs {degree} GPUs and max_gpus is {most}"
        if why is not None:
            return [
                (
                    "generation_tensor_parallel",
                    f"TRL groups the GPUs into vLLM engines of {degree}: {why}.",
                )
            ]
    generations = rollouts.generations(request)
    batch = request.batch_size  # left out, the default is whole groups (workload.global_batch)
    if batch is not None and batch % generations:
        return [
            (
                "batch_size",
                f"GRPO's batch counts completions in whole groups: {batch:,} is not a multiple of "
                f"the {generations} completions per prompt. Use a multiple of {generations}.",
            )
        ]
    return []


def _kto_errors(request: EstimateRequest) -> list[tuple[str, str]]:
    """KTO's KL estimate pairs each prompt with another example's response: a batch of one has
    no other, and TRL's KTOTrainer refuses one example per GPU pass. torchtune has no KTO
    recipe."""
    if request.framework == "torchtune":
        able = ", ".join(sorted(KTO_LIBRARIES))
        return [
            (
                "training_objective",
                f"torchtune has no KTO recipe; name a library that has one (framework: {able}) "
                "or choose dpo.",
            )
        ]
    if request.batch_size == 1:
        return [
            (
                "batch_size",
                "KTO estimates its KL term from other examples in the same batch: a global batch "
                "of 1 has none. Use at least 2.",
            )
        ]
    library = framework_for(request.framework, True, True)[0]
    least = min_micro_batch(library, "kto")
    if request.micro_batch is not None and request.micro_batch < least:
        return [
            (
                "micro_batch",
                f"{library_words(library, 'kto')} needs at least {least} examples per GPU "
                "pass ('Actual (not effective) batch size must be > 1'): its KL term pairs "
                f"each prompt with another example's response. Use {least} or more, or leave "
                "micro_batch empty.",
            )
        ]
    return []


def _gptq_supported(task: str, precision: str | None) -> bool:
    """A 4-bit GPTQ checkpoint served, or adapters trained over it (input_warnings sizes that
    as QLoRA); a precision left open is the checkpoint's 4 bits for adapters."""
    if task == "inference":
        return precision == "int4"
    return task in ("lora", "qlora") and precision in (None, "int4")


def _compile_errors(request: EstimateRequest) -> list[tuple[str, str]]:
    """torch_compile: a training setting, for a library that offers it."""
    if not request.torch_compile:
        return []
    if request.task == "inference":
        return [
            (
                "torch_compile",
                "torch_compile is a training setting here; for generation, vLLM and TGI already "
                "run captured CUDA graphs. Leave it empty.",
            )
        ]
    profile = framework_for(request.framework, True, needs_trl_trainer(request))[0]
    if profile.kind == "training" and not profile.compile_switch:
        return [
            (
                "torch_compile",
                f"{profile.name} does not train under torch.compile (it fuses with its own "
                "kernels); leave torch_compile empty.",
            )
        ]
    return []


def _catalog_errors(request: EstimateRequest, catalog: CatalogSpec) -> list[tuple[str, str]]:
    """Systems and accelerators the catalog does not know."""
    errors: list[tuple[str, str]] = []
    systems = {s.name for s in catalog.systems}
    accelerators = {a.name for a in catalog.accelerators}
    if request.system is not None and request.system not in systems:
        errors.append(
            (
                "system",
                f"Unknown system {request.system!r}; known: {', '.join(sorted(systems))}.",
            )
        )
    if request.accelerator is not None and request.accelerator not in accelerators:
        errors.append(
            (
                "accelerator",
                f"Unknown accelerator {request.accelerator!r}; known: "
                f"{', '.join(sorted(accelerators))}.",
            )
        )
    for name in request.constraints.systems or []:
        if name not in systems:
            errors.append(("constraints.systems", f"Unknown system {name!r}."))
    return errors
