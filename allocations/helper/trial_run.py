"""Measure a trial run for Allocation Triage: one file, Python standard library only.

Add it to the training (or inference) script you run on your trial allocation. It times your
steps, skips the warm-up, and writes one JSON file with what the estimate needs: the GPU model
and count, framework versions, precision, micro-batch, sequence length, tokens processed,
steady tokens per second and peak GPU memory. It uses PyTorch only when PyTorch is importable.

It never uploads anything, never reads your data set and never records file paths: upload the
JSON yourself on your allocation request's page ("Upload a trial-run measurement").

    from trial_run import TrialRun

    run = TrialRun(task="full_finetune", precision="bf16", micro_batch_size=8, seq_len=2048,
                   model=model, optimizer=optimizer)
    for batch in loader:
        with run.step(tokens=batch["input_ids"].numel()):   # tokens this process handled
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    run.write("trial-run.json")       # on rank 0 only, in a multi-GPU job

For preference training (DPO, ORPO, SimPO, KTO) pass training_objective="dpo" (or
"reference_free_preference", or "kto") and precompute_reference=True where the reference's
log-probabilities were computed before training; give micro_batch_size in pairs, as TRL's
per_device_train_batch_size counts them, and count the tokens of both sequences of each pair
(KTO: in examples, counting each example's sequence once; GRPO: in completions, each with
its prompt).

`python trial_run.py` prints what the helper can see on this machine (GPU, versions).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from importlib import metadata

SCHEMA = "allocation-triage/trial-run"
SCHEMA_VERSION = 1
HELPER_VERSION = "1.2.0"

TASKS = ("inference", "full_finetune", "lora", "qlora", "pretrain")
# What fine-tuning learns from (the estimate's training_objective).
OBJECTIVES = ("sft", "dpo", "reference_free_preference", "kto", "grpo")
PRECISIONS = ("fp32", "fp16", "bf16", "fp8", "int8", "int4")  # catalog_schema.Precision
# The first steps compile kernels, fill the allocator's cache and warm the data loader; timing
# them would make the run look slower than it is.
DEFAULT_WARMUP_STEPS = 5
MIN_STEADY_STEPS = 3

# Packages whose versions change throughput or memory; recorded when installed.
FRAMEWORK_PACKAGES = (
    "torch",
    "transformers",
    "accelerate",
    "deepspeed",
    "peft",
    "trl",
    "bitsandbytes",
    "flash-attn",
    "lightning",
    "pytorch-lightning",
    "torchtune",
    "vllm",
    "megatron-core",
    "intel-extension-for-pytorch",
)
# Scheduler and launcher settings that say how the job was laid out (never paths or secrets).
ENVIRONMENT_KEYS = (
    "SLURM_JOB_ID",
    "SLURM_CLUSTER_NAME",
    "SLURM_JOB_ACCOUNT",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NTASKS",
    "SLURM_GPUS_ON_NODE",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "ACCELERATE_MIXED_PRECISION",
    "ACCELERATE_USE_FSDP",
    "ACCELERATE_USE_DEEPSPEED",
)


def _torch():
    try:
        import torch  # noqa: PLC0415 - optional: the helper works without it
    except ImportError:
        return None
    return torch


def _versions() -> dict:
    found = {}
    for name in FRAMEWORK_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _device_backend(torch):
    """('cuda' | 'rocm' | 'xpu' | 'mps' | 'cpu', module with the memory calls or None)."""
    if torch is None:
        return "cpu", None
    if torch.cuda.is_available():
        return ("rocm" if getattr(torch.version, "hip", None) else "cuda"), torch.cuda
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return "xpu", xpu
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    if mps is not None and mps.is_available():
        return "mps", getattr(torch, "mps", None)
    return "cpu", None


def _synchronise(torch) -> None:
    """GPU work is asynchronous: wait for it, or a step would be timed before it ran."""
    kind, module = _device_backend(torch)
    if module is not None and hasattr(module, "synchronize"):
        module.synchronize()


def _world_size(torch) -> int:
    if torch is not None:
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_world_size())
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def describe_device(torch=None) -> dict:
    """The accelerator this process sees: model, count, memory; on a CPU, says there is no GPU."""
    torch = torch if torch is not None else _torch()
    kind, module = _device_backend(torch)
    device = {
        "kind": kind,
        "gpu_present": kind in ("cuda", "rocm", "xpu", "mps"),
        "name": None,
        "visible_count": 0,
        "memory_total_bytes": None,
        "cuda_version": None,
        "hip_version": None,
    }
    if torch is not None:
        device["cuda_version"] = getattr(torch.version, "cuda", None)
        device["hip_version"] = getattr(torch.version, "hip", None)
    if kind in ("cuda", "rocm", "xpu"):
        device["visible_count"] = int(module.device_count())
        index = module.current_device()
        device["name"] = str(module.get_device_name(index))
        props = module.get_device_properties(index)
        total = getattr(props, "total_memory", None)
        device["memory_total_bytes"] = int(total) if total else None
    elif kind == "mps":
        device["visible_count"] = 1
        device["name"] = "Apple MPS"
    else:
        device["name"] = platform.processor() or platform.machine() or "CPU"
    return device


def _memory(torch) -> dict:
    """Peak memory this process's allocator saw on its current device."""
    kind, module = _device_backend(torch)
    out = {"source": None, "max_allocated_bytes": None, "max_reserved_bytes": None}
    if kind in ("cuda", "rocm", "xpu"):
        index = module.current_device()
        out["source"] = f"torch.{'cuda' if kind != 'xpu' else 'xpu'}.max_memory_allocated/reserved"
        for key, call in (
            ("max_allocated_bytes", "max_memory_allocated"),
            ("max_reserved_bytes", "max_memory_reserved"),
        ):
            fn = getattr(module, call, None)
            if fn is not None:
                out[key] = int(fn(index))
    elif kind == "mps" and module is not None:
        out["source"] = "torch.mps.driver_allocated_memory (current, not peak)"
        fn = getattr(module, "driver_allocated_memory", None)
        if fn is not None:
            out["max_reserved_bytes"] = int(fn())
    return out


def _recipe(model, optimizer, torch) -> dict:
    """The knobs visible from the model and optimizer objects; nothing is read from disk."""
    recipe: dict = {}
    if model is not None and hasattr(model, "parameters"):
        total = trainable = 0
        dtypes: dict[str, int] = {}
        for param in model.parameters():
            count = int(param.numel())
            total += count
            if getattr(param, "requires_grad", False):
                trainable += count
            key = str(getattr(param, "dtype", "unknown")).replace("torch.", "")
            dtypes[key] = dtypes.get(key, 0) + count
        recipe["params_total"] = total
        recipe["params_trainable"] = trainable
        recipe["param_dtypes"] = dtypes
        checkpointing = getattr(model, "is_gradient_checkpointing", None)
        if isinstance(checkpointing, bool):
            recipe["gradient_checkpointing"] = checkpointing
        config = getattr(model, "config", None)
        if config is not None:
            attention = getattr(config, "_attn_implementation", None)
            if isinstance(attention, str):
                recipe["attention_implementation"] = attention
            name = getattr(config, "_name_or_path", None)
            if isinstance(name, str) and name and not os.path.isabs(name):
                recipe["model_name"] = name  # a Hub id; local paths are left out
        recipe["model_class"] = type(model).__name__
    if optimizer is not None:
        recipe["optimizer"] = type(optimizer).__name__
    if torch is not None:
        matmul = getattr(getattr(torch.backends, "cuda", None), "matmul", None)
        if matmul is not None and hasattr(matmul, "allow_tf32"):
            recipe["tf32_matmul"] = bool(matmul.allow_tf32)
    return recipe


class TrialRun:
    """Times steps and writes the measurement. See the module docstring for the few lines."""

    def __init__(
        self,
        *,
        task: str,
        precision: str,
        micro_batch_size: int,
        seq_len: int,
        model=None,
        optimizer=None,
        model_name: str | None = None,
        params: int | None = None,
        num_gpus: int | None = None,
        data_parallel_size: int | None = None,
        gradient_accumulation_steps: int = 1,
        gradient_checkpointing: bool | None = None,
        strategy: str | None = None,
        warmup_steps: int = DEFAULT_WARMUP_STEPS,
        note: str = "",
        training_objective: str | None = None,
        precompute_reference: bool | None = None,
    ) -> None:
        if task not in TASKS:
            raise ValueError(f"task must be one of {', '.join(TASKS)}, not {task!r}")
        if training_objective is not None and training_objective not in OBJECTIVES:
            raise ValueError(
                f"training_objective must be one of {', '.join(OBJECTIVES)}, "
                f"not {training_objective!r}"
            )
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        for name, value in (("micro_batch_size", micro_batch_size), ("seq_len", seq_len)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1")
        if warmup_steps < 0:
            raise ValueError("warmup_steps cannot be negative")
        self.torch = _torch()
        self.task = task
        self.precision = precision
        self.micro_batch_size = micro_batch_size
        self.seq_len = seq_len
        self.model = model
        self.optimizer = optimizer
        self.model_name = model_name
        self.params = params
        world = _world_size(self.torch)
        self.num_gpus = num_gpus
        self.world_size = world
        # Tokens per step are counted per process; in a data-parallel job every process
        # handles its own share, so the job's rate is the process's times this.
        self.data_parallel_size = data_parallel_size or world
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.gradient_checkpointing = gradient_checkpointing
        self.strategy = strategy
        self.training_objective = training_objective
        self.precompute_reference = precompute_reference
        self.warmup_steps = warmup_steps
        self.note = note
        self.steps: list[tuple[int, float]] = []  # (tokens, seconds) per step, in order
        self.started_at = datetime.now(timezone.utc)  # noqa: UP017 - runs on Python 3.8+
        if self.torch is not None:
            kind, module = _device_backend(self.torch)
            reset = getattr(module, "reset_peak_memory_stats", None) if module else None
            if reset is not None:
                with contextlib.suppress(RuntimeError):
                    reset()

    @contextlib.contextmanager
    def step(self, *, tokens: int):
        """Time one optimizer step (or one generation batch) that handled `tokens` tokens."""
        _synchronise(self.torch)
        start = time.perf_counter()
        yield
        _synchronise(self.torch)
        self.record_step(tokens=tokens, seconds=time.perf_counter() - start)

    def record_step(self, *, tokens: int, seconds: float) -> None:
        """For loops that time themselves (a Trainer callback, say)."""
        if int(tokens) < 0 or seconds < 0:
            raise ValueError("tokens and seconds cannot be negative")
        self.steps.append((int(tokens), float(seconds)))

    def _measurement(self) -> dict:
        steady = self.steps[self.warmup_steps :]
        tokens_total = sum(t for t, _ in self.steps)
        steady_tokens = sum(t for t, _ in steady)
        steady_seconds = sum(s for _, s in steady)
        enough = len(steady) >= MIN_STEADY_STEPS and steady_seconds > 0 and steady_tokens > 0
        per_process = steady_tokens / steady_seconds if enough else None
        return {
            "steps_total": len(self.steps),
            "warmup_steps": min(self.warmup_steps, len(self.steps)),
            "steady_steps": len(steady),
            "tokens_processed": tokens_total,
            "steady_tokens": steady_tokens,
            "steady_seconds": round(steady_seconds, 6),
            "step_seconds_median": round(statistics.median(s for _, s in steady), 6)
            if steady
            else None,
            "tokens_per_second_per_process": round(per_process, 3) if per_process else None,
            "data_parallel_size": self.data_parallel_size,
            "tokens_per_second": round(per_process * self.data_parallel_size, 3)
            if per_process
            else None,
        }

    def report(self) -> dict:
        torch = self.torch
        device = describe_device(torch)
        recipe = _recipe(self.model, self.optimizer, torch)
        if self.gradient_checkpointing is not None:
            recipe["gradient_checkpointing"] = self.gradient_checkpointing
        gpus = self.num_gpus
        if gpus is None:
            gpus = self.world_size if device["gpu_present"] else 0
        notes = []
        if not device["gpu_present"]:
            notes.append("No GPU: measured on the CPU, which says nothing about GPU throughput.")
        measurement = self._measurement()
        if measurement["tokens_per_second"] is None:
            notes.append(
                f"Fewer than {MIN_STEADY_STEPS} steps after the {self.warmup_steps} warm-up "
                "steps: no steady tokens per second. Run more steps."
            )
        if self.note:
            notes.append(self.note)
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "helper_version": HELPER_VERSION,
            "started_at": self.started_at.isoformat(),
            "finished_at": datetime.now(timezone.utc).isoformat(),  # noqa: UP017
            "device": {**device, "count": gpus},
            "software": {
                "python": platform.python_version(),
                "framework": "pytorch" if torch is not None else "none",
                "packages": _versions(),
            },
            "workload": {
                "task": self.task,
                "precision": self.precision,
                "micro_batch_size": self.micro_batch_size,
                "seq_len": self.seq_len,
                "gradient_accumulation_steps": self.gradient_accumulation_steps,
                "model_name": self.model_name or recipe.pop("model_name", None),
                "params": self.params or recipe.get("params_total"),
                "strategy": self.strategy,
                "world_size": self.world_size,
                "training_objective": self.training_objective,
                "precompute_reference": self.precompute_reference,
            },
            "recipe": recipe,
            "measurement": measurement,
            "memory": _memory(torch),
            "environment": {k: os.environ[k] for k in ENVIRONMENT_KEYS if k in os.environ},
            "notes": notes,
        }

    def write(self, path: str = "trial-run.json") -> str:
        """Write the JSON and say how to upload it. Returns the path written."""
        report = self.report()
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2, sort_keys=True)
            handle.write("\n")
        rate = report["measurement"]["tokens_per_second"]
        print(f"Trial-run measurement written to {path}", file=sys.stderr)
        if rate:
            print(f"  steady throughput: {rate:,.0f} tokens/s for the job", file=sys.stderr)
        for note in report["notes"]:
            print(f"  note: {note}", file=sys.stderr)
        print(
            "  Upload it yourself: open your allocation request in Allocation Triage and use "
            "'Upload a trial-run measurement'. This helper never uploads anything.",
            file=sys.stderr,
        )
        return path


def main() -> int:
    torch = _torch()
    device = describe_device(torch)
    print(json.dumps({"device": device, "packages": _versions()}, indent=2, sort_keys=True))
    if not device["gpu_present"]:
        print("No GPU visible: a measurement here records the CPU only.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
