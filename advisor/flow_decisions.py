"""The chart's decision nodes: the checks that answer them from an estimate or a lookup.

Each check takes the answers' fields and the catalog and returns a Decision (value and why);
`decider` hands them to the flowchart's walk. One estimate per set of answers is shared by the
decisions on a path (the `cache`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from advisor.chart_walk import AnswerError, Decision, answer_fields
from advisor.engine import estimate
from advisor.engine.device_memory import capacity_text, device_bytes
from advisor.engine.models import CatalogSpec, EstimateRequest, EstimateResult, Option
from advisor.engine.words import STRATEGY_NAMES, plural
from advisor.engine_catalog import engine_catalog_stamped
from advisor.flow_requests import estimate_request_for
from advisor.flowchart import Flowchart, Node
from advisor.selectors import hf_model_lookup_metadata, local_model_config
from catalog.templatetags.catalog_format import gigabytes

# A V100 32GB as the driver reports it (nvidia-smi: 32,768 MiB), for catalogs without V100s.
V100_MEMORY_BYTES = 32 * 2**30
V100_MAX_GPUS_PER_NODE = 8  # DGX-1 class nodes; larger jobs span nodes


def model_lookup_for(model_id: str | None):
    """The lookup behind a model answer, for the status card on the next step."""
    if not model_id:
        return None
    from django.db.models import Q

    from advisor.models import HfModelLookup

    return (
        HfModelLookup.objects.filter(Q(requested_id=model_id) | Q(repo_id=model_id))
        .order_by("-updated_at")
        .first()
    )


def model_lookup_start(model_id: str) -> None:
    """Ask the Hub about the model in the background; the id's format is checked here."""
    from advisor import hub
    from advisor.services import hf_model_lookup_request

    try:
        hf_model_lookup_request(repo_id=model_id)
    except hub.InvalidRepoIdError as exc:
        raise AnswerError(exc.message) from exc


# --- Decisions --------------------------------------------------------------------------------


class CatalogReader:
    """The engine catalog, read at first use and then kept (for one request): a page whose path
    runs no sizing check reads none, not even the catalog's version stamp."""

    def __init__(self, catalog: CatalogSpec | None = None, *, stamp_now: str | None = None) -> None:
        self._catalog = catalog
        # The version stamp the catalog was read at; None when given or not read (`was_read`).
        self.stamp: str | None = None
        # The stamp as already read in this request, if it was (saves reading it again).
        self._stamp_now = stamp_now

    def __call__(self) -> CatalogSpec:
        if self._catalog is None:
            self._catalog, self.stamp = engine_catalog_stamped(stamp=self._stamp_now)
        return self._catalog

    @property
    def was_read(self) -> bool:
        return self._catalog is not None


# The checks that size the work need the catalog; the model-size check asks the lookups only.
SIZING_CHECKS = {"v100_sufficient", "fits_gpu_memory"}


def decider(chart: Flowchart, catalog: CatalogSpec | CatalogReader, cache: dict[str, Any]):
    read = catalog if isinstance(catalog, CatalogReader) else CatalogReader(catalog)

    def decide(node: Node, answers: Mapping[str, Any]) -> Decision:
        check = CHECKS.get(node.check)
        if check is None:
            return Decision("unknown", f"No check called {node.check!r} is known.")
        spec = read() if node.check in SIZING_CHECKS else None
        return check(node=node, fields=answer_fields(chart, answers), catalog=spec, cache=cache)

    return decide


def _estimate_for_check(answers, catalog, cache) -> EstimateResult | str:
    """One unconstrained estimate per set of answers, shared by the decisions on a path.

    `answers` are fields (answer_fields); the data's sensitivity plays no part in what fits.
    """
    key = repr(sorted((k, str(v)) for k, v in answers.items()))
    if key in cache:
        return cache[key]
    try:
        sizing = {k: v for k, v in answers.items() if k != "constraints.data_sensitivity"}
        request = estimate_request_for(fields=sizing)
        if request is None:
            outcome: EstimateResult | str = "This is not GPU work."
        else:
            outcome = _estimate_once(request, catalog)
    except ValueError as exc:
        outcome = str(exc)
    cache[key] = outcome
    return outcome


# The checks' estimates, kept across requests in this process: every page after a sizing
# check walks the path again, and would otherwise run the engine on each view. Keyed by the
# engine's whole request (the Hub's metadata and a deadline's wall-time limit are in it) and
# held beside the catalog object they were made from: engine_catalog returns one object per
# catalog version, so a catalog change misses and estimates again.
_CHECK_ESTIMATES: OrderedDict[str, tuple[CatalogSpec, EstimateResult | str]] = OrderedDict()
_CHECK_ESTIMATES_KEPT = 32  # a full estimate is a few hundred kB of objects: keep few
_check_estimates_lock = threading.Lock()


def _estimate_once(request: EstimateRequest, catalog: CatalogSpec) -> EstimateResult | str:
    key = request.model_dump_json()
    with _check_estimates_lock:
        kept = _CHECK_ESTIMATES.get(key)
        if kept is not None and kept[0] is catalog:
            _CHECK_ESTIMATES.move_to_end(key)
            return kept[1]
    try:
        outcome: EstimateResult | str = estimate(request, catalog)
    except ValueError as exc:
        outcome = str(exc)
    with _check_estimates_lock:
        _CHECK_ESTIMATES[key] = (catalog, outcome)
        _CHECK_ESTIMATES.move_to_end(key)
        while len(_CHECK_ESTIMATES) > _CHECK_ESTIMATES_KEPT:
            _CHECK_ESTIMATES.popitem(last=False)
    return outcome


def gb_text(n_bytes: float) -> str:
    return gigabytes(n_bytes)


def _fewest_gpus(options: list[Option]) -> Option:
    """The fitting option on the fewest GPUs, the least memory per GPU among those."""
    return min(options, key=lambda o: (o.num_gpus, o.memory_per_gpu_bytes))


def _one_gpu_need(result: EstimateResult) -> float:
    """The memory the work needs on one GPU (the whole estimate when no one-GPU option)."""
    single = [o.memory_per_gpu_bytes for o in result.options if o.num_gpus == 1]
    return min(single) if single else result.memory.total_bytes


def check_v100_sufficient(*, node, fields, catalog, cache) -> Decision:
    """V100s are enough when the work runs in fp16/fp32 and fits 32 GB per GPU on one node."""
    precision = fields.get("precision")
    if precision == "bf16":
        return Decision(
            "no",
            "You chose bf16, which V100s do not support (they have fp16 and fp32 only); "
            "A100 and newer GPUs run bf16 natively.",
        )
    result = _estimate_for_check(fields, catalog, cache)
    if isinstance(result, str):
        return Decision("unknown", f"We could not estimate the memory: {result}")
    v100_names = {
        a.name
        for a in catalog.accelerators
        if "v100" in a.name.lower() or "v100" in a.display_name.lower()
    }
    candidates = [o for o in result.options if o.accelerator in v100_names] if v100_names else []
    fitting = [o for o in candidates if o.fits and o.nodes == 1]
    if fitting:
        best = _fewest_gpus(fitting)
        strategy = STRATEGY_NAMES.get(best.strategy, best.strategy)  # "data parallel (DDP)"
        return Decision(
            "yes",
            f"It needs {gb_text(best.memory_per_gpu_bytes)} per GPU on "
            f"{plural(best.num_gpus, 'V100 GPU')} ({strategy}), within a V100's 32 GB.",
        )
    need = _one_gpu_need(result)
    if not candidates and need <= V100_MEMORY_BYTES:
        return Decision("yes", f"It needs {gb_text(need)} on one GPU, within a V100's 32 GB.")
    return Decision(
        "no",
        f"It needs {gb_text(need)} on one GPU, and does not fit in a V100's 32 GB on up to "
        f"{V100_MAX_GPUS_PER_NODE} GPUs of one node.",
    )


def check_fits_gpu_memory(*, node, fields, catalog, cache) -> Decision:
    """Fits when some option needs at most `memory_gb` per GPU on at most `max_gpus` GPUs.

    Where the node names the catalog's `accelerator`, the limit is what that GPU holds as its
    driver reports it (an A100 80GB: 85.9 GB), the capacity every option is sized against;
    otherwise `memory_gb` in decimal GB, the smaller figure."""
    limit_gb = float(node.params.get("memory_gb", 80))
    max_gpus = int(node.params.get("max_gpus", 1))
    result = _estimate_for_check(fields, catalog, cache)
    if isinstance(result, str):
        return Decision("unknown", f"We could not estimate the memory: {result}")
    named = node.params.get("accelerator")
    gpu = next((a for a in catalog.accelerators if a.name == named), None) if named else None
    limit = device_bytes(gpu) if gpu is not None else limit_gb * 1e9
    room = f"the {capacity_text(gpu)} of the {gpu.display_name}" if gpu else f"{limit_gb:g} GB"
    fitting = [
        o for o in result.options if o.num_gpus <= max_gpus and o.memory_per_gpu_bytes <= limit
    ]
    if fitting:
        best = _fewest_gpus(fitting)
        return Decision(
            "yes",
            f"It needs {gb_text(best.memory_per_gpu_bytes)} per GPU on "
            f"{plural(best.num_gpus, 'GPU')}, "
            f"within {room}.",
        )
    need = _one_gpu_need(result)
    gpus = "one GPU" if max_gpus == 1 else f"up to {max_gpus} GPUs"
    return Decision("no", f"It needs {gb_text(need)} on one GPU and does not fit {room} on {gpus}.")


def check_model_size_known(*, node, fields, catalog, cache) -> Decision:
    """Whether the named model's size is known (from the Hub, a bundled or staff config).

    "pending" while the lookup runs (the size question is then optional and the walk asks
    again once it ends); "no" when no model was named or the lookup found no size: the flow
    asks for the parameter count, keeping the model's name for the request.
    """
    model_id = fields.get("model_id")
    if not model_id:
        return Decision("no", "No Hugging Face id was given, so we ask for the size.")
    lookup = model_lookup_for(model_id)
    if lookup is not None and lookup.in_flight:
        local = local_model_config(repo_id=model_id)
        if local is not None:
            # The lookup asks the Hub first; the configuration we keep already gives the size.
            return Decision("yes", f"{model_id}'s size is counted from {_local_label(local)}.")
        return Decision("pending", f"We are still looking up {model_id}.")
    metadata = hf_model_lookup_metadata(repo_id=model_id)
    if metadata is not None and metadata.params_total:
        source = f", from {metadata.params_source}" if metadata.params_source else ""
        return Decision(
            "yes", f"{model_id} has {metadata.params_total / 1e9:,.3g} billion parameters{source}."
        )
    why = (lookup.message if lookup is not None else "") or "its size is not known here"
    return Decision("no", f"We could not read the size of {model_id} ({why.rstrip('.')}).")


def _local_label(local: Mapping[str, Any]) -> str:
    if local.get("kind") == "staff":
        return "a configuration staff added"
    return "the configuration this service keeps for it"


CHECKS = {
    "v100_sufficient": check_v100_sufficient,
    "fits_gpu_memory": check_fits_gpu_memory,
    "model_size_known": check_model_size_known,
}
