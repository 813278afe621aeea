"""The justification a reviewer reads never prints a zero for a tiny job (issue 16)."""

import re

import pytest

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from tests.engine.catalog_fixture import catalog
from tests.engine.inputs import config, default_catalog

ZERO = re.compile(r"(?<![\d.,])0(\.0+)?( ?B-parameter| GB| GPU hours?| hours)")


@pytest.mark.parametrize(
    "fields",
    [
        {"task": "inference", "tokens": 1000, "params": 110_000_000},
        {"task": "full_finetune", "tokens": 1000, "params": 4_000_000},
    ],
)
def test_a_tiny_job_says_less_than_rather_than_zero(fields):
    text = estimate(EstimateRequest(**fields), catalog()).justification
    assert ZERO.search(text) is None, text
    assert "less than 0.1 GPU hours, plus less than 0.1 GPU hours of contingency" in text
    assert "1 GPU hour in total, less than 0.1 hours of wall time" in text
    assert "a model of the size given (" in text


def test_the_recommended_options_hours_reason_reads_as_english_for_a_tiny_job():
    result = estimate(EstimateRequest(task="inference", tokens=1000, params=110_000_000), catalog())
    reason = next(r for r in result.recommendation.reasons if "of wall time" in r)
    assert "about less than" not in reason
    assert reason.endswith("less than 0.1 hours of wall time.")


@pytest.mark.parametrize(
    ("n_bytes", "text"),
    [
        (0, "0.0 GB"),
        (0.04e9, "under 0.1 GB"),
        (0.05e9, "0.1 GB"),
        (40e9, "40.0 GB"),
        (1_128e9, "1,128.0 GB"),
    ],
)
def test_one_byte_formatter_for_the_justification_and_hosting(n_bytes, text):
    """The justification and the hosting reasons say memory the same way (words.gigabytes)."""
    from advisor.engine.words import gigabytes

    assert gigabytes(n_bytes) == text


def test_a_vllm_batch_job_says_what_vllm_reserves_beside_what_it_needs():
    """Staff compare the memory with nvidia-smi: vLLM shows its whole reservation (90 % of
    each GPU), not the model and one sequence the estimate lists."""
    request = EstimateRequest(
        config=config("meta-llama__Llama-2-70b-hf"), task="inference", tokens=10**8,
        new_tokens=256, framework="vllm", system="stanage", accelerator="a100-80-sxm4",
    )  # fmt: skip
    said = estimate(request, default_catalog()).justification
    assert "vLLM reserves 90% of each GPU when it starts (77.3 GB" in said
    assert "the cache fills the rest" in said
    generate = estimate(
        request.model_copy(update={"framework": "transformers"}), default_catalog()
    ).justification
    assert "reserves" not in generate
