"""Running the engine from the web and the command line: parse, fill in what the database
knows (the catalog, a stored Hub lookup), estimate. Field-level errors come back as
`RequestError` for the caller to show."""

from __future__ import annotations

from typing import Any

from advisor.engine import RequestError, estimate, parse_request
from advisor.engine.errors import EstimateError
from advisor.engine.models import EstimateRequest, EstimateResult, HubModelMetadata
from catalog.selectors import engine_catalog


def hub_metadata_for(*, model_id: str) -> HubModelMetadata | None:
    """The stored Hub lookup for `model_id`, if one has finished; None otherwise."""
    try:
        from advisor.models import HfModelLookup
    except ImportError:  # the lookup model lands with the hub work; until then, nothing stored
        return None
    lookup = (
        HfModelLookup.objects.filter(repo_id=model_id)
        .union(HfModelLookup.objects.filter(requested_id=model_id))
        .order_by("-fetched_at")
        .first()
    )
    return lookup.to_hub_metadata() if lookup is not None else None


def estimate_run(*, data: Any) -> EstimateResult:
    """Estimate from JSON-like data; raises RequestError (field-level) for bad input."""
    request = parse_request(data)
    if request.model_id and request.hub is None and request.config is None and (
        request.params is None
    ):
        hub = hub_metadata_for(model_id=request.model_id)
        if hub is not None:
            request = EstimateRequest.model_validate({**request.model_dump(), "hub": hub})
    # Retired systems stay in so the result can say why they are not recommended.
    catalog = engine_catalog(include_retired=True)
    try:
        return estimate(request, catalog)
    except RequestError:
        raise
    except EstimateError as exc:
        raise RequestError([(exc.field or "", exc.message)]) from None


def error_list(exc: RequestError) -> list[dict[str, str]]:
    return [{"field": field, "message": message} for field, message in exc.errors]
