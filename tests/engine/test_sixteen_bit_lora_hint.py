"""QLoRA is for a small GPU. Where the recommended GPU holds LoRA on the 16-bit model too, in
clearly fewer GPU hours (no dequantisation of the 4-bit base in every pass), the result says so
and leaves the choice to the researcher: NF4 QLoRA matches 16-bit LoRA's quality (Dettmers et
al. 2023, arXiv:2305.14314)."""

from __future__ import annotations

from functools import cache

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from bench.engine_rankings import catalog_from_file
from tests.engine.inputs import config

LLAMA3_8B = config("meta-llama__Meta-Llama-3-8B")


@cache
def _qlora(accelerator: str | None = None):
    request = EstimateRequest(
        config=LLAMA3_8B, task="qlora", tokens=50_000_000, accelerator=accelerator
    )
    return estimate(request, catalog_from_file())


def _hint(result) -> list[str]:
    return [w for w in result.warnings if w.startswith("LoRA on the 16-bit model")]


def test_qlora_on_an_80gb_card_is_told_that_16_bit_lora_fits_there_and_costs_less():
    result = _qlora("a100-80-sxm4")
    rec = result.recommendation
    (hint,) = _hint(result)
    lora = estimate(
        EstimateRequest(
            config=LLAMA3_8B,
            task="lora",
            tokens=50_000_000,
            system=rec.system,
            accelerator=rec.accelerator,
        ),
        catalog_from_file(),
    ).recommendation
    assert lora.num_gpus <= rec.num_gpus
    assert lora.gpu_hours < 0.9 * rec.gpu_hours
    assert f"on {lora.num_gpus} GPU of the same kind too" in hint
    assert "arXiv:2305.14314" in hint


def test_qlora_where_16_bit_weights_could_not_fit_gets_no_such_hint():
    """A 16 GB T4: the 16 GB of 16-bit weights alone fill it."""
    assert not _hint(_qlora("t4-16"))
