"""The catalog's schema, written once: enumerations and the specs of a catalog entry.

Pure Python and pydantic, importable by the engine (advisor.engine), the catalog app and the
data-file checks alike; it imports nothing from Django or the apps (import-linter checks).
"""

from catalog_schema.enums import (
    BENCHMARK_OUTCOME_LABELS,
    DATA_SENSITIVITY_LABELS,
    DEFAULT_TIE_BREAKERS,
    INTER_NODE_INTERCONNECT_LABELS,
    INTRA_NODE_INTERCONNECT_LABELS,
    PRECISION_LABELS,
    SYSTEM_KIND_LABELS,
    SYSTEM_STATUS_LABELS,
    TASK_LABELS,
    BenchmarkOutcome,
    DataSensitivity,
    InterNodeInterconnect,
    IntraNodeInterconnect,
    Precision,
    SystemKind,
    SystemStatus,
    Task,
    TieBreaker,
)
from catalog_schema.specs import (
    AcceleratorSpec,
    BenchmarkSpec,
    CatalogSpec,
    ChargeRateSpec,
    CurrencyValueSpec,
    Frozen,
    NodeTypeSpec,
    PartitionSpec,
    RankingPolicySpec,
    SystemSpec,
)

__all__ = [
    "BENCHMARK_OUTCOME_LABELS",
    "DATA_SENSITIVITY_LABELS",
    "DEFAULT_TIE_BREAKERS",
    "INTER_NODE_INTERCONNECT_LABELS",
    "INTRA_NODE_INTERCONNECT_LABELS",
    "PRECISION_LABELS",
    "SYSTEM_KIND_LABELS",
    "SYSTEM_STATUS_LABELS",
    "TASK_LABELS",
    "AcceleratorSpec",
    "BenchmarkOutcome",
    "BenchmarkSpec",
    "CatalogSpec",
    "ChargeRateSpec",
    "CurrencyValueSpec",
    "DataSensitivity",
    "Frozen",
    "InterNodeInterconnect",
    "IntraNodeInterconnect",
    "NodeTypeSpec",
    "PartitionSpec",
    "Precision",
    "RankingPolicySpec",
    "SystemKind",
    "SystemSpec",
    "SystemStatus",
    "Task",
    "TieBreaker",
]
