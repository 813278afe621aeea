"""Qwen's omni models: text, image, audio and video in; text and speech out.

Qwen2.5-Omni (transformers modeling_qwen2_5_omni.py) and Qwen3-Omni (modeling_qwen3_omni_moe.py)
are a *thinker* (a vision tower, an audio encoder and a language model, which reads every input
and writes the text) and, for speech, a *talker* (a smaller language model that turns the
thinker's hidden states into speech codes) and a vocoder (Qwen2.5: token2wav, a DiT that turns
codes into mel frames and a BigVGAN that turns mel frames into waveform; Qwen3: code2wav, a small
transformer and a convolutional decoder).

What is counted, and what it means for a researcher:

* The full classes (Qwen2_5OmniForConditionalGeneration, Qwen3OmniMoeForConditionalGeneration)
  build the talker and the vocoder unless config.json sets enable_audio_output false, so
  params_total is all of it: that is what loading the checkpoint with the full class puts on
  the GPU. The talker and vocoder run only when the model speaks; they never run for the
  thinker's tokens, so they are left out of params_active (Blueprint.idle) and of the FLOPs per
  token.
* Decision: a full fine-tune of the full class is estimated as training everything it loads (an
  upper bound). The common case is fine-tuning the thinker alone (recipes load the thinker class
  or freeze the speech half); its exact size is the thinker-only class
  (Qwen2_5OmniThinkerForConditionalGeneration, model_type qwen2_5_omni_thinker;
  Qwen3OmniMoeThinkerForConditionalGeneration, qwen3_omni_moe_thinker), which this module counts
  too, and the note says so. The engine has no notion of "loaded but frozen" parameters outside
  LoRA, so the full class cannot say "weights of all, optimizer states of the thinker" exactly.
* LoRA and the KV cache follow the thinker's language model (the Blueprint's blocks): its
  attention and MLP linears, its KV heads. The towers, talker and vocoder sit in `outside`.

Reuse: the Qwen2.5-Omni vision tower is Qwen2.5-VL's (multimodal.qwen_vision_params; q/k/v are
separate Linears here but hold the same parameters as the fused qkv) and the Qwen3-Omni one is
Qwen3-VL's with deepstack mergers (multimodal.qwen3_vision_params); the Qwen2.5-Omni audio encoder
is Qwen2-Audio's Whisper encoder (multimodal.qwen2_audio_encoder_params) without its learned
position table. Each sub-config is read over the defaults of its transformers configuration
class, so a field config.json omits counts as transformers would build it.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config, heads
from advisor.engine.architecture.decoders import Decoder, Moe
from advisor.engine.architecture.decoders import blueprint as decoder_blueprint
from advisor.engine.architecture.families import DECODERS
from advisor.engine.architecture.multimodal import (
    qwen2_audio_encoder_params,
    qwen3_vision_params,
    qwen_vision_params,
)
from advisor.engine.errors import ConfigError

# --- transformers' configuration defaults (configuration_qwen2_5_omni.py) ----------------------

_Q25_AUDIO = {
    "num_mel_bins": 128,
    "encoder_layers": 32,
    "encoder_attention_heads": 20,
    "encoder_ffn_dim": 5120,
    "d_model": 1280,
    "max_source_positions": 1500,
    "output_dim": 3584,
}
_Q25_VISION = {
    "depth": 32,
    "hidden_size": 3584,  # transformers' default (every release says 1280)
    "intermediate_size": 3420,
    "num_heads": 16,
    "in_channels": 3,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 3584,
}
_Q25_TEXT = {
    "vocab_size": 152064,
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "max_position_embeddings": 32768,
}
_Q25_TALKER = {
    "vocab_size": 8448,
    "embedding_size": 3584,
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "max_position_embeddings": 32768,
}
_Q25_DIT = {
    "hidden_size": 1024,
    "num_hidden_layers": 22,
    "num_attention_heads": 16,
    "head_dim": 64,
    "ff_mult": 2,
    "emb_dim": 512,
    "num_embeds": 8193,
    "mel_dim": 80,
    "enc_emb_dim": 192,
    "enc_dim": 128,
    "enc_channels": [256, 256, 256, 256, 768],
    "enc_kernel_sizes": [5, 3, 3, 3, 1],
    "enc_dilations": [1, 2, 3, 4, 1],
    "enc_attention_channels": 64,
    "enc_res2net_scale": 2,
    "enc_se_channels": 64,
}
_Q25_BIGVGAN = {
    "mel_dim": 80,
    "upsample_initial_channel": 1536,
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "upsample_rates": [5, 3, 2, 2, 2, 2],
    "upsample_kernel_sizes": [11, 7, 4, 4, 4, 4],
}

# --- transformers' configuration defaults (configuration_qwen3_omni_moe.py) --------------------

_Q3_AUDIO = {**_Q25_AUDIO, "downsample_hidden_size": 480}
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


def _sub(raw: dict, key: str, what: str) -> dict:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"config.json field '{key}' of {what} must be an object", field=key)
    return value


def _ints(c: Config, name: str) -> list[int]:
    values = c.int_list(name)
    for v in values:
        if v <= 0:
            raise ConfigError(f"config.json field '{name}' must list positive integers", field=name)
    return values


def _snake(channels: int) -> int:
    """SnakeBeta: an alpha and a beta per channel."""
    return 2 * channels


def _conv(i: int, o: int, k: int, bias: bool = True) -> int:
    return i * o * k + (o if bias else 0)


# --- Qwen2.5-Omni ------------------------------------------------------------------------------


def q25_audio_params(raw: dict) -> tuple[int, int]:
    """(parameters, output tokens per 30 s) of Qwen2_5OmniAudioEncoder: Qwen2-Audio's Whisper
    encoder (two Conv1d, blocks whose k_proj has no bias, ln_post) whose sinusoidal positions
    are a buffer here, not a parameter, then audio_bos_eos_token (2 x output_dim) and proj
    (d_model -> output_dim, with bias) in place of Qwen2-Audio's projector."""
    merged = {**_Q25_AUDIO, **raw}
    whisper, d, tokens = qwen2_audio_encoder_params(merged)
    a = Config(merged)
    out = a.int("output_dim")
    positions = a.int("max_source_positions") * d  # Qwen2-Audio's table, a buffer here
    return whisper - positions + 2 * out + d * out + out, tokens


def q25_vision_params(raw: dict) -> tuple[int, int, int]:
    """(parameters, output width, pixels per side of one token) of Qwen2.5-Omni's vision
    tower: Qwen2.5-VL's (window attention, RMSNorm, SwiGLU with biases, the 2 x 2 merger)."""
    merged = {**_Q25_VISION, **raw}
    params, side = qwen_vision_params(merged, "qwen2_5_vl", 0)
    return params, Config(merged).int("out_hidden_size"), side


def q25_talker_params(raw: dict) -> int:
    """Qwen2_5OmniTalkerForConditionalGeneration: thinker_to_talker_proj (embedding_size ->
    hidden, with bias), Qwen2.5's decoder layers (q/k/v with biases, head_dim from the config),
    a codec embedding of vocab x embedding_size (the thinker's width, not its own), the final
    norm and codec_head (hidden -> vocab, never tied: the class declares no tied weights)."""
    t = Config({**_Q25_TALKER, **raw, "tie_word_embeddings": False})
    bp = decoder_blueprint(t, "qwen2", DECODERS["qwen2"])
    emb = t.int("embedding_size")
    bp = replace(bp, embedding=bp.vocab * emb)
    return b.assemble(t, bp).params_total + emb * bp.d + bp.d


def _ecapa_params(c: Config) -> int:
    """ECAPA_TimeDelayNet, the DiT's speaker encoder: a TDNN, SE-Res2Net blocks, a TDNN over
    the blocks' concatenated outputs, attentive statistics pooling and a 1 x 1 projection (all
    Conv1d with biases)."""
    channels = _ints(c, "enc_channels")
    kernels = _ints(c, "enc_kernel_sizes")
    dilations = _ints(c, "enc_dilations")
    if not (len(channels) == len(kernels) == len(dilations)) or len(channels) < 2:
        raise ConfigError(
            "config.json fields 'enc_channels', 'enc_kernel_sizes' and 'enc_dilations' of the "
            "token2wav DiT must list the same number (at least 2) of layers",
            field="enc_channels",
        )
    scale = c.int("enc_res2net_scale")
    se = c.int("enc_se_channels")
    params = _conv(c.int("mel_dim"), channels[0], kernels[0])
    for i in range(1, len(channels) - 1):
        inp, out = channels[i - 1], channels[i]
        part = out // scale
        params += (
            _conv(inp, out, 1)
            + (scale - 1) * _conv(part, part, kernels[i])
            + _conv(out, out, 1)
            + _conv(out, se, 1)
            + _conv(se, out, 1)
        )
    last = channels[-1]
    attention = c.int("enc_attention_channels")
    params += _conv(last, last, kernels[-1])  # multi-layer feature aggregation
    params += _conv(3 * last, attention, 1) + _conv(attention, last, 1)  # pooling
    return params + _conv(2 * last, c.int("enc_dim"), 1)


def q25_dit_params(raw: dict) -> int:
    """Qwen2_5OmniToken2WavDiTModel: the timestep MLP (256 -> D -> D), the codec embedding
    (num_embeds + 1 rows of emb_dim), the input projection and ECAPA speaker encoder, blocks of
    an adaptive LayerNorm (D -> 6D), q/k/v/out (heads x head_dim, with biases) and a GELU MLP of
    ff_mult x D (LayerNorms without parameters), the final adaptive norm (D -> 2D) and proj_out
    to mel_dim. Its rotary frequencies are a buffer."""
    c = Config({**_Q25_DIT, **raw})
    d = c.int("hidden_size")
    inner = c.int("num_attention_heads") * c.int("head_dim")
    ff = d * c.int("ff_mult")
    mel = c.int("mel_dim")
    emb = c.int("emb_dim")
    block = (
        _conv(d, 6 * d, 1)
        + 3 * _conv(d, inner, 1)
        + _conv(inner, d, 1)
        + _conv(d, ff, 1)
        + _conv(ff, d, 1)
    )
    time = _conv(256, d, 1) + _conv(d, d, 1)
    codec = (c.int("num_embeds") + 1) * emb
    inputs = _conv(mel + c.int("enc_dim") + c.int("enc_emb_dim") + emb, d, 1) + _ecapa_params(c)
    final = _conv(d, 2 * d, 1) + _conv(d, mel, 1)
    return time + codec + inputs + c.int("num_hidden_layers") * block + final


def q25_bigvgan_params(raw: dict) -> int:
    """Qwen2_5OmniToken2WavBigVGANModel: conv_pre (mel -> C, kernel 7), per upsampling step a
    ConvTranspose1d halving the channels and one AMP block per resblock kernel (six Conv1d with
    biases and six SnakeBeta activations), a final SnakeBeta and conv_post (no bias)."""
    c = Config({**_Q25_BIGVGAN, **raw})
    first = c.int("upsample_initial_channel")
    rates = _ints(c, "upsample_rates")
    kernels = _ints(c, "upsample_kernel_sizes")
    res_kernels = _ints(c, "resblock_kernel_sizes")
    dilations = c.raw.get("resblock_dilation_sizes")
    if (
        len(rates) != len(kernels)
        or not isinstance(dilations, list)
        or len(dilations) < len(res_kernels)
        or not all(isinstance(x, list) and len(x) >= 3 for x in dilations)
    ):
        raise ConfigError(
            "config.json fields of the token2wav BigVGAN must give one kernel per upsampling "
            "rate and three dilations per resblock kernel",
            field="upsample_kernel_sizes",
        )
    params = _conv(c.int("mel_dim"), first, 7)
    for i, kernel in enumerate(kernels):
        inp, out = first // 2**i, first // 2 ** (i + 1)
        params += _conv(inp, out, kernel)
        params += sum(6 * _conv(out, out, k) + 6 * _snake(out) for k in res_kernels)
    last = first // 2 ** len(kernels)
    return params + _snake(last) + _conv(last, 1, 7, bias=False)


def _q25_thinker(t: dict) -> tuple[b.Blueprint, list[str], int]:
    """The thinker's Blueprint (its language model's blocks; vision tower and audio encoder in
    `outside`), its notes and its parameter count."""
    text = {**_Q25_TEXT, **_sub(t, "text_config", "the thinker")}
    # Qwen2_5OmniThinkerForConditionalGeneration ties lm_head to the embedding by the thinker
    # config's tie_word_embeddings (default false), not text_config's.
    tied = Config(t).bool("tie_word_embeddings", default=False)
    tc = Config({**text, "tie_word_embeddings": tied})
    bp = decoder_blueprint(tc, "qwen2", DECODERS["qwen2"])
    vision, vision_out, side = q25_vision_params(_sub(t, "vision_config", "the thinker"))
    audio_raw = _sub(t, "audio_config", "the thinker")
    audio, tokens = q25_audio_params(audio_raw)
    audio_out = Config({**_Q25_AUDIO, **audio_raw}).int("output_dim")
    _widths_match(bp.d, vision_out, audio_out)
    bp = replace(bp, outside=bp.outside + vision + audio)
    notes = [
        f"Includes the vision tower ({vision:,} parameters; an image adds about "
        f"(height / {side}) x (width / {side}) tokens) and the audio encoder ({audio:,}; 30 s "
        f"of audio adds {tokens:,} tokens), which the sequence length should include.",
    ]
    return bp, notes, b.assemble(tc, bp).params_total


def _widths_match(text: int, vision: int, audio: int) -> None:
    if vision != text or audio != text:
        raise ConfigError(
            f"config.json's vision out_hidden_size ({vision}) and audio output_dim ({audio}) "
            f"must equal the thinker's hidden_size ({text}): their tokens join its sequence",
            field="thinker_config",
        )


def qwen2_5_omni_blueprint(c: Config, family: str) -> b.Blueprint:
    """Qwen2_5OmniForConditionalGeneration (qwen2_5_omni: thinker_config, talker_config,
    token2wav_config) or Qwen2_5OmniThinkerForConditionalGeneration (qwen2_5_omni_thinker)."""
    full = family == "qwen2_5_omni"
    thinker = _sub(c.raw, "thinker_config", "Qwen2.5-Omni") if full else c.raw
    bp, notes, thinker_params = _q25_thinker(thinker)
    speech = 0
    if full and c.bool("enable_audio_output", default=True):
        talker = q25_talker_params(_sub(c.raw, "talker_config", "Qwen2.5-Omni"))
        token2wav = _sub(c.raw, "token2wav_config", "Qwen2.5-Omni")
        dit = q25_dit_params(_sub(token2wav, "dit_config", "token2wav"))
        bigvgan = q25_bigvgan_params(_sub(token2wav, "bigvgan_config", "token2wav"))
        speech = talker + dit + bigvgan
        notes += [
            _speech_note(
                f"the talker ({talker:,} parameters) and token2wav (a DiT of {dit:,} and a "
                f"BigVGAN of {bigvgan:,})",
                thinker_params,
                "qwen2_5_omni_thinker (Qwen2_5OmniThinkerForConditionalGeneration)",
            ),
            f"token2wav is kept in float32 whatever the model's dtype: its {dit + bigvgan:,} "
            f"parameters take {4 * (dit + bigvgan) / 1e9:.1f} GB, "
            f"{2 * (dit + bigvgan) / 1e9:.1f} GB more than the 16-bit weights counted here.",
        ]
    elif full:
        notes.append("enable_audio_output is false: the talker and token2wav are not built.")
    return _finish(bp, family, notes, speech)


def _speech_note(what: str, thinker: int, thinker_class: str) -> str:
    return (
        f"Includes the speech half, {what}: loaded with the full class, they hold memory, "
        "but run only when the model speaks, so they are not in the compute per token. A full "
        "fine-tune is estimated as training them too; fine-tuning the thinker alone (the "
        f"common case) trains {thinker:,} parameters: enter the thinker's config as "
        f"{thinker_class}, or set enable_audio_output false, to estimate that."
    )


def _finish(bp: b.Blueprint, family: str, notes: list[str], speech: int) -> b.Blueprint:
    return replace(
        bp,
        family=family,
        outside=bp.outside + speech,
        idle=bp.idle + speech,  # the talker and vocoder do not run for the thinker's tokens
        notes=[*bp.notes, *notes],
    )


# --- Qwen3-Omni --------------------------------------------------------------------------------


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
    convs = _conv(1, ds, 9) + 2 * _conv(ds, ds, 9) + ds * left * d
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
    text = _q3_moe_text(_sub(raw, "text_config", "the talker"), _Q3_TALKER_TEXT)
    # Neither Qwen3OmniMoeTalkerTextConfig's shared_expert_intermediate_size nor the talker
    # config's spatial_merge_size has a default: transformers cannot build a talker without them.
    Config(text).int("shared_expert_intermediate_size")
    t.int("spatial_merge_size")
    tied = t.bool("tie_word_embeddings", default=False)
    tc = Config({**text, "tie_word_embeddings": tied})
    talker = b.assemble(tc, decoder_blueprint(tc, "qwen3_omni_moe_talker", _Q3_TALKER))
    d, inter = talker.hidden_size, talker.intermediate_size
    thinker_width = t.int("thinker_hidden_size", default=2048)
    projections = 2 * (_conv(thinker_width, inter, 1) + _conv(inter, d, 1))

    cp_raw = {**_Q3_CODE_PREDICTOR, **_sub(raw, "code_predictor_config", "the talker")}
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
    for factor in _ints(c, "upsampling_ratios"):
        convnext = _conv(1, d, 7) + b.ln(d) + _conv(d, 4 * d, 1) + _conv(4 * d, d, 1) + d
        params += _conv(d, d, factor) + convnext
    dim = c.int("decoder_dim")
    params += _conv(d, dim, 7)
    rates = _ints(c, "upsample_rates")
    for i, rate in enumerate(rates):
        inp, out = dim // 2**i, dim // 2 ** (i + 1)
        unit = 2 * _snake(out) + _conv(out, out, 7) + _conv(out, out, 1)
        params += _snake(inp) + _conv(inp, out, 2 * rate) + 3 * unit
    last = dim // 2 ** len(rates)
    return params + _snake(last) + _conv(last, 1, 7)


def _q3_thinker(t: dict) -> tuple[b.Blueprint, list[str], int]:
    text = _q3_moe_text(_sub(t, "text_config", "the thinker"), _Q3_TEXT)
    # Qwen3OmniMoeThinkerForConditionalGeneration ties by the thinker config's flag (default
    # false), as Qwen2.5-Omni's does.
    tied = Config(t).bool("tie_word_embeddings", default=False)
    tc = Config({**text, "tie_word_embeddings": tied})
    bp = decoder_blueprint(tc, "qwen3_omni_moe", _Q3_THINKER_TEXT)
    vision_raw = {**_Q3_VISION, **_sub(t, "vision_config", "the thinker")}
    vision, side = qwen3_vision_params(vision_raw, bp.d)
    audio_raw = _sub(t, "audio_config", "the thinker")
    audio = q3_audio_params(audio_raw)
    _widths_match(
        bp.d,
        Config(vision_raw).int("out_hidden_size"),
        Config({**_Q3_AUDIO, **audio_raw}).int("output_dim"),
    )
    bp = replace(bp, outside=bp.outside + vision + audio)
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
    thinker = _sub(c.raw, "thinker_config", "Qwen3-Omni") if full else c.raw
    bp, notes, thinker_params = _q3_thinker(thinker)
    speech = 0
    if full and c.bool("enable_audio_output", default=True):
        talker = q3_talker_params(_sub(c.raw, "talker_config", "Qwen3-Omni"))
        code2wav = q3_code2wav_params(_sub(c.raw, "code2wav_config", "Qwen3-Omni"))
        speech = talker + code2wav
        notes.append(
            _speech_note(
                f"the talker with its code predictor ({talker:,} parameters) and code2wav "
                f"({code2wav:,})",
                thinker_params,
                "qwen3_omni_moe_thinker (Qwen3OmniMoeThinkerForConditionalGeneration)",
            )
        )
    elif full:
        notes.append("enable_audio_output is false: the talker and code2wav are not built.")
    return _finish(bp, family, notes, speech)
