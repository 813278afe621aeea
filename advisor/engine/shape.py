"""The few numbers of a model's shape the memory and FLOP formulas need.

`ModelShape` is a plain, fast dataclass (the ranking loop touches it thousands of times) built
from the `ModelArchitecture` that `advisor.engine.architecture` counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Linear:
    name: str
    in_features: int
    out_features: int
    count_per_layer: int = 1


@dataclass(frozen=True, slots=True)
class ModelShape:
    params_total: int
    params_active: int
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    gated_mlp: bool = True
    family: str = "llama"
    architecture: str | None = None
    encoder_layers: int = 0
    is_encoder_decoder: bool = False
    tied_embeddings: bool = False
    params_embedding: int = 0
    params_lm_head: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_intermediate_size: int | None = None
    max_position_embeddings: int | None = None
    linears: tuple[Linear, ...] = field(default_factory=tuple)
    source: str = ""
    exact: bool = True
    notes: tuple[str, ...] = ()

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def attn_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def total_layers(self) -> int:
        return self.num_layers + self.encoder_layers

    @property
    def params_linear(self) -> int:
        """Weights inside the transformer blocks' linear layers: what int8/int4 quantises."""
        if self.linears:
            per_layer = sum(
                lin.in_features * lin.out_features * lin.count_per_layer for lin in self.linears
            )
            return min(per_layer * self.total_layers, self.params_total)
        kept = self.params_embedding + self.params_lm_head
        return max(self.params_total - kept, 0)

    @property
    def largest_linear(self) -> int:
        if self.linears:
            return max(lin.in_features * lin.out_features for lin in self.linears)
        ffn = self.moe_intermediate_size or self.intermediate_size
        return self.hidden_size * max(ffn, self.hidden_size)

    @property
    def params_per_layer(self) -> int:
        return max(self.params_linear // max(self.total_layers, 1), 1)

    @property
    def flop_params(self) -> int:
        """Parameters that do matmuls per token: active weights, minus the embedding lookup,
        plus the LM head's matmul even when its weight is tied to the embedding."""
        head = self.params_lm_head or self.vocab_size * self.hidden_size
        return max(self.params_active - self.params_embedding - self.params_lm_head + head, 1)


def shape_from_architecture(arch: Any) -> ModelShape:
    """Build the engine's shape from a `ModelArchitecture` (duck-typed to avoid a cycle)."""
    linears = tuple(
        Linear(
            name=lin.name,
            in_features=lin.in_features,
            out_features=lin.out_features,
            count_per_layer=lin.count_per_layer,
        )
        for lin in (arch.layer_linears or [])
    )
    return ModelShape(
        params_total=arch.params_total,
        params_active=arch.params_active,
        num_layers=arch.num_layers,
        hidden_size=arch.hidden_size,
        num_attention_heads=arch.num_attention_heads,
        num_kv_heads=arch.num_kv_heads or arch.num_attention_heads,
        head_dim=arch.head_dim,
        intermediate_size=arch.intermediate_size,
        vocab_size=arch.vocab_size,
        gated_mlp=arch.gated_mlp,
        family=arch.family,
        architecture=arch.architecture,
        encoder_layers=arch.encoder_layers,
        is_encoder_decoder=arch.is_encoder_decoder,
        tied_embeddings=arch.tied_embeddings,
        params_embedding=arch.params_embedding,
        params_lm_head=arch.params_lm_head,
        num_experts=arch.num_experts,
        experts_per_token=arch.experts_per_token,
        shared_experts=arch.shared_experts,
        moe_intermediate_size=arch.moe_intermediate_size,
        max_position_embeddings=arch.max_position_embeddings,
        linears=linears,
        source=arch.source,
        exact=arch.exact,
        notes=tuple(arch.notes or ()),
    )


def llama_like_shape(
    *,
    params_total: int | None = None,
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    num_kv_heads: int | None = None,
    intermediate_size: int,
    vocab_size: int,
    tied_embeddings: bool = False,
    family: str = "llama",
) -> ModelShape:
    """A decoder-only gated-MLP shape, counted exactly (no biases, RMSNorm): tests and benches
    use it; the real counting for every family lives in `architecture.py`."""
    kv_heads = num_kv_heads or num_attention_heads
    head_dim = hidden_size // num_attention_heads
    kv_dim = kv_heads * head_dim
    linears = (
        Linear("q_proj", hidden_size, hidden_size),
        Linear("k_proj", hidden_size, kv_dim),
        Linear("v_proj", hidden_size, kv_dim),
        Linear("o_proj", hidden_size, hidden_size),
        Linear("gate_proj", hidden_size, intermediate_size),
        Linear("up_proj", hidden_size, intermediate_size),
        Linear("down_proj", intermediate_size, hidden_size),
    )
    per_layer = sum(lin.in_features * lin.out_features for lin in linears) + 2 * hidden_size
    embedding = vocab_size * hidden_size
    head = 0 if tied_embeddings else vocab_size * hidden_size
    counted = num_layers * per_layer + embedding + head + hidden_size
    total = params_total or counted
    return ModelShape(
        params_total=total,
        params_active=total,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate_size,
        vocab_size=vocab_size,
        gated_mlp=True,
        family=family,
        tied_embeddings=tied_embeddings,
        params_embedding=embedding,
        params_lm_head=head,
        linears=linears,
        source="test shape",
    )
