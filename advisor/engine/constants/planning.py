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
FEWER_GPUS_COST_BAND = Constant(
    "Cost difference that outranks fewer GPUs",
    0.10,
    "relative, more GPUs of the same node type against fewer",
    "the engine's GPU-hour estimates differ from published measurements by a median of 12-13 % "
    "on test points (docs/accuracy.md), and what separates two GPU counts of one node type is "
    "the modelled part only (dequantisation per micro-batch, accumulation, the exchange "
    "between GPUs); seed 002: the queue wait matters, and a job on fewer GPUs schedules "
    "sooner and holds fewer of the institute's cards",
    "more GPUs come first only when they save more than this; a closer charge is a tie, and "
    "the fewer GPUs win it",
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
ALLOCATION_PERIOD_HOURS = Constant(
    "Allocation period",
    4380,
    "hours of wall time (six months)",
    "EPSRC's direct access to the national HPC services: 'usage will be restricted to a period "
    "of six months from the requested start date of award' (epsrc.ac.uk, Access routes to HPC "
    "facilities, class 1b); UCL's Materials Chemistry Consortium shares out ARCHER2 and Young "
    "in six-month periods and unused time is lost at each period's end "
    "(mcc.chem.ucl.ac.uk/guidance.html)",
    "among options that miss the wall-time target, those that finish within one allocation "
    "period rank before those that would not, whatever their charge",
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
# --- The global batch when the researcher does not give one (workload.global_batch) -----------
DEFAULT_FINETUNE_BATCH = Constant(
    "Global batch (fine-tuning, not given)",
    8,
    "sequences per optimizer step",
    "Hugging Face transformers TrainingArguments: per_device_train_batch_size defaults to 8 "
    "and gradient_accumulation_steps to 1, so a Trainer run on one GPU steps on 8 sequences; "
    "the QLoRA paper used 16, the flowchart's help suggests 8 (UVA Research Computing's LLM "
    "guidance)",
    "you did not give a batch; Hugging Face Trainer's default per-device batch, the global "
    "batch of its one-GPU run",
)
DEFAULT_PRETRAIN_BATCH_TOKENS = Constant(
    "Global batch (pre-training, not given)",
    2**20,
    "tokens per optimizer step",
    "GPT-3 paper (Brown et al. 2020) Table 2.1: 0.5M tokens per batch for the smallest "
    "models (125M parameters) rising to 3.2M at 175B; LLaMA 1 and Llama 2 papers: 4M tokens. "
    "2^20 tokens is the low middle of that range, divided into whole sequences",
    "you did not give a batch; pre-training steps on about a million tokens, never one sequence",
)
DEFAULT_INFERENCE_BATCH = Constant(
    "Concurrent requests (inference, not given)",
    1,
    "request per replica",
    "one request at a time, the latency-bound case: how many requests a service serves "
    "together depends on its traffic, which only the researcher knows",
    "you did not say how many requests are served together",
)
DEFAULT_SEQ_LEN = Constant(
    "Sequence length (not given)",
    2048,
    "tokens per sequence",
    "2,048 tokens: LLaMA 1's training context and the length the flowchart suggests for "
    "Llama-class fine-tuning; a model whose position table is shorter (BERT and RoBERTa 512, "
    "GPT-2 1,024, a ViT's image patches, Whisper's 448-token decoder) cannot take more, so "
    "its own limit is used instead (config.json max_position_embeddings or n_positions)",
    "you did not give a sequence length",
)
DEFAULT_PREFERENCE_SEQ_LEN = Constant(
    "Sequence length (not given)",
    1024,
    "tokens per sequence",
    "1,024 tokens for a prompt with one of its answers: TRL's DPOConfig max_length default "
    "(trl/trainer/dpo_config.py), which truncates longer pairs, under TRL's trainers and "
    "Unsloth's, which runs them",
    "you did not give a sequence length",
)
DEFAULT_GRPO_PROMPT_LEN = Constant(
    "Sequence length (not given)",
    512,
    "tokens per prompt",
    "512 tokens for a GRPO prompt, before the completion it generates: GRPOConfig's "
    "max_prompt_length default while TRL had one (trl/trainer/grpo_config.py, TRL 0.14 to "
    "0.2x)",
    "you did not give a prompt length",
)
DEFAULT_LORA_RANK = 16
DEFAULT_INFERENCE_NEW_TOKENS = 256
MAX_GPUS_SEARCHED = 512
