"""`python manage.py lookup_model ORG/NAME`: the web flow's lookup, run here, printed as JSON."""

from __future__ import annotations

import json
import time

from django.core.management.base import BaseCommand, CommandError

from advisor import hub
from advisor.models import HfModelLookup
from advisor.services import LookupBusy, hf_model_lookup_refresh, hf_model_lookup_request


class Command(BaseCommand):
    help = (
        "Look a model up on the Hugging Face Hub (HF_ENDPOINT, token from HF_TOKEN) with the "
        "same service the web flow uses, and print the stored result as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("repo_id", help="Hub model id, e.g. meta-llama/Llama-3.2-1B")
        parser.add_argument("--revision", default="main", help="branch, tag or commit sha")

    def handle(self, *args, repo_id: str, revision: str, **options):
        try:
            lookup = hf_model_lookup_request(repo_id=repo_id, revision=revision)
        except hub.InvalidRepoIdError as exc:
            raise CommandError(f"{repo_id!r} is not a valid model id: {exc.message}") from exc
        # With a broker the request only enqueued the task; run it here so the command answers
        # now (a no-op if the worker already has it, since the claim is conditional).
        lookup.refresh_from_db()
        if lookup.in_flight:
            try:
                hf_model_lookup_refresh(lookup_id=lookup.pk, final_attempt=True)
            except LookupBusy as busy:
                # A worker holds it: wait for its answer rather than ask the Hub twice.
                deadline = time.monotonic() + busy.retry_in
                while lookup.in_flight and time.monotonic() < deadline:
                    time.sleep(0.5)
                    lookup.refresh_from_db()
                if lookup.in_flight:
                    raise CommandError(
                        f"A worker is still looking {repo_id} up; try again shortly."
                    ) from busy
            lookup.refresh_from_db()

        self.stdout.write(json.dumps(_as_json(lookup), indent=2, sort_keys=True))
        if lookup.status == HfModelLookup.Status.FAILED:
            raise CommandError(f"{lookup.error_kind}: {lookup.message}")


def _as_json(lookup: HfModelLookup) -> dict:
    return {
        "id": lookup.pk,
        "repo_id": lookup.repo_id,
        "requested_id": lookup.requested_id,
        "revision": lookup.revision,
        "sha": lookup.sha or None,
        "status": lookup.status,
        "error_kind": lookup.error_kind or None,
        "message": lookup.message or None,
        "suggestions": lookup.suggestions,
        "attempts": lookup.attempts,
        "fetched_at": lookup.fetched_at.isoformat() if lookup.fetched_at else None,
        "metadata": lookup.metadata,
    }
