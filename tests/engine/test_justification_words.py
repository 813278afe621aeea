"""The justification a reviewer reads never prints a zero for a tiny job (issue 16)."""

import re

import pytest

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from tests.engine.catalog_fixture import catalog

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
