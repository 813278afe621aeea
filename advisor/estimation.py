"""Running the engine from the web and the command line: parse, fill in what the database
knows (the catalog, a stored Hub lookup), estimate. Field-level errors come back as
`RequestError` for the caller to show."""

from __future__ import annotations

from typing import Any

from advisor import hub
from advisor.engine import RequestError, estimate, parse_request
from advisor.engine.errors import EstimateError
from advisor.engine.models import EstimateRequest, EstimateResult
from advisor.engine_catalog import engine_catalog
from advisor.selectors import hf_model_lookup_metadata


def estimate_run(*, data: Any) -> EstimateResult:
    """Estimate from JSON-like data; raises RequestError (field-level) for bad input."""
    request = parse_request(data)
    if request.model_id:
        # The id is looked up in the database next; one the Hub would refuse (a NUL, a path,
        # a web address) is the caller's mistake, said as such, not a database error.
        try:
            hub.validate_repo_id(request.model_id)
        except hub.InvalidRepoIdError as exc:
            raise RequestError([("model_id", exc.message)]) from None
    if (
        request.model_id
        and request.hub is None
        and request.config is None
        and (request.params is None)
    ):
        metadata = hf_model_lookup_metadata(repo_id=request.model_id)
        if metadata is not None:
            request = EstimateRequest.model_validate({**request.model_dump(), "hub": metadata})
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
