"""A model's shape and exact parameter count, from config.json, Hub metadata or a typed number.

No Django here. Counting follows how transformers builds each model class, as one formula over
per-family data (Megatron's memory report counts the same way):

* `blocks.assemble` is the formula: embeddings + blocks (attention, MLP or experts, norms) +
  what sits outside the blocks + the LM head (0 when tied).
* `families.DECODERS` and `encoders` hold one row per family: which config keys give each size
  and which layers a block holds; `registry` maps model_type (or architectures[0]) to a row.
  A family not in the registry is refused, never counted as another family.
* A count is the number of elements in the model's parameters (nn.Parameter), tied weights once.
  Buffers (rotary inv_freq, causal masks) are not parameters, so they are not counted.
* Encoder-only models are counted as the class architectures[0] names; causal and
  sequence-to-sequence language models include the LM head (0 when tied).
* `hub` reads the Hub's safetensors counts against the config count; `typed` guesses a shape
  around a typed count. Every number read passes real-model bounds (`config.LIMITS`).
* The expected numbers and their sources live in tests/engine/test_architecture.py.
"""

from __future__ import annotations

from advisor.engine.architecture.config import LIMITS, MAX_PARAMS
from advisor.engine.architecture.hub import (
    DTYPE_BYTES,
    architecture_from_hub,
    check_hub_counts,
    compare_with_hub,
    quant_method,
    quantization_bits,
    unpacked_count,
)
from advisor.engine.architecture.model import LinearShape, ModelArchitecture
from advisor.engine.architecture.registry import (
    architecture_from_config,
    known_families,
    supported_model_types,
)
from advisor.engine.architecture.typed import architecture_from_params

__all__ = [
    "DTYPE_BYTES",
    "LIMITS",
    "MAX_PARAMS",
    "LinearShape",
    "ModelArchitecture",
    "architecture_from_config",
    "architecture_from_hub",
    "architecture_from_params",
    "check_hub_counts",
    "compare_with_hub",
    "known_families",
    "quant_method",
    "quantization_bits",
    "supported_model_types",
    "unpacked_count",
]
