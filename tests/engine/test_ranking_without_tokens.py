"""A request without a token count has no GPU hours, but its options still cost something
per token, and that orders them: GPU hours grow in proportion to the tokens, so the option
that is cheapest for any token count is cheapest for all. Before, such a request fell through
to "the smallest GPU", and four 16 GB T4s sharing an 8B LoRA outranked one A100."""

from __future__ import annotations

import pytest

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from tests.engine.inputs import config, default_catalog

LLAMA3_8B = config("meta-llama__Meta-Llama-3-8B")


def _result(task: str, tokens: int | None):
    request = EstimateRequest(config=LLAMA3_8B, task=task, tokens=tokens)
    return estimate(request, default_catalog())


def _place(result) -> tuple:
    rec = result.recommendation
    return rec.system, rec.accelerator, rec.num_gpus


@pytest.mark.parametrize("task", ["lora", "qlora", "full_finetune", "inference"])
def test_the_recommendation_does_not_change_with_the_token_count(task):
    without, given = _result(task, None), _result(task, 10**8)
    assert without.recommendation.gpu_hours is None
    assert _place(without) == _place(given)


def test_lora_without_tokens_is_not_spread_over_small_cards():
    rec = _result("lora", None).recommendation
    assert rec.num_gpus == 1
    assert rec.accelerator != "t4-16"


def test_the_result_says_how_it_ranked_without_tokens():
    result = _result("lora", None)
    assert result.why_first.startswith("Cheapest per token processed: you gave no token count")
    assert "No token count given: GPU hours cannot be estimated, only memory." in result.warnings
