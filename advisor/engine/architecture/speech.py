"""Self-supervised speech encoders: wav2vec 2.0 (wav2vec2, XLSR, XLS-R, MMS), HuBERT (hubert),
WavLM (wavlm) and data2vec-audio (data2vec-audio), counted as transformers 5 builds the class
architectures[0] names (modeling_wav2vec2.py, modeling_hubert.py, modeling_wavlm.py,
modeling_data2vec_audio.py): the bare model, ForCTC, ForPreTraining (wav2vec2 only),
ForSequenceClassification and ForAudioFrameClassification.

What a token is: one frame of the convolutional feature encoder, which turns the raw 16 kHz
waveform into one vector per product(conv_stride) samples (320: 20 ms, 50 frames a second).
seq_len is frames; N frames are N x 20 ms of audio. The model has no position limit (its
positions are a convolution), no KV cache and no generation; the CTC head scores each frame
against a vocabulary of about 32 characters.

The model, in order:

* Feature encoder (`feature_extractor`): conv_dim / conv_kernel / conv_stride Conv1d layers
  (bias where conv_bias), each followed by GELU; feat_extract_norm "group" puts a GroupNorm
  (one group per channel, affine) after the first conv only, "layer" a LayerNorm after every
  conv (data2vec-audio: always "layer"). Its parameters are counted with the embeddings (as
  ViT's patch convolution is): a conv weight runs at every output position, so its FLOPs are
  not 2 x parameters per frame (`Frontend` says what they are).
* Feature projection: LayerNorm(conv_dim[-1]) (HuBERT: where feat_proj_layer_norm) and a
  biased Linear to hidden_size.
* masked_spec_embed (hidden_size) where mask_time_prob or mask_feature_prob > 0.
* Convolutional relative positions (`pos_conv_embed`): one grouped Conv1d(hidden, hidden,
  num_conv_pos_embeddings, groups=num_conv_pos_embedding_groups) with bias, under weight-norm
  parametrisation (torch.nn.utils.parametrizations.weight_norm, dim=2): original0 (g) has one
  value per kernel position, original1 (v) the weight's shape, so the conv holds kernel
  values more than a plain conv. HuBERT with conv_pos_batch_norm: a BatchNorm1d and a plain
  conv instead. data2vec-audio: num_conv_pos_embeddings plain convs of conv_pos_kernel_size,
  each with an affine-free LayerNorm.
* The encoder's LayerNorm (before the blocks in post-norm models, after them where
  do_stable_layer_norm) and num_hidden_layers blocks: biased q/k/v/out_proj, a two-layer GELU
  MLP (intermediate_dense, output_dense), two LayerNorms; post-norm, or pre-norm where
  do_stable_layer_norm (the large models). MMS's adapter_attn_dim adds a small adapter (a
  LayerNorm and two Linears) to each pre-norm block.
* WavLM's gated relative position bias: every layer has gru_rel_pos_const (one value per
  head) and gru_rel_pos_linear (head_dim -> 8); the first layer alone has rel_attn_embed
  (num_buckets x heads), whose bias every layer reuses.
* Heads: CTC lm_head (hidden -> vocab_size); pre-training's quantizer (codevectors:
  num_codevectors_per_group x codevector_dim; weight_proj conv_dim[-1] -> groups x
  codevectors per group), project_hid and project_q (-> proj_codevector_dim); sequence
  classification's projector (-> classifier_proj_size) and classifier, and layer_weights
  (layers + 1) where use_weighted_layer_sum; frame classification's classifier.
"""

from __future__ import annotations

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, check_int, encoder_dims
from advisor.engine.architecture.encoders import label_count
from advisor.engine.architecture.model import Frontend
from advisor.engine.errors import ConfigError

SPEECH_FAMILIES = ("wav2vec2", "hubert", "wavlm", "data2vec-audio")
_CLASS_PREFIX = {
    "wav2vec2": "Wav2Vec2",
    "hubert": "Hubert",
    "wavlm": "WavLM",
    "data2vec-audio": "Data2VecAudio",
}
_HEADS = ("Model", "ForCTC", "ForSequenceClassification", "ForAudioFrameClassification")
SPEECH_ARCHITECTURES = {
    f"{prefix}{head}": family
    for family, prefix in _CLASS_PREFIX.items()
    for head in _HEADS + (("ForPreTraining",) if family == "wav2vec2" else ())
}
SAMPLE_RATE = 16_000  # every released checkpoint's feature extractor (sampling_rate)


def _conv_stack(c: Config, family: str) -> tuple[list[int], list[int], list[int]]:
    dims = c.int_list("conv_dim") or [512] * 7
    kernels = c.int_list("conv_kernel") or [10, 3, 3, 3, 3, 2, 2]
    strides = c.int_list("conv_stride") or [5, 2, 2, 2, 2, 2, 2]
    layers = c.int("num_feat_extract_layers", default=len(dims))
    if not (len(dims) == len(kernels) == len(strides) == layers):
        raise ConfigError(
            "config.json fields 'conv_dim', 'conv_kernel' and 'conv_stride' must each list "
            f"num_feat_extract_layers ({layers}) values",
            field="conv_dim",
        )
    for name, values in (("conv_dim", dims), ("conv_kernel", kernels), ("conv_stride", strides)):
        for value in values:
            check_int(value, name)
    return dims, kernels, strides


def feature_encoder(
    dims: list[int], kernels: list[int], strides: list[int], *, norm: str, bias: bool
) -> tuple[int, Frontend]:
    """(parameters, Frontend) of the convolutional feature encoder.

    Per frame (product(strides) samples), conv layer i has prod(strides[i+1:]) output
    positions of dims[i] channels, each a dot product of dims[i-1] x kernels[i] inputs: its
    forward FLOPs are 2 x that x dims[i] x positions. What autograd keeps when the encoder
    is trained (wav2vec 2.0 pre-training trains it; fine-tuning freezes it, below): each
    conv's input (for its weight's gradient), each norm's input and each GELU's input. Under
    autocast the norms run in fp32, so their outputs, which GELU keeps, are fp32 (`fp32`)."""
    params = flops = saved = fp32 = 0
    working = checkpointed = largest = 0
    previous_channels, previous_positions = 1, 1
    for i in range(len(dims)):
        positions = 1
        for stride in strides[i:]:
            positions *= stride
        positions //= strides[i]  # outputs of this layer per frame
        if i == 0:
            previous_positions = positions * strides[0]  # samples per frame
        inputs = previous_channels * previous_positions
        outputs = dims[i] * positions
        params += previous_channels * kernels[i] * dims[i] + (dims[i] if bias else 0)
        normed = norm == "layer" or (norm == "group" and i == 0)
        params += 2 * dims[i] if normed else 0  # GroupNorm / LayerNorm, affine
        flops += 2 * previous_channels * kernels[i] * dims[i] * positions
        # conv input, GELU input, and the norm's input (the conv output) where there is one
        layer_saved = inputs + outputs + (outputs if normed else 0)
        saved += layer_saved
        fp32 += outputs if normed else 0
        # Without autograd a layer holds its input, its conv output and the next tensor.
        working = max(working, inputs + 2 * outputs)
        # Checkpointed (each conv layer is a GradientCheckpointingLayer): its input alone,
        # and the largest layer recomputed in full during backward.
        checkpointed += inputs
        largest = max(largest, layer_saved)
        previous_channels, previous_positions = dims[i], positions
    samples = 1
    for stride in strides:
        samples *= stride
    return params, Frontend(
        samples_per_token=samples,
        seconds_per_token=samples / SAMPLE_RATE,
        params=params,
        forward_flops=flops,
        saved=saved,
        saved_fp32=fp32,
        checkpointed=checkpointed + largest,
        working=working,
    )


def _positional(c: Config, family: str, d: int) -> int:
    groups = c.int("num_conv_pos_embedding_groups", default=16)
    if d % groups:
        raise ConfigError(
            f"config.json field 'num_conv_pos_embedding_groups' ({groups}) must divide the "
            f"hidden size ({d})",
            field="num_conv_pos_embedding_groups",
        )
    if family == "data2vec-audio":
        kernel = c.int("conv_pos_kernel_size", default=19)
        return c.int("num_conv_pos_embeddings", default=5) * (d * (d // groups) * kernel + d)
    kernel = c.int("num_conv_pos_embeddings", default=128)
    conv = d * (d // groups) * kernel + d
    if family == "hubert" and c.bool("conv_pos_batch_norm", default=False):
        return conv + 2 * d  # BatchNorm1d(hidden) before a plain conv
    return conv + kernel  # weight norm's g: one value per kernel position (dim=2)


def _head(c: Config, family: str, architecture: str, d: int, layers: int, c_last: int):
    """(parameters, what the head is, vocabulary it scores per frame)."""
    head = architecture[len(_CLASS_PREFIX[family]) :] if architecture else "Model"
    if head not in SPEECH_ARCHITECTURES_HEADS.get(family, ()):
        raise ConfigError(
            f"The estimator cannot count {architecture}: it counts the {family} model, its CTC, "
            "pre-training and sequence or frame classification heads, not this one. Enter the "
            "parameter count from the model card instead.",
            field="architectures",
        )
    weights = (layers + 1) if c.bool("use_weighted_layer_sum", default=False) else 0
    if head == "ForCTC":
        vocab = c.int("vocab_size", default=32)
        return d * vocab + vocab, f"its CTC head ({vocab} symbols per frame)", vocab
    if head == "ForPreTraining":
        groups = c.int("num_codevector_groups", default=2)
        per_group = c.int("num_codevectors_per_group", default=320)
        code = c.int("codevector_dim", default=256)
        projected = c.int("proj_codevector_dim", default=256)
        if code % groups:
            raise ConfigError(
                f"config.json field 'codevector_dim' ({code}) must be divisible by "
                f"'num_codevector_groups' ({groups})",
                field="codevector_dim",
            )
        quantizer = per_group * code + c_last * groups * per_group + groups * per_group
        projections = d * projected + projected + code * projected + projected
        return quantizer + projections, "its quantizer and contrastive projections", 0
    if head == "ForSequenceClassification":
        labels = label_count(c)
        size = c.int("classifier_proj_size", default=256)
        params = weights + d * size + size + size * labels + labels
        return params, f"its {labels}-label utterance classifier", 0
    if head == "ForAudioFrameClassification":
        labels = label_count(c)
        return weights + d * labels + labels, f"its {labels}-label frame classifier", 0
    return 0, "no head (the bare model)", 0


SPEECH_ARCHITECTURES_HEADS = {
    family: tuple(
        name[len(prefix) :]
        for name, fam in SPEECH_ARCHITECTURES.items()
        if fam == family
        for prefix in (_CLASS_PREFIX[family],)
    )
    for family in SPEECH_FAMILIES
}


def _feature_norm(c: Config, family: str) -> str:
    """The feature encoder's norm: "group" (after the first conv) or "layer" (after each)."""
    norm = "layer" if family == "data2vec-audio" else c.str("feat_extract_norm", "group")
    if norm not in ("group", "layer"):
        raise ConfigError(
            f"config.json field 'feat_extract_norm' must be 'group' or 'layer', got {norm!r}",
            field="feat_extract_norm",
        )
    return norm


def _with_contrastive_loss(c: Config, frontend: Frontend) -> Frontend:
    """The Frontend with what wav2vec 2.0 pre-training's contrastive loss keeps per frame."""
    # The contrastive loss gathers num_negatives distractors per frame and scores them
    # with cosine similarity on fp32 copies: about 3 x (num_negatives + 1) x
    # proj_codevector_dim fp32 values kept per frame (measured with autograd's
    # saved-tensor hooks on wav2vec2-base's head: 78,556 = 3.04 x 101 x 256).
    negatives = c.int("num_negatives", default=100)
    projected = c.int("proj_codevector_dim", default=256)
    return frontend.model_copy(update={"head_saved_fp32": 3 * (negatives + 1) * projected})


def _frames_note(frontend: Frontend) -> str:
    seconds = frontend.seconds_per_token
    return (
        f"One token is one frame of the feature encoder: {frontend.samples_per_token} samples "
        f"= {seconds * 1000:g} ms of 16 kHz audio, so a sequence of N frames is N x "
        f"{seconds:g} s ({1 / seconds:g} frames a second: 20 s of audio is "
        f"{round(20 / seconds):,} frames, 2,048 frames are {2048 * seconds:.1f} s)."
    )


def _encoder_note(
    stable: bool, layers: int, d: int, head_words: str, conv_layers: int, conv_params: int
) -> str:
    return (
        f"{'Pre-norm' if stable else 'Post-norm'} {layers}-layer encoder of width {d} with "
        f"{head_words}. Its convolutional feature encoder ({conv_layers} layers, "
        f"{conv_params:,} parameters) reads the raw waveform: its activations per frame "
        "are counted beside the blocks'. It is trained in pre-training and frozen in "
        "fine-tuning (freeze_feature_encoder, as the wav2vec 2.0 paper and transformers' "
        "speech-recognition example do): then it only runs forward."
    )


_PRETRAINING_NOTE = (
    "Pre-training keeps the contrastive loss's distractor scores (counted); the "
    "quantizer's codevector product is transient and not counted."
)
_WAVLM_NOTE = (
    "WavLM computes attention with torch's multi_head_attention_forward and a gated "
    "relative-position bias: it keeps every layer's attention scores whatever the "
    "attention implementation asked for (no fused kernel), and LoRA adapters on "
    "q/k/v/out_proj do not run (the weights are read directly, not called)."
)


def speech_blueprint(c: Config, family: str) -> b.Blueprint:
    if c.bool("add_adapter", default=False):
        raise ConfigError(
            "The estimator cannot count a speech encoder with add_adapter (the convolutional "
            "adapter that shortens the sequence for a speech encoder-decoder). Enter the "
            "parameter count from the model card instead.",
            field="add_adapter",
        )
    d, layers, h, kv, hd, inter = encoder_dims(c)
    dims, kernels, strides = _conv_stack(c, family)
    norm = _feature_norm(c, family)
    stable = family != "data2vec-audio" and c.bool("do_stable_layer_norm", default=False)
    encoder_params, frontend = feature_encoder(
        dims, kernels, strides, norm=norm, bias=c.bool("conv_bias", default=False)
    )
    c_last = dims[-1]
    projection_norm = family != "hubert" or c.bool("feat_proj_layer_norm", default=True)
    projection = (b.ln(c_last) if projection_norm else 0) + c_last * d + d
    masked = c.raw.get("mask_time_prob", 0.05) or c.raw.get("mask_feature_prob", 0.0)
    spec_embed = d if isinstance(masked, int | float) and masked > 0 else 0
    positional = _positional(c, family, d)
    architecture = c.architecture() or ""
    head, head_words, vocab = _head(c, family, architecture, d, layers, c_last)
    notes: list[str] = []
    if architecture.endswith("ForPreTraining"):
        frontend = _with_contrastive_loss(c, frontend)
        notes.append(_PRETRAINING_NOTE)

    attention = b.attention(
        d, h, kv, hd, names=("q_proj", "k_proj", "v_proj", "out_proj"), qkv_bias=True,
        out_bias=True,
    )  # fmt: skip
    mlp = b.mlp(d, inter, names=("intermediate_dense", "output_dense"), bias=True)
    block_norms = 2 * b.ln(d)
    outside = projection + spec_embed + positional + b.ln(d) + head
    if family == "wavlm":
        buckets = c.int("num_buckets", default=320)
        # gru_rel_pos_linear is an nn.Linear applied to each head's slice (head_dim -> 8).
        attention.append(b.lin("gru_rel_pos_linear", hd, 8, True, "rel_pos_gate_proj"))
        block_norms += h  # gru_rel_pos_const
        outside += buckets * h  # rel_attn_embed, first layer only
        notes.append(_WAVLM_NOTE)
    adapter = c.opt_int("adapter_attn_dim")
    if adapter and stable and family in ("wav2vec2", "hubert"):
        # MMS's per-language attention adapter (Wav2Vec2AttnAdapterLayer) in each pre-norm block.
        attention += [
            b.lin("adapter_layer.linear_1", d, adapter, True, "adapter_in"),
            b.lin("adapter_layer.linear_2", adapter, d, True, "adapter_out"),
        ]
        block_norms += b.ln(d)
    notes.insert(0, _frames_note(frontend))
    notes.append(_encoder_note(stable, layers, d, head_words, len(dims), encoder_params))
    return b.Blueprint(
        family=family,
        d=d,
        layers=layers,
        h=h,
        kv=kv,
        hd=hd,
        inter=inter,
        gated=False,
        vocab=vocab,
        positions=None,
        tied=False,
        attention=attention,
        mlp=mlp,
        block_norms=block_norms,
        embedding=encoder_params,
        lm_head=0,
        outside=outside,
        notes=notes,
        frontend=frontend,
        eager_attention=family == "wavlm",
    )
