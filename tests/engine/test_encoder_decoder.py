"""Encoder-decoders (T5, BART, Whisper): the encoder reads the input, the decoder writes the
target or the generated tokens, each stack at its own length."""

from dataclasses import replace

import pytest

from advisor.engine import estimate
from advisor.engine.activations import training_activations_per_layer
from advisor.engine.compute import inference_gpu_hours
from advisor.engine.models import EstimateRequest
from advisor.engine.request_checks import RequestError
from advisor.engine.workload import build_workload, resolve_shape
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog

FLAN_T5_XL = find_bundled("google/flan-t5-xl").config
WHISPER_SMALL = find_bundled("openai/whisper-small").config


def estimate_for(config, **fields):
    fields.setdefault("tokens", 10**7)
    return estimate(EstimateRequest(config=config, **fields), default_catalog())


def lengths(result) -> str:
    return next(a.value for a in result.assumptions if a.name == "Encoder and decoder lengths")


def test_a_short_target_costs_less_memory_and_time_than_one_as_long_as_the_input():
    """A LoRA of Flan-T5 XL reading 512-token documents and writing 64-token summaries: its
    decoder (half the model's layers, with cross-attention) works on 64 tokens, not 512."""
    fields = {"task": "lora", "seq_len": 512, "micro_batch": 8, "accelerator": "a100-80-sxm4"}
    as_long = estimate_for(FLAN_T5_XL, **fields)
    summary = estimate_for(FLAN_T5_XL, new_tokens=64, **fields)

    assert summary.memory.activations < 0.65 * as_long.memory.activations
    assert summary.memory.logits == as_long.memory.logits / 8  # scored target tokens
    assert summary.recommendation.gpu_hours < 0.8 * as_long.recommendation.gpu_hours
    assert "the decoder writes a target of 64 tokens (new_tokens)" in lengths(summary)
    assert "give its length as new_tokens" in lengths(as_long)


def test_whisper_always_encodes_thirty_seconds_of_audio_whatever_the_transcript():
    """Whisper pads every clip to 30 s: 1,500 encoder positions. A short transcript shrinks
    only the decoder's share; the encoder's activations stay."""
    fields = {"task": "full_finetune", "micro_batch": 8, "accelerator": "a100-80-sxm4"}
    long_text = estimate_for(WHISPER_SMALL, **fields)
    short_text = estimate_for(WHISPER_SMALL, new_tokens=32, **fields)

    assert "the encoder reads 1,500 tokens per sequence (always" in lengths(short_text)
    # whisper-small's encoder alone (12 layers of 768 at 1,500 positions, batch 8) keeps
    # several GB; sizing it at the decoder's 448 tokens kept under 2.6 GB for the whole model.
    assert short_text.memory.activations > 3e9
    assert long_text.memory.activations > short_text.memory.activations


def test_cross_attention_is_counted_in_a_decoder_layer():
    """With the target as long as the input, a T5 decoder layer keeps its self-attention,
    MLP and cross-attention tensors: more than an encoder layer, so the whole model keeps
    more than twice what its encoder stack does."""
    request = EstimateRequest(config=FLAN_T5_XL, task="full_finetune", seq_len=256, micro_batch=4)
    shape = resolve_shape(request)
    wl = build_workload(request, shape)
    encoder_layer = training_activations_per_layer(shape, wl, seq=256)
    decoder_layer = training_activations_per_layer(shape, wl, seq=256, cross=256)
    assert decoder_layer > 1.3 * encoder_layer


def test_generating_reads_the_decoder_weights_only():
    """Each generated token reads the decoder's weights; the encoder ran once over the
    prompt. Flan-T5 XL writing 256 tokens for 64-token prompts, one at a time with CUDA
    graphs (no host time per layer), is mostly bound by those reads: the decoder side holds
    59 % of the weights; the step's fixed costs (vLLM's scheduler and kernel latencies, about
    a fifth of the step here) do not shrink with them."""
    request = EstimateRequest(
        config=FLAN_T5_XL, task="inference", seq_len=64, new_tokens=256, batch_size=1
    )
    shape = resolve_shape(request)
    wl = replace(build_workload(request, shape), decode_framework="vllm")
    catalog = default_catalog()
    acc = next(a for a in catalog.accelerators if a.name == "a100-80-sxm4")
    args = (10**6, 312.0, 0.5, 1, 1.0)
    decoder_only = inference_gpu_hours(shape, wl, acc, *args)
    whole_model = inference_gpu_hours(replace(shape, params_encoder=0), wl, acc, *args)
    assert 0.6 * whole_model < decoder_only < 0.8 * whole_model


def test_a_target_length_for_a_decoder_only_model_is_refused_by_name_not_silently_used():
    llama = find_bundled("meta-llama/Llama-3.2-1B").config
    with_target = estimate_for(llama, task="lora", seq_len=1024, new_tokens=256)
    without = estimate_for(llama, task="lora", seq_len=1024)

    assert any(
        w.startswith("new_tokens is ignored for training this model") for w in with_target.warnings
    )
    assert with_target.memory == without.memory


def test_t5_beyond_its_trained_length_is_a_quality_question_not_an_impossible_job():
    result = estimate_for(FLAN_T5_XL, task="lora", seq_len=1024, new_tokens=128)
    assert any("relative positions take longer inputs" in w for w in result.warnings)
    assert not any("position scaling" in w for w in result.warnings)


def test_a_transcription_job_counts_the_transcript_tokens_one_clip_per_request():
    """Whisper reads audio: a job of 256,000 transcript tokens at 256 per clip is 1,000
    clips, whatever the text prompt's length; counting a 448-token prompt into each request
    sized it as 364 clips."""
    fields = {"task": "inference", "tokens": 256_000, "new_tokens": 256, "batch_size": 1}
    short_prompt = estimate_for(WHISPER_SMALL, seq_len=4, **fields)
    long_prompt = estimate_for(WHISPER_SMALL, seq_len=448, **fields)
    half_the_clips = estimate_for(WHISPER_SMALL, seq_len=4, **{**fields, "tokens": 128_000})

    hours = short_prompt.recommendation.gpu_hours
    assert hours == long_prompt.recommendation.gpu_hours
    assert half_the_clips.recommendation.gpu_hours < 0.55 * hours
    assert "one clip per request" in lengths(short_prompt)
    generation = next(a.value for a in short_prompt.assumptions if a.name == "Generation")
    assert generation.startswith("one clip (1,500 encoder positions) + 256 generated tokens")
    no_length = estimate_for(WHISPER_SMALL, task="inference", new_tokens=256)
    assert not any(a.name.startswith("Sequence length") for a in no_length.assumptions)


def test_recomputing_an_encoder_decoder_repeats_both_stacks_forward_passes():
    """Checkpointing runs the forward pass again: a third more compute for Whisper as for any
    model, the encoder's 1,500 positions included (it used to add only a recomputation per
    transcript token of the model's parameters: +3 %)."""
    fields = {
        "task": "full_finetune",
        "micro_batch": 8,
        "accelerator": "a100-80-sxm4",
        "new_tokens": 64,
        "num_gpus": 1,
    }
    kept = estimate_for(WHISPER_SMALL, gradient_checkpointing=False, **fields)
    recomputed = estimate_for(WHISPER_SMALL, gradient_checkpointing=True, **fields)
    ratio = recomputed.recommendation.gpu_hours / kept.recommendation.gpu_hours
    assert 1.25 < ratio < 1.45


def test_a_transcription_that_writes_nothing_is_refused_by_name():
    with pytest.raises(RequestError) as refused:
        estimate_for(WHISPER_SMALL, task="inference", new_tokens=0)
    assert refused.value.errors[0][0] == "new_tokens"
    assert "Whisper reads audio and writes text" in refused.value.errors[0][1]
