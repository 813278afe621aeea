"""Sliding-window and chunked attention layers read at most their window: the attention FLOPs
of a long-context job on Gemma 3, gpt-oss or Llama 4 are those of the few full layers plus a
window's worth for the others (engine 1.13; before, every layer was charged the whole
sequence, which put Gemma 3 27B fine-tuning at 32,768 tokens 40 % over)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.engine.compute import training_flops_per_token
from advisor.engine.models import EstimateRequest
from advisor.engine.workload import build_workload, resolve_shape
from advisor.model_configs import find_bundled


def _job(repo: str, seq_len: int, task: str = "full_finetune"):
    request = EstimateRequest(
        model_id=repo, config=find_bundled(repo).config, task=task, seq_len=seq_len
    )
    shape = resolve_shape(request)
    return shape, build_workload(request, shape)


def _attention_flops(shape, wl) -> float:
    return training_flops_per_token(shape, wl) - training_flops_per_token(
        shape, replace(wl, seq_len=0)
    )


def test_gemma3_sliding_layers_read_a_window_not_the_sequence():
    """Gemma 3 27B: 52 of 62 layers attend within 1,024 tokens. At 32,768 tokens each reads
    2w - w^2/s = 2,016 tokens in the full layers' count (a causal window of w averages
    w - w^2/2s, a full causal layer s/2)."""
    shape, wl = _job("google/gemma-3-27b-it", 32768)
    assert (shape.sliding_window, shape.sliding_layers) == (1024, 52)

    attended = 10 * 32768 + 52 * (2 * 1024 - 1024 * 1024 / 32768)

    assert _attention_flops(shape, wl) == pytest.approx(12 * shape.attn_dim * attended)
    full = replace(shape, sliding_window=None, sliding_layers=0)
    assert _attention_flops(full, wl) > 4.6 * _attention_flops(shape, wl)
    # The whole step: charging every layer the sequence had put it 40 % over.
    assert training_flops_per_token(full, wl) > 1.4 * training_flops_per_token(shape, wl)


def test_within_the_window_every_layer_reads_the_whole_sequence():
    shape, wl = _job("google/gemma-3-27b-it", 1024)

    assert _attention_flops(shape, wl) == pytest.approx(12 * shape.attn_dim * 62 * 1024)


def test_llama4_chunked_layers_read_within_their_chunk():
    """Llama 4 Scout: 36 of 48 layers attend within 8,192-token chunks, half a chunk on
    average: a chunk's length in the full layers' count."""
    shape, wl = _job("meta-llama/Llama-4-Scout-17B-16E-Instruct", 65536, task="lora")
    assert (shape.sliding_window, shape.sliding_layers, shape.sliding_chunked) == (
        8192,
        36,
        True,
    )

    attended = 12 * 65536 + 36 * 8192

    assert _attention_flops(shape, wl) == pytest.approx(12 * shape.attn_dim * attended)


def test_gpt_oss_banded_layers_read_128_tokens():
    shape, wl = _job("openai/gpt-oss-20b", 16384, task="lora")
    assert (shape.sliding_window, shape.sliding_layers) == (128, 12)

    attended = 12 * 16384 + 12 * (256 - 128 * 128 / 16384)

    assert _attention_flops(shape, wl) == pytest.approx(12 * shape.attn_dim * attended)
