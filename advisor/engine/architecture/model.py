"""The counted architecture: what the rest of the engine reads about a model's shape."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LinearShape(_Frozen):
    """One Linear layer of a decoder block (or `count_per_layer` of the same shape)."""

    # The module name as transformers (and PEFT target_modules) spell it: "q_proj", "c_attn",
    # "fc1", "experts.w1", ...
    name: str
    in_features: int
    out_features: int
    count_per_layer: int = 1  # num_experts for expert weights
    bias: bool
    # What the layer does, whatever the family calls it: "attn_q", "attn_k", "attn_v", "attn_qkv",
    # "attn_out", "cross_attn_q", ..., "mlp_gate", "mlp_up", "mlp_gate_up", "mlp_down", "mlp_in",
    # "mlp_out", "router", "expert_gate", "expert_up", "expert_down", "shared_expert_*".
    role: str = ""
    # An nn.Linear module, which PEFT's target_modules="all-linear" adapts; False: a weight
    # the family keeps as a parameter tensor (gpt-oss's experts and router), which it does not.
    module: bool = True
    # How many blocks have this layer when not every block does: a hybrid's softmax-attention
    # and linear-attention blocks (Qwen3.5), a MoE's dense and sparse blocks. None: all.
    layers: int | None = None

    @property
    def params(self) -> int:
        """The parameters of this layer in one block that has it."""
        return self.count_per_layer * (
            self.in_features * self.out_features + self.out_features * self.bias
        )


class LinearAttention(_Frozen):
    """A hybrid's linear-attention blocks (Qwen3.5's gated DeltaNet, a Mamba-2 mixer, LFM2's
    short convolution): they keep no KV cache but, per sequence and whatever its length, a
    fixed recurrent state, and their own tensors for backward."""

    layers: int  # blocks of this kind (the others use softmax attention)
    state_values: int  # per sequence and block, in the activation dtype (the conv window)
    state_fp32_values: int  # per sequence and block, in float32 (the delta rule's matrix)
    saved_per_token: int  # activation elements one block keeps for backward per token,
    # in place of softmax attention's Q, K, V and output
    # Falcon-H1: these blocks also run the model's softmax attention beside the linear mixer
    # (the two summed): they keep a KV cache and attention activations as well.
    parallel_attention: bool = False
    # Nemotron-H: a block holds a mixer (linear or softmax attention) or an MLP, never both:
    # no mixer block has an MLP, and `mlp_only_layers` further blocks are an MLP (dense or
    # experts) alone.
    separate_mlp: bool = False
    mlp_only_layers: int = 0
    # Mamba (residual_in_fp32): every block adds its output to a float32 copy of the residual,
    # so the stream between blocks (and each checkpointed block input) is float32.
    fp32_residual: bool = False


class AttentionGroup(_Frozen):
    """Decoder layers that attend alike, where a model's softmax layers differ (Gemma 4: its
    sliding and full layers differ in head size, key/value heads and window, and its KV-shared
    layers read another layer's cache instead of keeping their own)."""

    layers: int
    query_width: int  # query heads x head dim
    kv_heads: int
    head_dim: int
    window: int | None = None  # a sliding window; None: the whole context
    caches: bool = True  # False: reads the keys and values another layer cached
    # Cross-attention to another input's tokens (Llama 3.2 Vision's layers read an image's
    # max_num_tiles x patches vision states): every query reads all of them and the layer
    # caches their keys and values once per sequence, however long the text; None: the
    # layer attends to the sequence itself.
    cross_tokens: int | None = None
    # Sparse attention (DeepSeek Sparse Attention): every query reads at most this many of the
    # cached tokens (index_topk), picked by an indexer, though the layer caches them all; None:
    # it reads its window or the whole context.
    reads: int | None = None
    # Values cached per token where not 2 x kv_heads x head_dim (DeepSeek-V3.2: MLA's latent
    # and rotary key plus the indexer's key), replicated, not split by head, under tensor
    # parallelism; None: 2 x kv_heads x head_dim.
    cache_width: int | None = None


class StackWidths(_Frozen):
    """An encoder stack's widths where they differ from the decoder's: a masked autoencoder
    (ViT-MAE, VideoMAE) runs a wide encoder over the visible patches and a narrow decoder over
    all of them (ViT-MAE base: 12 layers of 768 over 50 tokens, 8 of 512 over 197)."""

    hidden_size: int
    num_attention_heads: int
    head_dim: int
    intermediate_size: int


class Frontend(_Frozen):
    """A convolutional stem that turns raw input into the blocks' tokens, where its cost per
    token is not 2 x its parameters (a speech encoder's feature encoder reads 320 waveform
    samples per frame through seven strided convolutions: architecture/speech.py). All
    counts are per token (frame) and in elements; its parameters sit in params_embedding."""

    samples_per_token: int  # raw input samples one token stands for
    seconds_per_token: float  # of audio at the model's sampling rate
    params: int
    forward_flops: int  # per token, one forward pass
    saved: int  # kept for backward per token when the stem is trained
    saved_fp32: int  # of those, kept in fp32 under autocast (its norms' outputs)
    checkpointed: int  # kept per token when its layers are checkpointed (inputs + one layer)
    working: int  # held at once per token by a forward pass without autograd
    # Trained only in pre-training: fine-tuning freezes it (freeze_feature_encoder), so it
    # runs forward without autograd.
    trained_tasks: tuple[str, ...] = ("pretrain",)
    # Kept per token in fp32 by a pre-training head's loss outside the blocks (wav2vec 2.0's
    # contrastive loss: the distractors' cosine similarities), when the job pre-trains.
    head_saved_fp32: int = 0


class ModelArchitecture(_Frozen):
    family: str
    architecture: str | None = None  # config["architectures"][0]
    is_encoder_decoder: bool = False
    num_layers: int  # decoder (or only) stack
    encoder_layers: int = 0
    # An encoder-decoder's encoder stack (its blocks, norms and input layers; the shared
    # token embedding is counted in params_embedding), and the length its input always has
    # where the model fixes it (Whisper: 30 s of audio, 1,500 positions); None: the input's.
    params_encoder: int = 0
    encoder_positions: int | None = None
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
    # The Linear layers of one decoder block (attention + MLP / experts), for LoRA and FLOPs.
    layer_linears: list[LinearShape] = Field(default_factory=list)
    params_total: int
    params_active: int  # per token: MoE counts only routed experts_per_token + shared experts
    params_embedding: int  # token (+ position / token-type / patch) embeddings
    params_lm_head: int  # 0 when tied to the input embedding
    source: str  # "config.json (llama)", "hub safetensors", "typed by researcher"
    exact: bool  # False for fallbacks and approximations
    notes: list[str] = Field(default_factory=list)
    # What the checkpoint stores, when the Hub said: sum of element count x dtype size, and the
    # quantisation width in bits (None when not quantised).
    stored_weight_bytes: int | None = None
    quantization_bits: int | None = None
    # Values the KV cache holds per token and layer when that is not 2 x num_kv_heads x head_dim:
    # DeepSeek's multi-head latent attention caches kv_lora_rank + qk_rope_head_dim.
    kv_cache_width: int | None = None
    # The model runs its repository's own code (config.json's auto_map names a class transformers
    # does not ship): that code keeps transformers' pre-4.36 habits (memory.py says which).
    remote_code: bool = False
    # A hybrid's linear-attention blocks; None: every block uses softmax attention.
    linear_attention: LinearAttention | None = None
    # What the checkpoint stores beyond the parameters counted, by what it is (Qwen3.5's
    # multi-token-prediction layer, which transformers does not load; Gemma 4's per-layer
    # scalar buffers): not counted, but they explain the Hub's total.
    stored_extras: dict[str, int] = Field(default_factory=dict)
    # Set where the softmax layers differ (AttentionGroup); empty: every layer as the fields
    # above say.
    attention_groups: list[AttentionGroup] = Field(default_factory=list)
    # The encoder stack's widths where they differ from the decoder's (StackWidths); None:
    # both stacks have the fields above (T5, BART, Whisper).
    encoder_widths: StackWidths | None = None
    # A convolutional stem in front of the blocks (speech encoders' feature encoder); None:
    # the tokens are looked up (or patch-embedded at 2 x parameters per token).
    frontend: Frontend | None = None
    # The model computes attention with explicit scores whatever attn_implementation says
    # (WavLM's gated relative-position bias): no fused kernel, the scores are kept.
    eager_attention: bool = False
    # Copies of the hidden state the residual stream carries between blocks (Gemma 3n's AltUp:
    # altup_num_inputs); 1 for every other model.
    residual_streams: int = 1
    # Parameters of the encoders a multimodal model runs once on each image or audio clip
    # (vision towers, audio encoders, their projectors; counted in params_total): a decoding
    # step runs the language model alone, so it neither reads nor multiplies them.
    params_input_towers: int = 0
