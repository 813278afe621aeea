"""Writes and orchestration for the advisor: Hugging Face model lookups.

A lookup is one HfModelLookup row per (repo id, revision). Requests share the row; only the
request that makes it pending (new, or stale) enqueues the task, and the task claims the row
with a conditional update, so however many researchers ask at once the Hub is asked once, and a
redelivered task (acks_late after a worker died) changes nothing. The row is also the outbox
(config/outbox.py): when the broker is down the lookup waits as pending and the sweep sends it
once Redis is back; a "running" row whose worker died is taken over by the sweep too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from advisor import hub, lookup_metadata, selectors
from advisor.models import HfModelLookup, StaffModelConfig
from config.outbox import outbox_due, rows_requeue, task_send_on_commit

logger = logging.getLogger(__name__)

Status = HfModelLookup.Status
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
# How long a done lookup is served from Django's cache without a database read.
LOOKUP_CACHE_SECONDS = 300
# config_source values of answers that did not come from the Hub.
LOCAL_SOURCES = ("bundled", "staff")
LOCAL_CONFIG_LABELS = {
    "bundled": "the bundled config",
    "staff": "a config.json added by staff",
}
# Why the Hub gave nothing, in a few words for the "from the bundled config" note.
_DID_NOT_ANSWER = {
    hub.SERVER_ERROR: "it answered with an error",
    hub.TIMEOUT: "it took too long to answer",
    hub.UNREACHABLE: "it cannot be reached",
    hub.RATE_LIMITED: "it is rate-limiting us",
    hub.NOT_FOUND: "it shows no public model by that name",
    hub.PRIVATE: "it shows no public model by that name",
}


class LookupBusy(Exception):
    """Another delivery holds the lookup and may still be alive; look again in `retry_in` s."""

    def __init__(self, retry_in: float):
        super().__init__(f"lookup is running elsewhere; retry in {retry_in:.0f}s")
        self.retry_in = retry_in


def _running_is_stale_after() -> timedelta:
    # The hard time limit kills a task that runs longer, so a RUNNING row older than that (plus
    # a little slack) belongs to a worker that died.
    return timedelta(seconds=settings.HF_LOOKUP_TIME_LIMIT_SECONDS + 1)


def _find(repo_id: str, revision: str) -> HfModelLookup | None:
    # The Hub treats ids case-insensitively and redirects aliases (gpt2 -> openai-community/gpt2),
    # so an id matches either the canonical id or the one first typed.
    return (
        HfModelLookup.objects.filter(revision=revision)
        .filter(Q(repo_id__iexact=repo_id) | Q(requested_id__iexact=repo_id))
        .order_by("pk")
        .first()
    )


def _stale_condition(revision: str) -> Q:
    now = timezone.now()
    stale = Q(
        status=Status.FAILED,
        updated_at__lt=now - timedelta(seconds=settings.HF_LOOKUP_FAILED_MAX_AGE_SECONDS),
    )
    stale |= Q(status=Status.RUNNING, started_at__lt=now - _running_is_stale_after())
    # An answer from a bundled or staff config is asked of the Hub again, as a failure would be.
    stale |= Q(
        status=Status.DONE,
        metadata__config_source__in=LOCAL_SOURCES,
        fetched_at__lt=now - timedelta(seconds=settings.HF_LOOKUP_FAILED_MAX_AGE_SECONDS),
    )
    if not _SHA_RE.match(revision):
        # A branch moves; what a commit sha names never changes.
        stale |= Q(
            status=Status.DONE,
            fetched_at__lt=now - timedelta(hours=settings.HF_LOOKUP_MAX_AGE_HOURS),
        )
    return stale


def _looks_stale(lookup: HfModelLookup) -> bool:
    """The row as read matches the stale condition; the conditional update re-checks it."""
    now = timezone.now()
    if lookup.status == Status.FAILED:
        return lookup.updated_at < now - timedelta(
            seconds=settings.HF_LOOKUP_FAILED_MAX_AGE_SECONDS
        )
    if lookup.status == Status.RUNNING:
        return lookup.started_at is None or lookup.started_at < now - _running_is_stale_after()
    if lookup.status == Status.DONE and _from_local_config(lookup):
        retry_after = timedelta(seconds=settings.HF_LOOKUP_FAILED_MAX_AGE_SECONDS)
        return lookup.fetched_at is None or lookup.fetched_at < now - retry_after
    if lookup.status == Status.DONE and not _SHA_RE.match(lookup.revision):
        max_age = timedelta(hours=settings.HF_LOOKUP_MAX_AGE_HOURS)
        return lookup.fetched_at is None or lookup.fetched_at < now - max_age
    return False


def _cache_key(repo_id: str, revision: str) -> str:
    digest = hashlib.sha256(f"{revision}\0{repo_id.lower()}".encode()).hexdigest()
    return f"hf-lookup:{digest}"


def _from_local_config(lookup: HfModelLookup) -> bool:
    return (lookup.metadata or {}).get("config_source") in LOCAL_SOURCES


def _cache_if_done(cache_key: str, lookup: HfModelLookup) -> None:
    """Keep a done lookup in the cache, never past the moment it would go stale."""
    if lookup.status != Status.DONE or lookup.fetched_at is None or _from_local_config(lookup):
        return
    ttl = float(LOOKUP_CACHE_SECONDS)
    if not _SHA_RE.match(lookup.revision):
        fresh_until = lookup.fetched_at + timedelta(hours=settings.HF_LOOKUP_MAX_AGE_HOURS)
        ttl = min(ttl, (fresh_until - timezone.now()).total_seconds())
    if ttl >= 1:
        cache.set(cache_key, lookup, int(ttl))


def _forget_cached(lookup: HfModelLookup) -> None:
    cache.delete_many(
        [_cache_key(repo_id, lookup.revision) for repo_id in {lookup.repo_id, lookup.requested_id}]
    )


def _enqueue(lookup: HfModelLookup) -> None:
    from advisor.tasks import hf_model_lookup_refresh as hf_model_lookup_refresh_task

    task_send_on_commit(hf_model_lookup_refresh_task, lookup)


def hf_model_lookups_requeue_due() -> int:
    """The outbox sweep for lookups: queue again what the broker never took or lost, and the
    lookups a dead worker left "running". Returns how many were queued."""
    from advisor.tasks import hf_model_lookup_refresh as hf_model_lookup_refresh_task

    now = timezone.now()
    due = HfModelLookup.objects.filter(
        (Q(status=Status.PENDING) & outbox_due(now=now))
        | Q(status=Status.RUNNING, started_at__lt=now - _running_is_stale_after())
    )
    return rows_requeue(hf_model_lookup_refresh_task, due)


def hf_model_lookup_request(*, repo_id: str, revision: str = "main") -> HfModelLookup:
    """The shared lookup for this model, started in the background if nothing fresh exists.

    Raises hub.InvalidRepoIdError (changing nothing) when the id could not exist on the Hub.
    """
    hub.validate_repo_id(repo_id)
    hub.validate_revision(revision)
    cache_key = _cache_key(repo_id, revision)
    cached = cache.get(cache_key)
    if cached is not None:
        return cached

    lookup = _find(repo_id, revision)
    if lookup is None:
        try:
            with transaction.atomic():
                lookup = HfModelLookup.objects.create(
                    repo_id=repo_id, requested_id=repo_id, revision=revision
                )
        except IntegrityError:
            # Another request created it between our read and our insert: share theirs.
            lookup = _find(repo_id, revision)
            if lookup is None:
                raise
        else:
            _enqueue(lookup)
            return lookup

    if lookup.status == Status.PENDING or not _looks_stale(lookup):
        _cache_if_done(cache_key, lookup)
        return lookup  # fresh or already queued: the common, read-only path
    became_pending = (
        HfModelLookup.objects.filter(pk=lookup.pk)
        .filter(_stale_condition(revision))
        .update(status=Status.PENDING, queued_at=None, updated_at=timezone.now())
    )
    if became_pending:
        _enqueue(lookup)
        lookup.refresh_from_db()
    return lookup


def hf_model_lookup_refresh(
    *, lookup_id: int, final_attempt: bool = False, temporary_exceptions: tuple = ()
) -> HfModelLookup | None:
    """Ask the Hub about the lookup's model and store the answer; a no-op unless it is pending.

    Raises hub.HubTemporaryError (after recording it) when a later attempt may succeed, unless
    this is the final attempt; raises LookupBusy when another live delivery holds the lookup.
    `temporary_exceptions` are treated like a Hub timeout (the task's soft time limit).
    """
    claimed_at = timezone.now()
    claimable = Q(status=Status.PENDING) | Q(
        status=Status.RUNNING, started_at__lt=claimed_at - _running_is_stale_after()
    )
    claimed = (
        HfModelLookup.objects.filter(pk=lookup_id)
        .filter(claimable)
        .update(
            status=Status.RUNNING,
            started_at=claimed_at,
            attempts=F("attempts") + 1,
            updated_at=claimed_at,
        )
    )
    lookup = HfModelLookup.objects.filter(pk=lookup_id).first()
    if lookup is None:
        return None
    if not claimed:
        if lookup.status == Status.RUNNING and lookup.started_at is not None:
            remaining = (
                lookup.started_at + _running_is_stale_after() - timezone.now()
            ).total_seconds()
            raise LookupBusy(retry_in=max(1.0, remaining + 1))
        return lookup  # done or failed already: a redelivery changes nothing

    try:
        fetched = _with_local_config(hub.fetch_model(lookup.repo_id, lookup.revision))
    except hub.HubTemporaryError as exc:
        local = _local_answer(lookup, exc)
        if local is not None:
            return _record_success(lookup_id, claimed_at, local)
        _record_failure(lookup_id, claimed_at, exc, final=final_attempt)
        if not final_attempt:
            raise
        return HfModelLookup.objects.get(pk=lookup_id)
    except hub.HubPermanentError as exc:
        # A model the Hub does not show (in-house, private) that staff gave a config.json for.
        local = _local_answer(lookup, exc, staff_only=True)
        if local is not None and exc.kind in (hub.NOT_FOUND, hub.PRIVATE):
            return _record_success(lookup_id, claimed_at, local)
        if exc.kind in (hub.NOT_FOUND, hub.PRIVATE):
            exc.suggestions = hub.close_matches(lookup.repo_id)
        _record_failure(lookup_id, claimed_at, exc, final=True)
        return HfModelLookup.objects.get(pk=lookup_id)
    except temporary_exceptions as exc:
        error = hub.HubTemporaryError(hub.TIMEOUT, "The lookup took too long; it will try again.")
        local = _local_answer(lookup, error)
        if local is not None:
            return _record_success(lookup_id, claimed_at, local)
        _record_failure(lookup_id, claimed_at, error, final=final_attempt)
        if not final_attempt:
            raise error from exc
        return HfModelLookup.objects.get(pk=lookup_id)
    except Exception:
        error = hub.HubPermanentError(
            hub.UNEXPECTED,
            "Something went wrong on our side while asking the Hub. "
            f"Try again later. {hub.TYPE_BY_HAND}",
        )
        _record_failure(lookup_id, claimed_at, error, final=True)
        raise

    return _record_success(lookup_id, claimed_at, fetched)


def _local_answer(
    lookup: HfModelLookup, error: hub.HubError, *, staff_only: bool = False
) -> hub.FetchedModel | None:
    """The answer from a bundled or staff config when the Hub did not answer, else None.

    An earlier answer from the Hub itself is kept instead (more specific than any bundled
    file), and the lookup retries as before.
    """
    if lookup.metadata and not _from_local_config(lookup):
        return None
    local = selectors.local_model_config(repo_id=lookup.repo_id) or (
        selectors.local_model_config(repo_id=lookup.requested_id)
    )
    if local is None or (staff_only and local["kind"] != "staff"):
        return None
    label = LOCAL_CONFIG_LABELS[local["kind"]]
    reason = _DID_NOT_ANSWER.get(error.kind, "it did not answer")
    note = (
        f"Counted from {label}; the Hub did not answer ({reason}). "
        "The next lookup asks the Hub again."
    )
    logger.info("Hub lookup of %s answered from %s: %s", lookup.repo_id, local["kind"], error.kind)
    metadata = lookup_metadata.metadata_from_config(local["repo_id"], local, note=note)
    return hub.FetchedModel(repo_id=local["repo_id"], sha=None, metadata=metadata)


def _with_local_config(fetched: hub.FetchedModel) -> hub.FetchedModel:
    """A gated config.json (the Hub gave counts but not the file): count from our own copy."""
    metadata = fetched.metadata
    if metadata.get("config") is not None:
        return fetched
    local = selectors.local_model_config(repo_id=fetched.repo_id)
    if local is None:
        return fetched
    chosen = lookup_metadata.choose_params(
        local["config"],
        metadata.get("safetensors_parameters") or {},
        metadata.get("safetensors_total"),
        metadata.get("params_source") or "",
        metadata.get("quantization_config"),
    )
    notes = [*metadata.get("notes", []), *chosen.pop("notes")]
    label = LOCAL_CONFIG_LABELS[local["kind"]]
    notes.append(f"The model's shape comes from {label}, since the Hub's config.json is gated.")
    metadata.update(
        chosen,
        notes=notes,
        config=local["config"],
        config_source=f"hub+{local['kind']}",
        model_type=local["config"].get("model_type"),
        architectures=local["config"].get("architectures"),
    )
    return fetched


def _record_success(lookup_id: int, claimed_at, fetched: hub.FetchedModel) -> HfModelLookup:
    with transaction.atomic():
        lookup = HfModelLookup.objects.select_for_update().get(pk=lookup_id)
        if lookup.status != Status.RUNNING or lookup.started_at != claimed_at:
            return lookup  # a later delivery took over; its answer wins
        canonical_taken = (
            HfModelLookup.objects.filter(repo_id=fetched.repo_id, revision=lookup.revision)
            .exclude(pk=lookup.pk)
            .exists()
        )
        if not canonical_taken:
            lookup.repo_id = fetched.repo_id
        lookup.sha = fetched.sha or ""
        lookup.metadata = fetched.as_json()
        lookup.status = Status.DONE
        lookup.error_kind = hub.GATED if fetched.gated_files else ""
        lookup.message = " ".join(fetched.metadata.get("notes") or [])
        lookup.suggestions = []
        lookup.fetched_at = timezone.now()
        lookup.save()
    _forget_cached(lookup)
    logger.info("Hub lookup %s done: %s@%s", lookup_id, lookup.repo_id, lookup.sha)
    return lookup


def _record_failure(lookup_id: int, claimed_at, error: hub.HubError, *, final: bool) -> None:
    """Keep any earlier metadata (stale data beats none); say what happened and what to do."""
    if final and error.temporary:
        message = f"{error.message.split(';')[0]}. Try again later. {hub.TYPE_BY_HAND}"
    else:
        message = error.message
    with transaction.atomic():
        updated = HfModelLookup.objects.filter(
            pk=lookup_id, status=Status.RUNNING, started_at=claimed_at
        ).update(
            status=Status.FAILED if final else Status.PENDING,
            error_kind=error.kind,
            message=message,
            suggestions=getattr(error, "suggestions", []) or [],
            updated_at=timezone.now(),
        )
    logger.info(
        "Hub lookup %s %s: %s%s",
        lookup_id,
        "failed" if final else "will retry",
        error.kind,
        "" if updated else " (superseded)",
    )


# --- Staff-added config.json files ----------------------------------------------------------

MAX_CONFIG_BYTES = 1_000_000  # real config.json files are a few kB; Gemma 3's is 40 kB


class ModelConfigRejected(ValueError):
    """An uploaded config.json that cannot be used; the message says why, for staff."""


def _reject_constant(name: str):
    raise ModelConfigRejected(f"config.json contains {name}, which is not a JSON number.")


def _no_nul(value) -> None:
    """PostgreSQL cannot store a NUL character in JSON text; no real config has one."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            raise ModelConfigRejected("config.json contains a NUL character.")
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def model_config_parse(data: bytes) -> tuple[dict, object]:
    """Validate an uploaded config.json: (the config, the engine's architecture) or a rejection.

    A JSON object in UTF-8, at most MAX_CONFIG_BYTES, of a family the engine counts, with every
    size within real-model bounds; nothing is stored here.
    """
    from advisor.engine.architecture import architecture_from_config
    from advisor.engine.errors import ConfigError

    if len(data) > MAX_CONFIG_BYTES:
        raise ModelConfigRejected(
            f"The file is {len(data):,} bytes; a config.json is at most {MAX_CONFIG_BYTES:,}."
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ModelConfigRejected("The file is not UTF-8 text; upload the config.json.") from exc
    try:
        config = json.loads(text, parse_constant=_reject_constant)
    except ModelConfigRejected:
        raise
    except (ValueError, RecursionError) as exc:
        raise ModelConfigRejected(f"The file is not valid JSON: {str(exc)[:200]}") from exc
    if not isinstance(config, dict):
        raise ModelConfigRejected(
            f"A config.json is a JSON object ({{...}}), not a {type(config).__name__}."
        )
    _no_nul(config)
    try:
        arch = architecture_from_config(config)
    except ConfigError as exc:
        raise ModelConfigRejected(exc.message) from exc
    return config, arch


def staff_model_config_save(
    *, repo_id: str, data: bytes, source: str, user, instance=None
) -> StaffModelConfig:
    """Store (or replace) a staff config.json after validating it; nothing is written on error."""
    hub.validate_repo_id(repo_id)
    config, arch = model_config_parse(data)
    clash = StaffModelConfig.objects.filter(repo_id__iexact=repo_id)
    if instance is not None and instance.pk:
        clash = clash.exclude(pk=instance.pk)
    if clash.exists():
        raise ModelConfigRejected(
            f"A config.json for {repo_id} was already added; change that one instead."
        )
    row = instance or StaffModelConfig()
    row.repo_id = repo_id
    row.config = config
    row.model_type = arch.family
    row.params_total = arch.params_total
    row.source = source
    if user is not None and getattr(user, "pk", None):
        row.added_by = user
    with transaction.atomic():
        row.save()
        # A lookup answered from an older local config goes stale: the next request asks again.
        HfModelLookup.objects.filter(
            Q(repo_id__iexact=repo_id) | Q(requested_id__iexact=repo_id),
            status=Status.DONE,
            metadata__config_source__in=LOCAL_SOURCES,
        ).update(fetched_at=timezone.now() - timedelta(days=1))
    return row
