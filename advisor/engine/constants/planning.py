"""Planning constants: contingency, the uncertainty margins a result states, the target
wall time and the defaults and bounds of the search."""

from __future__ import annotations

from advisor.engine.constants.base import Constant

CONTINGENCY = Constant(
    "Contingency",
    0.20,
    "of the compute GPU hours",
    "Allocation practice: debugging runs, evaluation and restarts after pre-emption or node "
    "failure; the Turing's trial access (HPC Days 2024 talk) exists for exactly this scoping work",
    "real projects need more than one clean run",
)
MEMORY_MARGIN = Constant(
    "Memory uncertainty",
    0.10,
    "relative, either way",
    "spread of the validation errors: docs/accuracy.md (issue 3 section 7) measures a median "
    "absolute error of 2.2% on 43 published peak-memory points, all within +-10% "
    "(worst -9%)",
    "an estimate within this margin of a GPU's capacity may not fit",
)
GPU_HOURS_MARGIN = Constant(
    "GPU-hours uncertainty",
    0.25,
    "relative, either way",
    "spread of the validation errors: docs/accuracy.md compares 20 published GPU-hour totals "
    "and benchmarks like for like: median absolute error 10%, 10th-90th percentile of the "
    "signed errors -11% to +25%; utilisation varies 40-75% across "
    "training stacks",
    "throughput depends on software and data pipeline",
)
TARGET_WALL_HOURS = Constant(
    "Target wall time",
    168,
    "hours (one week) unless the researcher sets max_wall_hours",
    "allocation practice: a job plan longer than a week of wall time is widened to more GPUs "
    "where the partition allows, since queues, failures and allocation periods make "
    "month-long single jobs impractical",
    "more GPUs rather than an impractically long run",
)
WIDENING_EFFICIENCY_FLOOR = Constant(
    "Widening efficiency floor",
    0.5,
    "parallel efficiency against the fewest GPUs that fit (their GPU hours / the wider job's)",
    "a policy, not a measurement: parallel efficiency T_n x n / (T_k x k) is how allocation "
    "panels read scaling evidence for a job size (ARCHER2 technical assessment notes, Argonne "
    "LCRC allocation request policy); NCI's usage policy takes about 75 % as a reasonable "
    "minimum for CPU jobs, this is looser. Below 50 % more than half of every extra GPU hour "
    "buys nothing: the job costs more than twice the GPU hours of the fitting count",
    "the default one-week target is not worth doubling an allocation; a researcher's own "
    "max_wall_hours is, and widens past it (the option says at what cost)",
)
DEFAULT_LORA_RANK = 16
DEFAULT_INFERENCE_NEW_TOKENS = 256
MAX_GPUS_SEARCHED = 512
