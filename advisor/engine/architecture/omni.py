"""Qwen's omni models: text, image, audio and video in; text and speech out.

Qwen2.5-Omni (transformers modeling_qwen2_5_omni.py) and Qwen3-Omni (modeling_qwen3_omni_moe.py)
are a *thinker* (a vision tower, an audio encoder and a language model, which reads every input
and writes the text) and, for speech, a *talker* (a smaller language model that turns the
thinker's hidden states into speech codes) and a vocoder (Qwen2.5: token2wav, a DiT that turns
codes into mel frames and a BigVGAN that turns mel frames into waveform; Qwen3: code2wav, a small
transformer and a convolutional decoder). Qwen2.5-Omni is counted here, Qwen3-Omni in
qwen3_omni.py, which shares this module's helpers.

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
  Qwen3OmniMoeThinkerForConditionalGeneration, qwen3_omni_moe_thinker), which is counted too,
  and the note says so. The engine has no notion of "loaded but frozen" parameters outside
  LoRA, so the full class cannot say "weights of all, optimizer states of the thinker" exactly.
* LoRA and the KV cache follow the thinker's language model (the Blueprint's blocks): its
  attention and MLP linears, its KV heads. The towers, talker and vocoder sit in `outside`.

Reuse: the Qwen2.5-Omni vision tower is Qwen2.5-VL's (qwen_multimodal.qwen_vision_params; q/k/v
are separate Linears here but hold the same parameters as the fused qkv) and the Qwen3-Omni one
is Qwen3-VL's with deepstack mergers (qwen_multimodal.qwen3_vision_params); the Qwen2.5-Omni
audio encoder is Qwen2-Audio's Whisper encoder (qwen_multimodal.qwen2_audio_encoder_params)
without its learned position table. Each sub-config is read over the defaults of its
transformers configuration class, so a field config.json omits counts as transformers would
build it.
"""

from __future__ import annotations

from dataclasses import replace

from advisor.engine.architecture import blocks as b
from advisor.engine.architecture.config import Config
from advisor.engine.architecture.decoders import blueprint as decoder_blueprint
from advisor.engine.architecture.families import DECODERS
from advisor.engine.architecture.qwen_multimodal import (
    qwen2_audio_encoder_params,
    qwen_vision_params,
)
from advisor.engine.errors import ConfigError

# --- transformers' configuration defaults (configuration_qwen2_5_omni.py) ----------------------

Q25_AUDIO = {
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


def sub_config(raw: dict, key: str, what: str) -> dict:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"config.json field '{key}' of {what} must be an object", field=key)
    return value


def positive_ints(c: Config, name: str) -> list[int]:
    values = c.int_list(name)
    for v in values:
        if v <= 0:
            raise ConfigError(f"config.json field '{name}' must list positive integers", field=name)
    return values


def snake_params(channels: int) -> int:
    """SnakeBeta: an alpha and a beta per channel."""
    return 2 * channels


def conv_params(i: int, o: int, k: int, bias: bool = True) -> int:
    return i * o * k + (o if bias else 0)


# --- Qwen2.5-Omni ------------------------------------------------------------------------------


def q25_audio_params(raw: dict) -> tuple[int, int]:
    """(parameters, output tokens per 30 s) of Qwen2_5OmniAudioEncoder: Qwen2-Audio's Whisper
    encoder (two Conv1d, blocks whose k_proj has no bias, ln_post) whose sinusoidal positions
    are a buffer here, not a parameter, then audio_bos_eos_token (2 x output_dim) and proj
    (d_model -> output_dim, with bias) in place of Qwen2-Audio's projector."""
    merged = {**Q25_AUDIO, **raw}
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
    channels = positive_ints(c, "enc_channels")
    kernels = positive_ints(c, "enc_kernel_sizes")
    dilations = positive_ints(c, "enc_dilations")
    if not (len(channels) == len(kernels) == len(dilations)) or len(channels) < 2:
        raise ConfigError(
            "config.json fields 'enc_channels', 'enc_kernel_sizes' and 'enc_dilations' of the "
            "token2wav DiT must list the same number (at least 2) of layers",
            field="enc_channels",
        )
    scale = c.int("enc_res2net_scale")
    se = c.int("enc_se_channels")
    params = conv_params(c.int("mel_dim"), channels[0], kernels[0])
    for i in range(1, len(channels) - 1):
        inp, out = channels[i - 1], channels[i]
        part = out // scale
        params += (
            conv_params(inp, out, 1)
            + (scale - 1) * conv_params(part, part, kernels[i])
            + conv_params(out, out, 1)
            + conv_params(out, se, 1)
            + conv_params(se, out, 1)
        )
    last = channels[-1]
    attention = c.int("enc_attention_channels")
    params += conv_params(last, last, kernels[-1])  # multi-layer feature aggregation
    params += conv_params(3 * last, attention, 1) + conv_params(attention, last, 1)  # pooling
    return params + conv_params(2 * last, c.int("enc_dim"), 1)


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
        conv_params(d, 6 * d, 1)
        + 3 * conv_params(d, inner, 1)
        + conv_params(inner, d, 1)
        + conv_params(d, ff, 1)
        + conv_params(ff, d, 1)
    )
    time = conv_params(256, d, 1) + conv_params(d, d, 1)
    codec = (c.int("num_embeds") + 1) * emb
    inputs = conv_params(mel + c.int("enc_dim") + c.int("enc_emb_dim") + emb, d, 1) + _ecapa_params(
        c
    )
    final = conv_params(d, 2 * d, 1) + conv_params(d, mel, 1)
    return time + codec + inputs + c.int("num_hidden_layers") * block + final


def q25_bigvgan_params(raw: dict) -> int:
    """Qwen2_5OmniToken2WavBigVGANModel: conv_pre (mel -> C, kernel 7), per upsampling step a
    ConvTranspose1d halving the channels and one AMP block per resblock kernel (six Conv1d with
    biases and six SnakeBeta activations), a final SnakeBeta and conv_post (no bias)."""
    c = Config({**_Q25_BIGVGAN, **raw})
    first = c.int("upsample_initial_channel")
    rates = positive_ints(c, "upsample_rates")
    kernels = positive_ints(c, "upsample_kernel_sizes")
    res_kernels = positive_ints(c, "resblock_kernel_sizes")
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
    params = conv_params(c.int("mel_dim"), first, 7)
    for i, kernel in enumerate(kernels):
        inp, out = first // 2**i, first // 2 ** (i + 1)
        params += conv_params(inp, out, kernel)
        params += sum(6 * conv_params(out, out, k) + 6 * snake_params(out) for k in res_kernels)
    last = first // 2 ** len(kernels)
    return params + snake_params(last) + conv_params(last, 1, 7, bias=False)


def _q25_thinker(t: dict) -> tuple[b.Blueprint, list[str], int]:
    """The thinker's Blueprint (its language model's blocks; vision tower and audio encoder in
    `outside`), its notes and its parameter count."""
    text = {**_Q25_TEXT, **sub_config(t, "text_config", "the thinker")}
    # Qwen2_5OmniThinkerForConditionalGeneration ties lm_head to the embedding by the thinker
    # config's tie_word_embeddings (default false), not text_config's.
    tied = Config(t).bool("tie_word_embeddings", default=False)
    tc = Config({**text, "tie_word_embeddings": tied})
    bp = decoder_blueprint(tc, "qwen2", DECODERS["qwen2"])
    vision, vision_out, side = q25_vision_params(sub_config(t, "vision_config", "the thinker"))
    audio_raw = sub_config(t, "audio_config", "the thinker")
    audio, tokens = q25_audio_params(audio_raw)
    audio_out = Config({**Q25_AUDIO, **audio_raw}).int("output_dim")
    check_widths(bp.d, vision_out, audio_out)
    towers = vision + audio
    bp = replace(bp, outside=bp.outside + towers, input_towers=bp.input_towers + towers)
    notes = [
        f"Includes the vision tower ({vision:,} parameters; an image adds about "
        f"(height / {side}) x (width / {side}) tokens) and the audio encoder ({audio:,}; 30 s "
        f"of audio adds {tokens:,} tokens), which the sequence length should include.",
    ]
    return bp, notes, b.assemble(tc, bp).params_total


def check_widths(text: int, vision: int, audio: int) -> None:
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
    thinker = sub_config(c.raw, "thinker_config", "Qwen2.5-Omni") if full else c.raw
    bp, notes, thinker_params = _q25_thinker(thinker)
    speech = 0
    if full and c.bool("enable_audio_output", default=True):
        talker = q25_talker_params(sub_config(c.raw, "talker_config", "Qwen2.5-Omni"))
        token2wav = sub_config(c.raw, "token2wav_config", "Qwen2.5-Omni")
        dit = q25_dit_params(sub_config(token2wav, "dit_config", "token2wav"))
        bigvgan = q25_bigvgan_params(sub_config(token2wav, "bigvgan_config", "token2wav"))
        speech = talker + dit + bigvgan
        notes += [
            speech_note(
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
    return with_speech(bp, family, notes, speech)


def speech_note(what: str, thinker: int, thinker_class: str) -> str:
    return (
        f"Includes the speech half, {what}: loaded with the full class, they hold memory, "
        "but run only when the model speaks, so they are not in the compute per token. A full "
        "fine-tune is estimated as training them too; fine-tuning the thinker alone (the "
        f"common case) trains {thinker:,} parameters: enter the thinker's config as "
        f"{thinker_class}, or set enable_audio_output false, to estimate that."
    )


def with_speech(bp: b.Blueprint, family: str, notes: list[str], speech: int) -> b.Blueprint:
    return replace(
        bp,
        family=family,
        outside=bp.outside + speech,
        idle=bp.idle + speech,  # the talker and vocoder do not run for the thinker's tokens
        notes=[*bp.notes, *notes],
    )
