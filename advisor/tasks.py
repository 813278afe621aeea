"""Celery tasks: thin wrappers that load by id, call a service and declare the retry policy."""

from __future__ import annotations

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from advisor.hub import HubTemporaryError

# The longest the Hub's Retry-After may push a retry out; beyond that the backoff decides. Kept
# below the broker's visibility timeout (CELERY_VISIBILITY_TIMEOUT, 300 s by default), past which
# Redis would deliver a task still waiting for its countdown a second time.
MAX_RETRY_AFTER_SECONDS = 240


@shared_task(
    bind=True,
    # Idempotent (the service claims the row with a conditional update), so a redelivery after a
    # worker died is harmless and acknowledging late loses nothing.
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(HubTemporaryError,),
    retry_backoff=2,
    retry_backoff_max=120,
    retry_jitter=True,
    max_retries=settings.HF_LOOKUP_MAX_RETRIES,
    soft_time_limit=settings.HF_LOOKUP_SOFT_TIME_LIMIT_SECONDS,
    time_limit=settings.HF_LOOKUP_TIME_LIMIT_SECONDS,
)
def hf_model_lookup_refresh(self, lookup_id: int) -> None:
    from advisor.services import LookupBusy
    from advisor.services import hf_model_lookup_refresh as refresh

    # Run in-process (no broker: local development), Celery cannot retry later without raising
    # into the caller, so one attempt is all there is and a failure is stored, never raised.
    final_attempt = self.request.is_eager or self.request.retries >= self.max_retries
    try:
        refresh(
            lookup_id=lookup_id,
            final_attempt=final_attempt,
            temporary_exceptions=(SoftTimeLimitExceeded,),
        )
    except LookupBusy as busy:
        if self.request.is_eager:
            return  # in-process, "later" would be now, again: the holder will finish it
        # A delivery that may still be alive holds the row; come back once it must be dead.
        self.apply_async(args=(lookup_id,), countdown=busy.retry_in)
    except HubTemporaryError as exc:
        if exc.retry_after is not None:
            # The Hub said when to come back (429 Retry-After); that beats our own backoff.
            raise self.retry(
                exc=exc, countdown=min(exc.retry_after, MAX_RETRY_AFTER_SECONDS)
            ) from exc
        raise
