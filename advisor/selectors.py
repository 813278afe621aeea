"""Reads for the advisor that need more than one line of ORM."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.cache import cache

from advisor import hub

SUGGESTION_MIN_LENGTH = 2
SUGGESTION_LIMIT = 8


def hf_model_suggestion_list(*, query: str) -> tuple[list[dict], str]:
    """Hub model ids matching what the researcher is typing, and a note when there are none.

    Bounded in time (the Hub gets HF_SEARCH_TIMEOUT_SECONDS), cached per query, and never an
    error: an unreachable Hub gives an empty list and says so.
    """
    query = query.strip()
    if len(query) < SUGGESTION_MIN_LENGTH:
        return [], ""
    key = "hf-suggest:" + hashlib.sha256(query.lower().encode()).hexdigest()
    cached = cache.get(key)
    if cached is not None:
        return cached
    try:
        results = hub.search_models(
            query, limit=SUGGESTION_LIMIT, timeout=settings.HF_SEARCH_TIMEOUT_SECONDS
        )
    except hub.HubError:
        return [], "Suggestions from the Hub are unavailable right now; type the full model id."
    answer = (results, "" if results else "No models on the Hub match that yet.")
    cache.set(key, answer, settings.HF_SEARCH_CACHE_SECONDS)
    return answer


def hf_model_lookup_metadata(*, repo_id: str, revision: str = "main"):
    """The engine's HubModelMetadata for a model already looked up, else None (starts nothing).

    Matches the canonical id or the id first typed, case-insensitively, as the Hub does.
    """
    from django.db.models import Q

    from advisor.models import HfModelLookup

    lookup = (
        HfModelLookup.objects.filter(revision=revision)
        .filter(Q(repo_id__iexact=repo_id) | Q(requested_id__iexact=repo_id))
        .exclude(metadata=None)
        .order_by("pk")
        .first()
    )
    return lookup.to_hub_metadata() if lookup is not None else None


def local_model_config(*, repo_id: str) -> dict | None:
    """A config.json for `repo_id` that does not need the Hub: staff-added first, then bundled.

    Returns {"config", "kind" ("staff" | "bundled"), "repo_id", "licence", "source"} or None.
    """
    from advisor import model_configs
    from advisor.models import StaffModelConfig

    staff = StaffModelConfig.objects.filter(repo_id__iexact=repo_id).first()
    if staff is not None:
        return {
            "config": staff.config,
            "kind": "staff",
            "repo_id": staff.repo_id,
            "licence": None,
            "source": staff.source or "added by staff",
        }
    bundled = model_configs.find_bundled(repo_id)
    if bundled is None:
        return None
    return {
        "config": bundled.config,
        "kind": "bundled",
        "repo_id": bundled.repo_id,
        "licence": bundled.licence,
        "source": bundled.config_source,
    }
