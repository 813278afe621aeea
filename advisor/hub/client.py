"""The huggingface_hub client, built from settings, and its exceptions translated into ours.

Facts about huggingface_hub 2.4 that shape this module (../shared/hf-hub-notes.md):
- it reads HF_ENDPOINT once at import, so the client is built from settings here (§2);
- `GatedRepoError` subclasses `RepositoryNotFoundError`, so it is caught first (§8).
"""

from __future__ import annotations

import email.utils
import functools
import time

import httpx2
from django.conf import settings
from huggingface_hub import HfApi
from huggingface_hub.errors import (
    DisabledRepoError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import parse_ratelimit_headers

from advisor.hub.errors import (
    DISABLED,
    GATED,
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
)

# --- The client ------------------------------------------------------------------------------


def hub_token() -> str | bool:
    # False (not None) so the client never falls back to a developer's token file (§2).
    return settings.HF_TOKEN or False


@functools.lru_cache(maxsize=4)
def _api(endpoint: str, token: str | bool) -> HfApi:
    return HfApi(endpoint=endpoint, token=token, library_name="allocation-triage")


def hub_api() -> HfApi:
    """One HfApi per process, per endpoint and token (settings may change between tests)."""
    return _api(settings.HF_ENDPOINT, hub_token())


def model_page_url(repo_id: str) -> str:
    return f"{settings.HF_ENDPOINT}/{repo_id}"


# --- Error mapping ---------------------------------------------------------------------------


def _retry_after(response: httpx2.Response | None) -> float | None:
    if response is None:
        return None
    raw = response.headers.get("Retry-After")
    if raw:
        raw = raw.strip()
        if raw.isdigit():
            return float(raw)
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - time.time())
    info = parse_ratelimit_headers(response.headers)
    if info is not None and info.remaining == 0:
        return float(info.reset_in_seconds + 1)
    return None


def translate_error(exc: BaseException, repo_id: str) -> HubError:
    """Map a huggingface_hub / httpx2 exception to ours, in the order the notes give (§8)."""
    if isinstance(exc, HubError):
        return exc
    if isinstance(exc, GatedRepoError):
        return HubPermanentError(
            GATED,
            f"{repo_id} is gated: its files need permission from the authors. {REQUEST_ACCESS} "
            f"{TYPE_BY_HAND}",
        )
    if isinstance(exc, RepositoryNotFoundError):
        return HubPermanentError(
            NOT_FOUND,
            f"No model called {repo_id} was found on the Hub (or it is private). "
            f"Check the spelling. {TYPE_BY_HAND}",
        )
    if isinstance(exc, RevisionNotFoundError):
        return HubPermanentError(
            REVISION_NOT_FOUND,
            f"{repo_id} exists but has no such revision; try main. {TYPE_BY_HAND}",
        )
    if isinstance(exc, DisabledRepoError):
        return HubPermanentError(
            DISABLED, f"{repo_id} has been disabled on the Hub. {TYPE_BY_HAND}"
        )
    if isinstance(exc, HfHubHTTPError):
        response = getattr(exc, "response", None)
        status = response.status_code if response is not None else 0
        if status == 429:
            return HubTemporaryError(
                RATE_LIMITED,
                "The Hub is rate-limiting us; the lookup will try again shortly.",
                retry_after=_retry_after(response),
            )
        if status >= 500 or status in (408, 0):
            return HubTemporaryError(
                SERVER_ERROR,
                f"The Hub answered with an error ({status}); the lookup will try again shortly.",
                retry_after=_retry_after(response),
            )
        if status == 401:
            message = (exc.server_message or "") if hasattr(exc, "server_message") else ""
            if "credentials" in message.lower():
                return HubPermanentError(
                    TOKEN_REJECTED,
                    "The server's Hub token was rejected; staff have to replace it. "
                    f"{TYPE_BY_HAND}",
                )
            return HubPermanentError(
                PRIVATE,
                f"{repo_id} was not found or is private (the Hub refused access). "
                f"Check the spelling. {TYPE_BY_HAND}",
            )
        if status == 403:
            return HubPermanentError(
                PRIVATE, f"The Hub refused access to {repo_id}. {REQUEST_ACCESS} {TYPE_BY_HAND}"
            )
        if status == 404:
            return HubPermanentError(
                NOT_FOUND, f"{repo_id} was not found on the Hub. Check the spelling. {TYPE_BY_HAND}"
            )
        return HubPermanentError(
            UNEXPECTED, f"The Hub refused the request ({status}). {TYPE_BY_HAND}"
        )
    if isinstance(exc, httpx2.TimeoutException):
        return HubTemporaryError(
            TIMEOUT, "The Hub took too long to answer; the lookup will try again shortly."
        )
    if isinstance(exc, httpx2.TransportError | OfflineModeIsEnabled | ConnectionError):
        return HubTemporaryError(
            UNREACHABLE, "The Hub cannot be reached right now; the lookup will try again shortly."
        )
    if isinstance(exc, HFValidationError):
        return InvalidRepoIdError(str(exc))
    raise exc
