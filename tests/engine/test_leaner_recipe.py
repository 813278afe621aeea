"""The recommended recipe may fill the GPU to run fastest; the result then says what the same
job needs at micro-batch 1 with full activation checkpointing, the figure for a smaller GPU."""

from __future__ import annotations

import re

from advisor.engine import estimate
from advisor.engine.models import EstimateRequest
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog

QWEN25_7B = find_bundled("Qwen/Qwen2.5-7B").config


def lean_hints(**fields) -> tuple[list[str], object]:
    request = EstimateRequest(config=QWEN25_7B, tokens=10**8, **fields)
    result = estimate(request, default_catalog())
    hints = [w for w in result.warnings if w.startswith("The recommended recipe uses")]
    return hints, result.recommendation


def test_a_qlora_run_without_recomputation_says_what_it_needs_with_it():
    """QLoRA of a 7B model recommended without checkpointing on an 80 GB card holds about
    46 GB; with micro-batch 1 and full checkpointing it needs under 20 GB, which is what a
    practitioner would quote for QLoRA."""
    hints, rec = lean_hints(task="qlora", precision="int4")
    assert rec.recipe.checkpointing == "none"
    assert len(hints) == 1
    lean = float(re.search(r"needs about ([\d.]+) GB per GPU", hints[0]).group(1))
    assert 8 <= lean <= 20
    assert lean * 1.6 <= rec.memory_per_gpu_bytes / 1e9
    assert "compute: the figure for a smaller GPU." in hints[0]


def test_no_hint_where_the_researcher_pinned_the_knobs_or_for_inference():
    assert lean_hints(task="qlora", precision="int4", gradient_checkpointing=False)[0] == []
    assert lean_hints(task="qlora", precision="int4", micro_batch=2)[0] == []
    assert lean_hints(task="inference")[0] == []
