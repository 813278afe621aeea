"""Fetching one model's metadata and searching model ids, with explicit timeouts.

Facts about huggingface_hub 2.4 that shape this module (../shared/hf-hub-notes.md):
- `model_info` waits forever unless given `timeout=`, and `list_models` takes no timeout, so the
  search is a direct bounded GET (§3, §4.3, §10);
- `safetensors` counts are stored tensor elements per dtype, buffers and packed quantised
  integers included, so they are kept per dtype and never relabelled as "parameters" (§3.2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from huggingface_hub import HfApi, get_session, hf_raise_for_status
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    NotASafetensorsRepoError,
    SafetensorsParsingError,
)
from huggingface_hub.utils import build_hf_headers

from advisor.engine.architecture import DTYPE_BYTES
from advisor.hub.client import hub_api, hub_token, translate_error
from advisor.hub.errors import (
    DISABLED,
    REQUEST_ACCESS,
    TYPE_BY_HAND,
    UNEXPECTED,
    HubError,
    HubPermanentError,
    HubTemporaryError,
    validate_repo_id,
    validate_revision,
)
from advisor.lookup_metadata import bounded_counts, choose_params

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
        url, headers=build_hf_headers(token=hub_token()), timeout=_timeout(), follow_redirects=True
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
                repo_id, shard, revision=revision, token=hub_token(), timeout=_timeout()
            )
        except (NotASafetensorsRepoError, SafetensorsParsingError):
            return None
        for dtype, count in header.parameter_count.items():
            counts[dtype] = counts.get(dtype, 0) + count
    return counts or None


def _model_info(api: HfApi, repo_id: str, revision: str):
    try:
        info = api.model_info(
            repo_id, revision=revision, files_metadata=True, timeout=_timeout(), token=hub_token()
        )
    except Exception as exc:  # noqa: BLE001 - translated into ours or re-raised
        raise translate_error(exc, repo_id) from exc
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
        raise translate_error(exc, repo_id) from exc


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
        raise translate_error(exc, info.id) from exc
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
            headers=build_hf_headers(token=hub_token()),
            timeout=timeout,
        )
        hf_raise_for_status(response)
    except Exception as exc:  # noqa: BLE001
        raise translate_error(exc, query) from exc
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
