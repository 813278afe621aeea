"""What a decoding step reads, as opposed to what the model holds: the KV cache, and the weights.

DeepSeek-V3.2's sparse attention reads only the 2,048 keys its indexer picks (the indexer
itself scores every cached key at its own narrow width), so at long context a step reads a
fraction of the cache it keeps; Gemma 4's KV-shared layers keep no cache but read the one they
share, so a step reads more than the cache holds. A vision-language model's step runs its
language model alone. Decode time follows what is read."""

from __future__ import annotations

from advisor.engine.architecture import architecture_from_config
from advisor.engine.inference_reads import decode_weight_bytes
from advisor.engine.memory_terms import kv_cache_bytes, kv_read_bytes
from advisor.engine.models import EstimateRequest
from advisor.engine.shape import shape_from_architecture
from advisor.engine.workload import build_workload
from advisor.model_configs import find_bundled


def _read_and_held(repo: str, seq_len: int) -> tuple[float, float]:
    config = find_bundled(repo).config
    shape = shape_from_architecture(architecture_from_config(config))
    request = EstimateRequest(
        config=config, task="inference", seq_len=seq_len, new_tokens=256, batch_size=1
    )
    wl = build_workload(request, shape)
    return kv_read_bytes(shape, wl), kv_cache_bytes(shape, wl)


def test_deepseek_v32_reads_its_top_k_not_its_whole_cache_at_long_context():
    read, held = _read_and_held("deepseek-ai/DeepSeek-V3.2-Exp", 131_072)
    # 61 layers: 704 cached values a token; a step reads 704 x 2,048 plus the indexer's keys
    # (counted as keys and values, 256 a token) over the whole context: about a third.
    assert 0.3 * held < read < 0.45 * held


def test_deepseek_v32_reads_everything_below_its_top_k():
    read, held = _read_and_held("deepseek-ai/DeepSeek-V3.2-Exp", 1024)
    assert read > held  # all 1,280 tokens, and the indexer's keys once more


def test_gemma4_kv_shared_layers_read_the_cache_they_share():
    read, held = _read_and_held("google/gemma-4-E2B-it", 8192)
    assert read > 1.3 * held


def _decode_weights(repo: str) -> tuple[float, int]:
    config = find_bundled(repo).config
    shape = shape_from_architecture(architecture_from_config(config))
    request = EstimateRequest(
        config=config, task="inference", seq_len=512, new_tokens=256, batch_size=1
    )
    return decode_weight_bytes(shape, build_workload(request, shape)), shape.params_total


def test_a_vision_language_model_decodes_with_its_language_model_alone():
    """Qwen2.5-VL-7B is Qwen2.5-7B's language model (hidden 3,584, 28 layers, vocabulary
    152,064) with a 0.67B-parameter vision tower and merger, which encode each image once in
    the prefill: a decoding step reads the same weights as the text model's."""
    vlm, vlm_params = _decode_weights("Qwen/Qwen2.5-VL-7B-Instruct")
    text, text_params = _decode_weights("Qwen/Qwen2.5-7B-Instruct")
    assert vlm_params - text_params > 0.6e9
    assert abs(vlm - text) < 0.005 * text
