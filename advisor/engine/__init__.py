"""The estimation engine: pure Python + pydantic, no Django.

`estimate(request, catalog)` is the one entry point: memory per GPU by component, FLOPs, GPU
hours and wall time for every system / accelerator / strategy in the catalog, ranked with
reasons, plus a justification paragraph and a starter Slurm script.
"""

from __future__ import annotations

from advisor.engine.assemble import estimate, estimate_shape
from advisor.engine.errors import EstimateError
from advisor.engine.request_checks import RequestError, parse_request
from advisor.engine.uncertainty import memory_uncertainty
from advisor.engine.version import ENGINE_VERSION
from advisor.engine.workload import resolve_model, run_loss_facts

__all__ = [
    "ENGINE_VERSION",
    "EstimateError",
    "RequestError",
    "estimate",
    "estimate_shape",
    "memory_uncertainty",
    "parse_request",
    "resolve_model",
    "run_loss_facts",
]
