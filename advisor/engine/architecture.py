"""A model's shape and exact parameter count, from config.json, Hub metadata or a typed number.

No Django here. The counting itself lands in the next commit; this fixes the interface.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from advisor.engine.errors import ConfigError  # noqa: F401  (re-exported for callers)
from advisor.engine.models import HubModelMetadata


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LinearShape(_Frozen):
    """One Linear layer of a decoder block (or several of the same shape)."""

    name: str  # "q_proj", "k_proj", "gate_proj", "fc1", "qkv", "experts.gate_proj", ...
    in_features: int
    out_features: int
    count_per_layer: int = 1  # e.g. num_experts for expert weights
    bias: bool


class ModelArchitecture(_Frozen):
    family: str
    architecture: str | None = None  # config["architectures"][0]
    is_encoder_decoder: bool = False
    num_layers: int  # decoder (or only) stack
    encoder_layers: int = 0
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    gated_mlp: bool
    vocab_size: int
    max_position_embeddings: int | None = None
    tied_embeddings: bool
    num_experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_intermediate_size: int | None = None
    layer_linears: list[LinearShape] = Field(default_factory=list)
    params_total: int
    params_active: int  # per token: MoE counts only routed experts_per_token + shared experts
    params_embedding: int  # token (+ position / token-type) embeddings
    params_lm_head: int  # 0 when tied to the input embedding
    source: str  # "config.json (llama)", "hub safetensors", "typed by researcher"
    exact: bool  # False for fallbacks and approximations
    notes: list[str] = Field(default_factory=list)


def architecture_from_config(config: dict) -> ModelArchitecture:
    raise NotImplementedError


def architecture_from_params(params: int, *, hint: dict | None = None) -> ModelArchitecture:
    raise NotImplementedError


def architecture_from_hub(metadata: HubModelMetadata) -> ModelArchitecture:
    raise NotImplementedError
