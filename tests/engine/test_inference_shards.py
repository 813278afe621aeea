"""A long inference job is split into a job array, not chained with checkpoints.

Requests are independent, so the prompts can be split into shards that run as separate jobs
(a Slurm job array) at the same GPU hours. Before, 10^10 tokens through Transformers' generate
one request at a time read "1 GPU is the most this layout may use" and "run 81 chained jobs
that resume from checkpoints" (a training remedy: generation keeps no checkpoint), and a
researcher's wall-time limit ruled every inference option out.
"""

from __future__ import annotations

import math

from advisor.engine import estimate
from advisor.engine.constants import CONTINGENCY
from advisor.engine.models import Constraints, EstimateRequest
from advisor.model_configs import find_bundled
from tests.engine.inputs import default_catalog


def generate(**fields):
    fields = {"tokens": 10**10, **fields}
    request = EstimateRequest(
        task="inference",
        config=find_bundled("meta-llama/Llama-3.1-8B").config,
        system="stanage",
        accelerator="a100-80-sxm4",
        **fields,
    )
    return estimate(request, default_catalog())


def test_a_job_longer_than_the_partition_allows_becomes_a_job_array():
    result = generate()
    best = result.recommendation
    # Stanage's gpu partition allows 96 h; each task's time with the contingency must fit.
    shards = math.ceil(best.wall_hours / (96 / (1 + CONTINGENCY.value)))
    assert shards > 1
    assert any(
        f"split the prompts into {shards} jobs (a Slurm job array)" in r for r in best.reasons
    )
    assert not any("chained jobs" in r for r in best.reasons)
    script = result.slurm_script
    assert f"#SBATCH --array=0-{shards - 1}" in script
    assert "SLURM_ARRAY_TASK_ID" in script
    assert "capped at the partition limit" not in script


def test_a_wall_time_limit_is_met_by_more_shards_not_refused():
    result = generate(constraints=Constraints(max_wall_hours=24))
    best = result.recommendation
    assert best is not None
    shards = math.ceil(best.wall_hours / (24 / (1 + CONTINGENCY.value)))
    assert any(f"split the prompts into {shards} jobs" in r for r in best.reasons)
    assert not any("your limit is 24 h" in r for r in best.reasons)


def test_a_short_job_stays_one_job():
    result = generate(tokens=10**7)
    assert not any("job array" in r for r in result.recommendation.reasons)
    assert "--array" not in result.slurm_script
