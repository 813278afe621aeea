"""The catalog's and the engine's enumerations, defined once.

Each is a `Literal` (what pydantic validates and type checkers see) beside a table of the
labels people read, keyed by the same values. `labelled()` refuses, at import time, a table
whose keys are not exactly the Literal's values, so the two can never drift. Django's model
choices are built from these tables (catalog.models.text_choices), the engine's specs and the
data-file schema use the Literals.
"""

from __future__ import annotations

from typing import Literal, get_args


def labelled(kind: object, labels: dict[str, str]) -> dict[str, str]:
    """`labels`, checked to name every value of the Literal `kind` once, in its order."""
    values = get_args(kind)
    if tuple(labels) != values:
        raise ValueError(f"labels {tuple(labels)} do not match the values {values}")
    return labels


Task = Literal["inference", "full_finetune", "lora", "qlora", "pretrain"]
TASK_LABELS = labelled(
    Task,
    {
        "inference": "Inference",
        "full_finetune": "Full fine-tuning",
        "lora": "LoRA",
        "qlora": "QLoRA",
        "pretrain": "Pre-training",
    },
)

# fp8: 8-bit floating-point weights (E4M3) for inference; no training recipe uses it here.
Precision = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"]
PRECISION_LABELS = labelled(
    Precision,
    {"fp32": "FP32", "fp16": "FP16", "bf16": "BF16", "fp8": "FP8", "int8": "INT8", "int4": "INT4"},
)

# secure: a Trusted Research Environment; the flow routes sensitive data there.
SystemKind = Literal["hpc_batch", "interactive", "cloud", "secure"]
SYSTEM_KIND_LABELS = labelled(
    SystemKind,
    {
        "hpc_batch": "HPC batch",
        "interactive": "Interactive cluster",
        "cloud": "Cloud",
        # A Trusted Research Environment or secure enclave: its own access route for
        # sensitive data.
        "secure": "Secure environment (TRE)",
    },
)

# Of a system and of a node type (a retired VM size or node type is never recommended).
SystemStatus = Literal["active", "limited", "retired"]
SYSTEM_STATUS_LABELS = labelled(
    SystemStatus, {"active": "Active", "limited": "Limited", "retired": "Retired"}
)

# Our four levels, shared by the catalog (what a system allows), allocation requests (what the
# data is) and the flowchart's constraint. The Turing form shows only "Public non-sensitive".
DataSensitivity = Literal["public", "internal", "confidential", "restricted"]
DATA_SENSITIVITY_LABELS = labelled(
    DataSensitivity,
    {
        "public": "Public non-sensitive",
        "internal": "Internal",
        "confidential": "Confidential",
        "restricted": "Restricted",
    },
)

IntraNodeInterconnect = Literal["nvlink", "xelink", "infinity_fabric", "pcie", "none"]
INTRA_NODE_INTERCONNECT_LABELS = labelled(
    IntraNodeInterconnect,
    {
        "nvlink": "NVLink",
        "xelink": "Xe Link",
        "infinity_fabric": "Infinity Fabric",
        "pcie": "PCIe",
        "none": "None (one GPU)",
    },
)

InterNodeInterconnect = Literal["infiniband", "omnipath", "ethernet", "none"]
INTER_NODE_INTERCONNECT_LABELS = labelled(
    InterNodeInterconnect,
    {"infiniband": "InfiniBand", "omnipath": "Omni-Path", "ethernet": "Ethernet", "none": "None"},
)

# "out_of_memory": the source reports the configuration did not fit (a lower bound on memory).
BenchmarkOutcome = Literal["completed", "out_of_memory"]
BENCHMARK_OUTCOME_LABELS = labelled(
    BenchmarkOutcome, {"completed": "Completed", "out_of_memory": "Out of memory"}
)

# The ranking's tie-breakers after "feasible and supported", in the engine's default order.
TieBreaker = Literal["deadline", "cost", "gpu_class", "queue", "gpus"]
DEFAULT_TIE_BREAKERS: tuple[str, ...] = get_args(TieBreaker)
