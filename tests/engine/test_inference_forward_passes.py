"""What a forward pass holds and costs.

Inference on an encoder-only model (BERT, DistilBERT, RoBERTa, ViT) is one forward pass per
sequence: embedding or classifying a corpus. It was estimated as text generation (256 tokens
decoded one by one per sequence), so embedding 100M tokens with DistilBERT read 52 GPU hours
where the forward passes take well under one. A server that chunks prefill (vLLM V1) holds
one chunk's activations, not a whole long prompt's. In training, where the HF Trainer's fp32
logits are a large share of a step's need, the recommendation names the fused loss that avoids
them."""

from __future__ import annotations

import pytest

from advisor.engine import RequestError, estimate
from advisor.engine.models import EstimateRequest
from tests.engine.inputs import config, default_catalog


def names(result) -> list[str]:
    return [a.name for a in result.assumptions]


@pytest.mark.parametrize(
    "model", ["distilbert__distilbert-base-uncased", "google-bert__bert-base-uncased"]
)
def test_embedding_a_corpus_with_an_encoder_is_forward_passes_not_generation(model):
    result = estimate(
        EstimateRequest(config=config(model), task="inference", seq_len=128, tokens=10**8),
        default_catalog(),
    )
    rec = result.recommendation
    # 781,250 sequences of 128 tokens, one at a time: each forward pass waits for the host's
    # kernel launches (0.81 ms per layer in eager PyTorch), 6 or 12 layers. Nothing decodes.
    assert 0.2 < rec.gpu_hours < 2.5
    assert rec.memory.kv_cache == 0
    assert "Generation" not in names(result)
    assert "Decoding speed" not in names(result)
    forward = next(a for a in result.assumptions if a.name == "Forward pass")
    assert forward.value.startswith("one forward pass per sequence of 128 tokens")


def test_a_larger_batch_makes_encoder_inference_compute_bound_and_faster():
    def hours(batch):
        request = EstimateRequest(
            config=config("google-bert__bert-base-uncased"),
            task="inference",
            seq_len=512,
            tokens=10**9,
            batch_size=batch,
            accelerator="a100-80-sxm4",
        )
        return estimate(request, default_catalog()).recommendation.gpu_hours

    # Batch 1: 5.4 ms of host time per 512-token pass; batch 64: the matmuls set the time.
    assert hours(64) < hours(1) / 3


def test_generated_tokens_for_an_encoder_are_refused_naming_the_field():
    request = EstimateRequest(
        config=config("google-bert__bert-base-uncased"), task="inference", new_tokens=100
    )
    with pytest.raises(RequestError) as raised:
        estimate(request, default_catalog())
    field, message = raised.value.errors[0]
    assert field == "new_tokens"
    assert "encoder-only model (bert)" in message
    assert "generates no tokens" in message


def test_a_decoder_still_generates_its_default_256_tokens():
    result = estimate(
        EstimateRequest(
            config=config("openai-community__gpt2"), task="inference", seq_len=128, tokens=10**6
        ),
        default_catalog(),
    )
    generation = next(a for a in result.assumptions if a.name == "Generation")
    assert generation.value.startswith("prompt 128 + 256 generated tokens per request (default)")
    assert result.recommendation.memory.kv_cache > 0


def test_vllm_prefills_a_long_prompt_in_chunks_while_generate_holds_it_whole():
    """Llama 3 8B, one 131,072-token prompt: vLLM V1 puts at most 16,384 tokens through a
    forward pass (chunked prefill), so its prefill working set is an eighth of the whole
    prompt's, which Transformers generate() holds at once."""

    def activations(framework):
        request = EstimateRequest(
            config=config("meta-llama__Meta-Llama-3-8B"),
            task="inference",
            seq_len=131_072,
            tokens=10**7,
            framework=framework,
            accelerator="h100-80-sxm5",
            num_gpus=1,  # one GPU's share for both: vLLM would take more where they pay
        )
        result = estimate(request, default_catalog())
        return result.recommendation.memory.activations, [a.name for a in result.assumptions]

    chunked, vllm_names = activations("vllm")
    whole, transformers_names = activations("transformers")
    assert chunked == pytest.approx(whole * 16_384 / 131_072)
    assert "Prefill chunks" in vllm_names
    assert "Prefill chunks" not in transformers_names


def test_long_context_lora_with_the_trainer_is_told_its_logits_and_the_fused_loss():
    """Llama 3.1 8B LoRA at 32,768 tokens under the HF Trainer: the fp32 logits (128,256
    entries per token, 12 bytes each) are over half the need. The recommendation says so and
    names the fused loss that avoids them, without assuming it, in the library's own terms;
    torchtune's and TRL's chunked losses get no such note."""

    def lora(framework=None):
        request = EstimateRequest(
            config=config("meta-llama__Meta-Llama-3-8B"),
            task="lora",
            seq_len=32_768,
            tokens=10**8,
            framework=framework,
        )
        return estimate(request, default_catalog()).recommendation

    trainer = lora()
    hint = [r for r in trainer.reasons if "Liger" in r]
    assert trainer.memory.logits > 0.25 * trainer.memory_per_gpu_bytes
    assert hint == [
        f"The loss's fp32 logits take {trainer.memory.logits / 1e9:.1f} of the "
        f"{trainer.memory_per_gpu_bytes / 1e9:.1f} GB per GPU. Liger Kernel's fused linear "
        "cross-entropy (use_liger_kernel=True in TrainingArguments; Triton "
        "kernels, benchmarked by linkedin/Liger-Kernel on NVIDIA A100s) never materialises "
        "them, so a larger micro-batch or a smaller GPU may fit; not assumed here (choose the "
        "Trainer with Liger Kernel in the flowchart, or fused_loss: true in the API, to "
        "estimate it)."
    ]
    assert not any("Liger" in r for r in lora("torchtune").reasons)
    assert not any("Liger" in r for r in lora("trl").reasons)  # its loss is chunked already
    factory = [r for r in lora("llama_factory").reasons if "Liger" in r]
    assert len(factory) == 1
    assert "(enable_liger_kernel: true in the config; Triton" in factory[0]
    assert factory[0].endswith("(fused_loss: true in the API, to estimate it).")


def test_a_fused_loss_under_the_trainer_drops_the_logits_and_goes_into_the_script():
    """The same job with fused_loss: true (Liger Kernel): no fp32 logits, so it fits an 80 GB
    NVIDIA card, the assumption says why, and the sbatch script passes --use_liger_kernel to
    the Trainer."""
    request = EstimateRequest(
        config=config("meta-llama__Meta-Llama-3-8B"),
        task="lora",
        seq_len=32_768,
        tokens=10**8,
        fused_loss=True,
    )
    result = estimate(request, default_catalog())
    rec = result.recommendation
    plain = estimate(request.model_copy(update={"fused_loss": None}), default_catalog())
    assert rec.memory.logits == 0
    assert plain.recommendation.memory.logits > 40e9
    # Without the logits one A100 holds it (a 40 GB one, a sequence per micro-batch); with them
    # one GPU needs about 92 GB, more than any 80 GB card holds.
    assert min(o.memory_per_gpu_bytes for o in plain.options if o.strategy == "single") > 86e9
    assert rec.accelerator.startswith("a100")
    assert rec.num_gpus == 1
    assert rec.memory_per_gpu_bytes < 40e9
    assert not any("Liger" in r for r in rec.reasons)
    logits = next(a for a in result.assumptions if a.name == "Logits and loss buffers")
    assert logits.value.startswith("0 bytes per token x vocabulary entry: a fused linear")
    on_stanage = request.model_copy(update={"system": "stanage"})
    script = estimate(on_stanage, default_catalog()).slurm_script
    assert "--use_liger_kernel" in script
    unfused = on_stanage.model_copy(update={"seq_len": 2048, "fused_loss": None})
    assert "--use_liger_kernel" not in estimate(unfused, default_catalog()).slurm_script


def test_a_fused_loss_is_the_default_of_unsloth_and_torchtune_says_no_fused_loss():
    def logits(**fields):
        request = EstimateRequest(
            config=config("meta-llama__Meta-Llama-3-8B"), task="lora", tokens=10**7, **fields
        )
        return estimate(request, default_catalog()).recommendation.memory.logits

    assert logits(framework="unsloth") == 0
    assert logits(framework="torchtune") > 0
    assert logits(framework="torchtune", fused_loss=True) == 0
    # Told the loss is not fused, Unsloth is estimated with the full fp32 logits.
    assert logits(framework="unsloth", fused_loss=False) > logits(framework="torchtune")


def test_bitsandbytes_int8_generation_is_never_credited_with_speed_over_16_bit():
    """LLM.int8() halves the weights' memory, but its matmul (activation quantisation, outlier
    decomposition) generates slower than bf16 in every published report; reading half the
    bytes made the engine call it 21 % faster."""

    def run(precision):
        request = EstimateRequest(
            config=config("meta-llama__Llama-2-13b-hf"),
            task="inference",
            precision=precision,
            tokens=10**6,
            accelerator="a100-80-sxm4",
        )
        return estimate(request, default_catalog())

    bf16, int8 = run("bf16"), run("int8")
    assert int8.recommendation.memory.weights < 0.6 * bf16.recommendation.memory.weights
    assert int8.recommendation.gpu_hours >= bf16.recommendation.gpu_hours
    speed = next(a for a in int8.assumptions if a.name == "8-bit weights and speed")
    assert "lower bound" in speed.value
    assert not any(a.name == "8-bit weights and speed" for a in bf16.assumptions)


def test_bitsandbytes_4_bit_generation_is_fast_alone_and_slow_in_batches():
    """One sequence at a time takes bitsandbytes' fused 4-bit kernel and reads a quarter of
    the 16-bit bytes, but eager generate() at batch 1 waits on the host's kernel launches
    either way; a batch dequantises every layer to 16-bit per step, reading more than 16-bit
    weights would. GPTQ's kernels read the packed weights either way."""

    def hours(precision, batch, quantization=None):
        request = EstimateRequest(
            config=config("meta-llama__Llama-2-13b-hf"),
            task="inference",
            precision=precision,
            batch_size=batch,
            quantization=quantization,
            tokens=10**7,
            accelerator="a100-80-sxm4",
        )
        result = estimate(request, default_catalog())
        named = any(a.name == "4-bit weights and speed" for a in result.assumptions)
        return result.recommendation.gpu_hours, named

    assert hours("int4", 1)[0] <= 1.01 * hours("bf16", 1)[0]
    assert hours("int4", 1)[1] is False
    assert hours("int4", 8)[0] > hours("bf16", 8)[0]
    assert hours("int4", 8)[1] is True
    assert hours("int4", 8, "gptq")[0] < hours("bf16", 8)[0]


def test_when_nothing_fits_a_long_context_the_warning_names_the_fused_loss():
    """LoRA on Llama 3.1 8B at 131,072 tokens under the Trainer: its fp32 logits alone are
    131,072 x 128,256 x 12 bytes = 202 GB for one sequence, more than any GPU holds, so
    nothing fits; the warning says so and names the switch, with which one GPU does."""
    common = {
        "config": config("meta-llama__Meta-Llama-3-8B"),
        "task": "lora",
        "seq_len": 131_072,
        "tokens": 10**8,
    }
    plain = estimate(EstimateRequest(**common), default_catalog())
    assert plain.recommendation is None
    assert any(
        w.startswith("The loss's fp32 logits alone take 202 GB for a micro-batch of 1 sequence")
        and "fused_loss: true" in w
        for w in plain.warnings
    )
    fused = estimate(EstimateRequest(fused_loss=True, **common), default_catalog())
    assert fused.recommendation is not None
    assert fused.recommendation.num_gpus == 1
