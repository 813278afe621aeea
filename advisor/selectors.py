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
