"""Qwen3-Omni (transformers modeling_qwen3_omni_moe.py): the thinker (Qwen3-VL's vision tower
with deepstack mergers, the AuT audio encoder and a Qwen3-MoE language model), the talker (an
MoE language model and its code predictor) and code2wav.

What is counted, and why (the speech half loaded but idle per token; the thinker-only class for
fine-tuning the thinker alone), is told in omni.py, whose helpers this module shares.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.architecture.decoders import Decoder, Moe
from advisor.engine.architecture.decoders import blueprint as decoder_blueprint
from advisor.engine.architecture.families import DECODERS
from advisor.engine.architecture.omni import (
    Q25_AUDIO,
    check_widths,
    conv_params,
    positive_ints,
    snake_params,
    speech_note,
    sub_config,
    with_speech,
)
from advisor.engine.architecture.qwen_multimodal import qwen3_vision_params
from advisor.engine.errors import ConfigError

# --- transformers' configuration defaults (configuration_qwen3_omni_moe.py) --------------------

_Q3_AUDIO = {**Q25_AUDIO, "downsample_hidden_size": 480}
_Q3_VISION = {
    "depth": 27,
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_heads": 16,
    "in_channels": 3,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 3584,
    "num_position_embeddings": 2304,
    "deepstack_visual_indexes": [8, 16, 24],
}
_Q3_TEXT = {
    "vocab_size": 3584,
    "hidden_size": 2048,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "max_position_embeddings": 32768,
    "decoder_sparse_step": 1,
    "moe_intermediate_size": 768,
    "num_experts_per_tok": 8,
    "num_experts": 128,
}
_Q3_TALKER_TEXT = {
    "vocab_size": 3072,
    "hidden_size": 1024,
    "intermediate_size": 2048,
    "num_hidden_layers": 20,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "moe_intermediate_size": 384,
    "num_experts_per_tok": 8,
    "num_experts": 128,
}
_Q3_CODE_PREDICTOR = {
    "vocab_size": 2048,
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 5,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 32768,
    "num_code_groups": 32,
}
_Q3_CODE2WAV = {
    "codebook_size": 2048,
    "hidden_size": 1024,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "intermediate_size": 3072,
    "num_hidden_layers": 8,
    "num_quantizers": 16,
    "upsample_rates": [8, 5, 4, 3],
    "upsampling_ratios": [2, 2],
    "decoder_dim": 1536,
}

# Qwen3-Omni's thinker language model (Qwen3OmniMoeThinkerTextModel): Qwen3-MoE's layers (q/k
# norms, biases where attention_bias) with the experts and router kept as 3-D parameters, as
# Qwen3-VL-MoE's, and dense MLPs of intermediate_size in mlp_only_layers.
_Q3_THINKER_TEXT = DECODERS["qwen3_vl_moe_text"]
# Its talker (Qwen3OmniMoeTalkerDecoderLayer): the same attention, and in *every* layer (the
# layer builds the thinker's block, then replaces it whatever mlp_only_layers and
# decoder_sparse_step say) parameter-tensor experts beside one shared expert of
# shared_expert_intermediate_size and its sigmoid gate, as Qwen2-MoE's.
_Q3_TALKER = Decoder(
    qk_norm="head",
    moe=Moe(
        experts="num_experts",
        names=("gate_up_proj", "gate_up_proj", "down_proj"),
        shared="qwen",
        modules=False,
    ),
)


def q3_audio_params(raw: dict) -> int:
    """Qwen3OmniMoeAudioEncoder (AuT): three stride-2 Conv2d over the mel spectrogram
    (downsample_hidden_size channels, 3 x 3), conv_out (channels x the mel bins left after
    three halvings -> d_model, no bias), Whisper-style blocks whose q/k/v/out all have biases,
    ln_post, then proj1 (d -> d) and proj2 (d -> output_dim), both with biases. Sinusoidal
    positions are a buffer."""
    a = Config({**_Q3_AUDIO, **raw})
    d = a.int("d_model")
    heads(a, d, ("encoder_attention_heads",))  # validated; the projections are d x d
    ffn = a.int("encoder_ffn_dim")
    ds = a.int("downsample_hidden_size")
    mels = a.int("num_mel_bins")
    left = (((mels + 1) // 2 + 1) // 2 + 1) // 2
    block = 4 * (d * d + d) + 2 * d * ffn + ffn + d + 2 * b.ln(d)
    convs = conv_params(1, ds, 9) + 2 * conv_params(ds, ds, 9) + ds * left * d
    out = a.int("output_dim")
    return convs + a.int("encoder_layers") * block + b.ln(d) + d * d + d + d * out + out


def _q3_moe_text(raw: dict, defaults: dict) -> dict:
    """A text config over its defaults; Qwen3OmniMoeTalkerTextConfig maps num_experts to
    num_local_experts, the name transformers 5 saves it under."""
    text = {**defaults, **raw}
    if raw.get("num_local_experts") is not None and raw.get("num_experts") is None:
        text["num_experts"] = raw["num_local_experts"]
    return text


def q3_talker_params(raw: dict) -> int:
    """Qwen3OmniMoeTalkerForConditionalGeneration: its MoE language model (codec embedding,
    blocks, norm), text_projection and hidden_projection (two-layer MLPs with biases from the
    thinker's width through intermediate_size to the talker's), codec_head (tied to the codec
    embedding where talker_config.tie_word_embeddings) and the code predictor: a small Qwen3
    dense decoder with num_code_groups - 1 codec embeddings and as many heads."""
    t = Config(raw)
    text = _q3_moe_text(sub_config(raw, "text_config", "the talker"), _Q3_TALKER_TEXT)
    # Neither Qwen3OmniMoeTalkerTextConfig's shared_expert_intermediate_size nor the talker
    # config's spatial_merge_size has a default: transformers cannot build a talker without them.
    Config(text).int("shared_expert_intermediate_size")
    t.int("spatial_merge_size")
    tied = t.bool("tie_word_embeddings", default=False)
    tc = Config({**text, "tie_word_embeddings": tied})
    talker = b.assemble(tc, decoder_blueprint(tc, "qwen3_omni_moe_talker", _Q3_TALKER))
    d, inter = talker.hidden_size, talker.intermediate_size
    thinker_width = t.int("thinker_hidden_size", default=2048)
    projections = 2 * (conv_params(thinker_width, inter, 1) + conv_params(inter, d, 1))

    cp_raw = {**_Q3_CODE_PREDICTOR, **sub_config(raw, "code_predictor_config", "the talker")}
    if Config(cp_raw).bool("tie_word_embeddings", default=False):
        raise ConfigError(
            "The estimator cannot count a Qwen3-Omni talker whose code_predictor_config sets "
            "tie_word_embeddings: transformers 5 fails to build it (it ties the heads to an "
            "embedding the code predictor does not have).",
            field="talker_config",
        )
    cc = Config({**cp_raw, "tie_word_embeddings": True})
    groups = cc.int("num_code_groups") - 1
    if groups < 1:
        raise ConfigError(
            "config.json field 'num_code_groups' of the code predictor must be at least 2",
            field="num_code_groups",
        )
    cp = decoder_blueprint(cc, "qwen3", DECODERS["qwen3"])
    tables = groups * cp.vocab * cp.d
    predictor = b.assemble(cc, replace(cp, embedding=tables, lm_head=tables)).params_total
    return talker.params_total + projections + predictor


def q3_code2wav_params(raw: dict) -> int:
    """Qwen3OmniMoeCode2Wav: the code embedding (codebook_size x num_quantizers rows), a
    sliding-window transformer (q/k/v/o, SwiGLU, two RMSNorms and two layer scales a block, a
    final norm), per upsampling ratio a ConvTranspose1d and a ConvNeXt block, then the decoder:
    a Conv1d to decoder_dim and per upsample rate a SnakeBeta, a ConvTranspose1d halving the
    channels and three residual units (two SnakeBeta, a kernel-7 and a 1 x 1 Conv1d), a final
    SnakeBeta and a Conv1d to one channel (every conv with bias)."""
    c = Config({**_Q3_CODE2WAV, **raw})
    d = c.int("hidden_size")
    h, kv, hd = heads(c, d, ("num_attention_heads",), ("num_key_value_heads",))
    bias = c.bool("attention_bias", default=False)
    inter = c.int("intermediate_size")
    block = (
        b.total([*b.attention(d, h, kv, hd, qkv_bias=bias, out_bias=bias), *b.gated_mlp(d, inter)])
        + 4 * d
    )
    params = c.int("codebook_size") * c.int("num_quantizers") * d
    params += c.int("num_hidden_layers") * block + d
    for factor in positive_ints(c, "upsampling_ratios"):
        convnext = (
            conv_params(1, d, 7) + b.ln(d) + conv_params(d, 4 * d, 1) + conv_params(4 * d, d, 1) + d
        )
        params += conv_params(d, d, factor) + convnext
    dim = c.int("decoder_dim")
    params += conv_params(d, dim, 7)
    rates = positive_ints(c, "upsample_rates")
    for i, rate in enumerate(rates):
        inp, out = dim // 2**i, dim // 2 ** (i + 1)
        unit = 2 * snake_params(out) + conv_params(out, out, 7) + conv_params(out, out, 1)
        params += snake_params(inp) + conv_params(inp, out, 2 * rate) + 3 * unit
    last = dim // 2 ** len(rates)
    return params + snake_params(last) + conv_params(last, 1, 7)


def _q3_thinker(t: dict) -> tuple[b.Blueprint, list[str], int]:
    text = _q3_moe_text(sub_config(t, "text_config", "the thinker"), _Q3_TEXT)
    # Qwen3OmniMoeThinkerForConditionalGeneration ties by the thinker config's flag (default
    # false), as Qwen2.5-Omni's does.
    tied = Config(t).bool("tie_word_embeddings", default=False)
    tc = Config({**text, "tie_word_embeddings": tied})
    bp = decoder_blueprint(tc, "qwen3_omni_moe", _Q3_THINKER_TEXT)
    vision_raw = {**_Q3_VISION, **sub_config(t, "vision_config", "the thinker")}
    vision, side = qwen3_vision_params(vision_raw, bp.d)
    audio_raw = sub_config(t, "audio_config", "the thinker")
    audio = q3_audio_params(audio_raw)
    check_widths(
        bp.d,
        Config(vision_raw).int("out_hidden_size"),
        Config({**_Q3_AUDIO, **audio_raw}).int("output_dim"),
    )
    towers = vision + audio
    bp = replace(bp, outside=bp.outside + towers, input_towers=bp.input_towers + towers)
    notes = [
        f"Includes the vision tower with its deepstack mergers ({vision:,} parameters; an image "
        f"adds about (height / {side}) x (width / {side}) tokens) and the audio encoder "
        f"({audio:,}; about 12.5 tokens per second of audio), which the sequence length should "
        "include.",
    ]
    return bp, notes, b.assemble(tc, bp).params_total


def qwen3_omni_moe_blueprint(c: Config, family: str) -> b.Blueprint:
    """Qwen3OmniMoeForConditionalGeneration (qwen3_omni_moe: thinker_config, talker_config,
    code2wav_config) or Qwen3OmniMoeThinkerForConditionalGeneration (qwen3_omni_moe_thinker).
    The Thinking and Captioner releases set enable_audio_output false: thinker only."""
    full = family == "qwen3_omni_moe"
    thinker = sub_config(c.raw, "thinker_config", "Qwen3-Omni") if full else c.raw
    bp, notes, thinker_params = _q3_thinker(thinker)
    speech = 0
    if full and c.bool("enable_audio_output", default=True):
        talker = q3_talker_params(sub_config(c.raw, "talker_config", "Qwen3-Omni"))
        code2wav = q3_code2wav_params(sub_config(c.raw, "code2wav_config", "Qwen3-Omni"))
        speech = talker + code2wav
        notes.append(
            speech_note(
                f"the talker with its code predictor ({talker:,} parameters) and code2wav "
                f"({code2wav:,})",
                thinker_params,
                "qwen3_omni_moe_thinker (Qwen3OmniMoeThinkerForConditionalGeneration)",
            )
        )
    elif full:
        notes.append("enable_audio_output is false: the talker and code2wav are not built.")
    return with_speech(bp, family, notes, speech)
