"""The only module that talks to the Hugging Face Hub (and the only importer of huggingface_hub).

It validates repo ids, fetches what the estimate needs with explicit timeouts, and turns the
client's many exceptions into two of ours: `HubTemporaryError` (worth retrying: timeouts,
connection errors, 5xx, 429) and `HubPermanentError` (not found, gated, private, disabled,
invalid id), each with an `error_kind` and a message a researcher can act on.

Facts about huggingface_hub 2.4 that shape this module (../shared/hf-hub-notes.md):
- it reads HF_ENDPOINT once at import, so the client is built from settings here (§2);
- `model_info` waits forever unless given `timeout=`, and `list_models` takes no timeout, so the
  search is a direct bounded GET (§3, §4.3, §10);
- `GatedRepoError` subclasses `RepositoryNotFoundError`, so it is caught first (§8);
- `safetensors` counts are stored tensor elements per dtype, buffers and packed quantised
  integers included, so they are kept per dtype and never relabelled as "parameters" (§3.2).
"""

from __future__ import annotations

import email.utils
import functools
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
from django.conf import settings
from huggingface_hub import HfApi, get_session, hf_raise_for_status
from huggingface_hub.errors import (
    DisabledRepoError,
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    NotASafetensorsRepoError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
    SafetensorsParsingError,
)
from huggingface_hub.utils import build_hf_headers, parse_ratelimit_headers

from advisor.engine.architecture import DTYPE_BYTES
from advisor.lookup_metadata import bounded_counts, choose_params

logger = logging.getLogger(__name__)

# Error kinds stored on a lookup (HfModelLookup.error_kind) and shown as the way forward.
INVALID_ID = "invalid_id"
NOT_FOUND = "not_found"
GATED = "gated"
PRIVATE = "private"
DISABLED = "disabled"
REVISION_NOT_FOUND = "revision_not_found"
TOKEN_REJECTED = "token_rejected"  # noqa: S105 - an error kind, not a secret
RATE_LIMITED = "rate_limited"
TIMEOUT = "timeout"
UNREACHABLE = "unreachable"
SERVER_ERROR = "server_error"
NO_PARAMETER_COUNT = "no_parameter_count"
UNEXPECTED = "unexpected"

TYPE_BY_HAND = "You can type the parameter count by hand instead."
REQUEST_ACCESS = "Request access on the model's Hub page, then look it up again."


class HubError(Exception):
    """A lookup that did not succeed; `message` is written for the researcher."""

    temporary = False

    def __init__(self, kind: str, message: str, *, suggestions: list[str] | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.suggestions = suggestions or []


class HubTemporaryError(HubError):
    """Worth retrying later; `retry_after` is the Hub's own hint in seconds, when it gave one."""

    temporary = True

    def __init__(self, kind: str, message: str, *, retry_after: float | None = None):
        super().__init__(kind, message)
        self.retry_after = retry_after


class HubPermanentError(HubError):
    """Retrying will not help; the message says what the researcher can do instead."""


class InvalidRepoIdError(HubPermanentError, ValueError):
    def __init__(self, message: str):
        super().__init__(INVALID_ID, message)


# --- Repo id validation ----------------------------------------------------------------------

# The client's own rules (huggingface_hub utils/_validators.py::validate_repo_id), spelled out so
# each failure gets its own message (../shared/hf-hub-notes.md §14.1).
_PART_CHARS = re.compile(r"^[A-Za-z0-9_.-]+$")
_PART_MAX = 96


def validate_repo_id(raw: str) -> str:
    """Return the repo id unchanged if the Hub would accept it, else raise InvalidRepoIdError."""
    if not isinstance(raw, str) or raw == "":
        raise InvalidRepoIdError("Enter a model id such as meta-llama/Llama-3.2-1B.")
    if any(ch.isspace() for ch in raw):
        raise InvalidRepoIdError("A model id has no spaces: use the form organisation/model-name.")
    if "://" in raw or raw.lower().startswith(("huggingface.co", "www.", "hf.co/")):
        raise InvalidRepoIdError(
            "Enter the model id, not a web address: for https://huggingface.co/org/name "
            "type org/name."
        )
    if not raw.isascii():
        raise InvalidRepoIdError("A model id uses only ASCII letters, digits, '-', '_' and '.'.")
    if raw.startswith("/") or raw.endswith("/"):
        raise InvalidRepoIdError("A model id neither starts nor ends with '/'.")
    parts = raw.split("/")
    if len(parts) > 2:
        raise InvalidRepoIdError(
            "A model id has at most one '/': organisation/model-name (not a path to a file)."
        )
    if parts[0] in {"datasets", "spaces"} and len(parts) == 2:
        raise InvalidRepoIdError("That is a dataset or Space, not a model.")
    if ".." in raw or "--" in raw:
        raise InvalidRepoIdError("A model id cannot contain '..' or '--'.")
    if raw.endswith(".git"):
        raise InvalidRepoIdError("A model id does not end with '.git'.")
    for part in parts:
        if not part:
            raise InvalidRepoIdError("Both sides of the '/' must be filled in.")
        if len(part) > _PART_MAX:
            raise InvalidRepoIdError(
                f"Each part of a model id is at most {_PART_MAX} characters; "
                f"'{part[:20]}…' has {len(part)}."
            )
        if not _PART_CHARS.match(part):
            raise InvalidRepoIdError(
                "A model id uses only letters, digits, '-', '_' and '.' "
                "(and one '/' between organisation and name)."
            )
        if part[0] in ".-" or part[-1] in ".-":
            raise InvalidRepoIdError(
                "Each part of a model id starts and ends with a letter or digit."
            )
    return raw


def validate_revision(raw: str) -> str:
    """Branch, tag or commit sha; the Hub quotes it into the URL, so only forbid the silly."""
    # isprintable: no whitespace but the space (refused next) and no NUL, which PostgreSQL
    # refuses to store.
    if (
        not raw
        or len(raw) > 200
        or not raw.isprintable()
        or any(ch.isspace() for ch in raw)
        or ".." in raw
    ):
        raise InvalidRepoIdError("The revision must be a branch, tag or commit sha such as main.")
    return raw


# --- The client ------------------------------------------------------------------------------


def _token() -> str | bool:
    # False (not None) so the client never falls back to a developer's token file (§2).
    return settings.HF_TOKEN or False


@functools.lru_cache(maxsize=4)
def _api(endpoint: str, token: str | bool) -> HfApi:
    return HfApi(endpoint=endpoint, token=token, library_name="allocation-triage")


def hub_api() -> HfApi:
    """One HfApi per process, per endpoint and token (settings may change between tests)."""
    return _api(settings.HF_ENDPOINT, _token())


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


def _translate(exc: BaseException, repo_id: str) -> HubError:
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


# --- Fetching --------------------------------------------------------------------------------


@dataclass
class FetchedModel:
    """What one lookup found; `as_json()` is what HfModelLookup.metadata stores."""

    repo_id: str
    sha: str | None
    metadata: dict[str, Any] = field(default_factory=dict)
    gated_files: bool = False  # metadata is public but config.json needs access

    def as_json(self) -> dict[str, Any]:
        return self.metadata


def _timeout() -> float:
    return float(settings.HF_TIMEOUT_SECONDS)


def _license(info) -> str | None:
    card = info.card_data
    if card is not None:
        value = card.get("license") if hasattr(card, "get") else getattr(card, "license", None)
        if value:
            return value if isinstance(value, str) else ", ".join(value)
    for tag in info.tags or []:
        if tag.startswith("license:"):
            return tag.removeprefix("license:")
    return None


def _fetch_json(api: HfApi, repo_id: str, revision: str, filename: str) -> dict | None:
    """A small JSON file at a fixed revision: one bounded GET, None if the repo has none."""
    url = f"{api.endpoint}/{repo_id}/resolve/{revision}/{filename}"
    response = get_session().get(
        url, headers=build_hf_headers(token=_token()), timeout=_timeout(), follow_redirects=True
    )
    try:
        hf_raise_for_status(response)
    except EntryNotFoundError:
        return None
    try:
        data = response.json()
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


def _safetensors_counts(
    api: HfApi, repo_id: str, revision: str, filenames: set[str]
) -> dict[str, int] | None:
    """Counts per dtype from the safetensors headers (Range GETs), when the metadata had none.

    Reads the file list model_info already gave instead of probing with HEADs, and calls the
    header parser with our timeout: get_safetensors_metadata would download the index through
    hf_hub_download, whose retries can take minutes (../shared/hf-hub-notes.md §6).
    """
    if SINGLE_FILE in filenames:
        shards = [SINGLE_FILE]
    elif INDEX_FILE in filenames:
        index = _fetch_json(api, repo_id, revision, INDEX_FILE) or {}
        weight_map = index.get("weight_map") or {}
        shards = sorted({name for name in weight_map.values() if isinstance(name, str)})
    else:
        return None
    counts: dict[str, int] = {}
    for shard in shards:
        try:
            header = api.parse_safetensors_file_metadata(
                repo_id, shard, revision=revision, token=_token(), timeout=_timeout()
            )
        except (NotASafetensorsRepoError, SafetensorsParsingError):
            return None
        for dtype, count in header.parameter_count.items():
            counts[dtype] = counts.get(dtype, 0) + count
    return counts or None


def _model_info(api: HfApi, repo_id: str, revision: str):
    try:
        info = api.model_info(
            repo_id, revision=revision, files_metadata=True, timeout=_timeout(), token=_token()
        )
    except Exception as exc:  # noqa: BLE001 - translated into ours or re-raised
        raise _translate(exc, repo_id) from exc
    if info.disabled:
        raise HubPermanentError(DISABLED, f"{info.id} has been disabled on the Hub. {TYPE_BY_HAND}")
    return info


def _config_of(api: HfApi, repo_id: str, pinned: str, notes: list[str]):
    """(config.json at the pinned commit or None, gated): a gated file also leaves a note."""
    try:
        return _fetch_json(api, repo_id, pinned, "config.json"), False
    except GatedRepoError:
        notes.append(
            "config.json is gated: the parameter count comes from the Hub's public metadata. "
            + REQUEST_ACCESS
        )
        return None, True
    except Exception as exc:  # noqa: BLE001
        raise _translate(exc, repo_id) from exc


def _counts_of(api: HfApi, info, pinned: str, gated_files: bool):
    """(counts per dtype, total, where they were read, gated): model_info's, else the headers."""
    if info.safetensors is not None and info.safetensors.parameters:
        counts = dict(info.safetensors.parameters)
        return counts, info.safetensors.total or sum(counts.values()), _FROM_INFO, gated_files
    if gated_files:
        return {}, None, "", gated_files
    try:
        filenames = {sibling.rfilename for sibling in info.siblings or []}
        header_counts = _safetensors_counts(api, info.id, pinned, filenames)
    except GatedRepoError:
        return {}, None, "", True
    except Exception as exc:  # noqa: BLE001
        raise _translate(exc, info.id) from exc
    if not header_counts:
        return {}, None, "", gated_files
    return header_counts, sum(header_counts.values()), "safetensors headers", gated_files


_FROM_INFO = "hub safetensors metadata"


def _quantization(config: dict | None, info) -> dict | None:
    for source in (config or {}, info.config or {}):
        if isinstance(source.get("quantization_config"), dict):
            return source["quantization_config"]
    return None


def fetch_model(repo_id: str, revision: str = "main") -> FetchedModel:
    """Everything the estimate needs about one model, or a HubError. Blocks: call from a task."""
    validate_repo_id(repo_id)
    validate_revision(revision)
    api = hub_api()
    info = _model_info(api, repo_id, revision)
    pinned = info.sha or revision  # read files at the commit model_info saw, so they agree
    notes: list[str] = []
    config, gated_files = _config_of(api, info.id, pinned, notes)
    counts, total, counts_source, gated_files = _counts_of(api, info, pinned, gated_files)
    counts, total = bounded_counts(counts, total, notes)
    quantization = _quantization(config, info)
    if quantization is not None and counts:
        notes.append(
            "The checkpoint is quantised: the safetensors counts are packed integers and scales, "
            "not model parameters."
        )
    chosen = choose_params(config, counts, total, counts_source, quantization)
    notes.extend(chosen.pop("notes"))
    summary = config or info.config or {}
    metadata = {
        "repo_id": info.id,
        "sha": info.sha,
        "pipeline_tag": info.pipeline_tag,
        "library_name": info.library_name,
        "license": _license(info),
        "gated": info.gated if info.gated in ("auto", "manual") else False,
        "private": bool(info.private),
        "downloads": info.downloads,
        "likes": info.likes,
        "last_modified": info.last_modified.isoformat() if info.last_modified else None,
        "safetensors_parameters": counts,
        "safetensors_total": total,
        "bytes_per_dtype": {d: n * DTYPE_BYTES[d] for d, n in counts.items() if d in DTYPE_BYTES},
        **chosen,
        "counts_source": counts_source,  # where safetensors_parameters were read
        "config_source": "hub",
        "quantization_config": quantization,
        "architectures": summary.get("architectures"),
        "model_type": summary.get("model_type"),
        "config": config,
        "files": {s.rfilename: s.size for s in info.siblings or [] if s.size is not None},
        "notes": notes,
    }
    if chosen["params_total"] is None and not gated_files:
        notes.append("No parameter count was found on the Hub. " + TYPE_BY_HAND)
    return FetchedModel(repo_id=info.id, sha=info.sha, metadata=metadata, gated_files=gated_files)


# --- Search ----------------------------------------------------------------------------------


def search_models(query: str, *, limit: int = 8, timeout: float = 2.0) -> list[dict[str, Any]]:
    """Model ids matching `query`, most downloaded first; bounded time, no retries (§4.3)."""
    api = hub_api()
    try:
        response = get_session().get(
            f"{api.endpoint}/api/models",
            params={"search": query, "limit": limit, "sort": "downloads"},
            headers=build_hf_headers(token=_token()),
            timeout=timeout,
        )
        hf_raise_for_status(response)
    except Exception as exc:  # noqa: BLE001
        raise _translate(exc, query) from exc
    try:
        items = response.json()
    except ValueError as exc:
        raise HubTemporaryError(UNEXPECTED, "The Hub's search answer was not understood.") from exc
    results = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        results.append(
            {
                "id": item["id"],
                "pipeline_tag": item.get("pipeline_tag"),
                "downloads": item.get("downloads"),
                "gated": item.get("gated", False),
            }
        )
    return results[:limit]


def close_matches(repo_id: str, *, limit: int = 5) -> list[str]:
    """Ids on the Hub that look like the one that was not found; [] if the Hub cannot say."""
    name = repo_id.rsplit("/", 1)[-1]
    terms = [name] + [part for part in re.split(r"[-_.]", name) if len(part) >= 3][:1]
    seen: list[str] = []
    for term in terms:
        try:
            found = search_models(term, limit=limit, timeout=min(2.0, _timeout()))
        except HubError:
            return seen
        for item in found:
            if item["id"].lower() != repo_id.lower() and item["id"] not in seen:
                seen.append(item["id"])
        if seen:
            break
    return seen[:limit]
