"""The only package that talks to the Hugging Face Hub (and the only importer of huggingface_hub).

It validates repo ids, fetches what the estimate needs with explicit timeouts, and turns the
client's many exceptions into two of ours: `HubTemporaryError` (worth retrying: timeouts,
connection errors, 5xx, 429) and `HubPermanentError` (not found, gated, private, disabled,
invalid id), each with an `error_kind` and a message a researcher can act on.

Split along what changes together: `errors` (the kinds, messages and repo-id rules; no client),
`client` (the HfApi built from settings, the exception mapping), `fetch` (one model's metadata,
the search). Callers import from here: `from advisor import hub`.
"""

from advisor.hub.client import hub_api, model_page_url, translate_error
from advisor.hub.errors import (
    DISABLED,
    GATED,
    INVALID_ID,
    NO_PARAMETER_COUNT,
    NOT_FOUND,
    PRIVATE,
    RATE_LIMITED,
    REQUEST_ACCESS,
    REVISION_NOT_FOUND,
    SERVER_ERROR,
    TIMEOUT,
    TOKEN_REJECTED,
    TYPE_BY_HAND,
    UNEXPECTED,
    UNREACHABLE,
    HubError,
    HubPermanentError,
    HubTemporaryError,
    InvalidRepoIdError,
    validate_repo_id,
    validate_revision,
)
from advisor.hub.fetch import (
    INDEX_FILE,
    SINGLE_FILE,
    FetchedModel,
    close_matches,
    fetch_model,
    search_models,
)

__all__ = [
    "DISABLED",
    "GATED",
    "INDEX_FILE",
    "INVALID_ID",
    "NOT_FOUND",
    "NO_PARAMETER_COUNT",
    "PRIVATE",
    "RATE_LIMITED",
    "REQUEST_ACCESS",
    "REVISION_NOT_FOUND",
    "SERVER_ERROR",
    "SINGLE_FILE",
    "TIMEOUT",
    "TOKEN_REJECTED",
    "TYPE_BY_HAND",
    "UNEXPECTED",
    "UNREACHABLE",
    "FetchedModel",
    "HubError",
    "HubPermanentError",
    "HubTemporaryError",
    "InvalidRepoIdError",
    "close_matches",
    "fetch_model",
    "hub_api",
    "model_page_url",
    "search_models",
    "translate_error",
    "validate_repo_id",
    "validate_revision",
]
