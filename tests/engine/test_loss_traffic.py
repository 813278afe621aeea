"""An unfused loss moves the logits through memory several times a step (engine 1.43.0): the
fp32 cast, log-softmax and their backward cost 44 bytes per token and vocabulary entry, where
the calibration runs' fused loss moved 6. It shows in small models with large vocabularies
and hardly in 7B ones; a fused loss or torch.compile takes most of it away."""

from __future__ import annotations

import pytest

from tests.engine.inputs import config, on_one_a100_80gb

GPT2 = config("openai-community__gpt2")
LLAMA2_7B = config("meta-llama__Llama-2-7b-hf")
BERT = config("google-bert__bert-base-uncased")


def hours(cfg, **fields) -> float:
    fields = {"task": "pretrain", "seq_len": 1024, "batch_size": 64, "tokens": 10**9, **fields}
    return on_one_a100_80gb(config=cfg, **fields)[1].gpu_hours


def test_gpt2_small_pays_for_its_unfused_loss_and_a_7b_model_hardly_does():
    # GPT-2 124M: 50,257 entries x 38 bytes beyond a fused loss, over 12 layers of width 768.
    assert hours(GPT2) / hours(GPT2, fused_loss=True) == pytest.approx(1.22, abs=0.05)
    # Llama-2-7B: 32,000 entries over 32 layers of width 4,096.
    assert 1.0 < hours(LLAMA2_7B) / hours(LLAMA2_7B, fused_loss=True) < 1.04


def test_torch_compile_fuses_the_loss_chain_as_it_does_the_layers():
    eager = hours(GPT2) / hours(GPT2, fused_loss=True)
    compiled = hours(GPT2, torch_compile=True) / hours(GPT2, fused_loss=True, torch_compile=True)
    assert 1.0 < compiled < eager


def test_a_classification_head_moves_no_vocabulary_logits():
    fields = {"task": "full_finetune", "seq_len": 128, "batch_size": 32, "tokens": 10**8}
    sequence_classification = {**BERT, "architectures": ["BertForSequenceClassification"]}
    assert hours(sequence_classification, **fields) == hours(
        sequence_classification, fused_loss=True, **fields
    )


def test_the_result_says_what_the_loss_moves_and_how_to_fuse_it():
    result, _ = on_one_a100_80gb(
        config=GPT2, task="pretrain", seq_len=1024, batch_size=64, tokens=10**9
    )
    said = next(a for a in result.assumptions if a.name.startswith("Memory traffic of an unfused"))
    assert said.value.startswith(
        "44 bytes per token x vocabulary entry: 2.2 MB per token over 50,257 entries"
    )
    assert "use_liger_kernel=True" in said.value
    fused, _ = on_one_a100_80gb(
        config=GPT2, task="pretrain", seq_len=1024, batch_size=64, tokens=10**9, fused_loss=True
    )
    assert not any(a.name.startswith("Memory traffic of an unfused") for a in fused.assumptions)


def hint(result) -> list[str]:
    return [w for w in result.warnings if w.startswith("Moving the logits through the loss")]


def test_a_fused_loss_is_suggested_where_the_logits_take_a_tenth_of_the_step():
    fields = {"task": "pretrain", "seq_len": 1024, "batch_size": 64, "tokens": 10**9}
    (said,) = hint(on_one_a100_80gb(config=GPT2, **fields)[0])
    assert said.startswith(
        "Moving the logits through the loss takes about 19% of each step's time on an NVIDIA "
        "A100 80GB SXM4 (44 bytes per token for each of the 50,257 vocabulary entries"
    )
    assert "use_liger_kernel=True in TrainingArguments" in said
    assert not hint(on_one_a100_80gb(config=GPT2, fused_loss=True, **fields)[0])
    assert not hint(on_one_a100_80gb(config=LLAMA2_7B, **fields)[0])


def test_a_run_that_says_its_loss_was_unfused_is_not_charged_it_twice():
    """A measured run moves its job to the same model at its own MFU only when the benchmark
    says what its loss moved: read as fused, the unfused job would pay the logits on top."""
    from advisor.engine import estimate
    from advisor.engine.models import BenchmarkSpec, EstimateRequest
    from tests.engine.inputs import default_catalog

    def utilisation(**loss) -> float:
        run = BenchmarkSpec(
            accelerator="a100-80-sxm4",
            model="GPT-2 124M, our Trainer run",
            params=124_439_808,
            hidden_size=768,
            num_layers=12,
            task="pretrain",
            precision="bf16",
            num_gpus=1,
            seq_len=1024,
            batch_size=64,
            mfu=0.30,
            source="institute run",
            **loss,
        )
        catalog = default_catalog().model_copy(update={"benchmarks": [run]})
        request = EstimateRequest(
            config=GPT2,
            task="pretrain",
            seq_len=1024,
            batch_size=64,
            tokens=10**9,
            accelerator="a100-80-sxm4",
            num_gpus=1,
        )
        option = next(o for o in estimate(request, catalog).options if o.strategy == "single")
        return option.utilisation

    # GPT-2's own config counts 124,439,808 parameters and its tied head's matmul: the run's
    # roofline and the job's differ by that alone.
    assert utilisation(vocab_size=50257, fused_loss=False) == pytest.approx(0.30, rel=0.03)
    assert utilisation() == pytest.approx(0.30 / 1.22, rel=0.05)
