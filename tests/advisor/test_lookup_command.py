"""`manage.py lookup_model`: the same lookup as the web flow, printed as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from advisor.models import HfModelLookup

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_prints_the_stored_lookup_as_json(fake_hub):
    out = StringIO()

    call_command("lookup_model", "gpt2", stdout=out)

    printed = json.loads(out.getvalue())
    stored = HfModelLookup.objects.get()
    assert printed["id"] == stored.pk
    assert printed["status"] == "done"
    assert printed["repo_id"] == "openai-community/gpt2"
    assert printed["requested_id"] == "gpt2"
    assert printed["sha"] == "607a30d783dfa663caf39e06633721c8d4cfcd7e"
    assert printed["metadata"]["safetensors_parameters"] == {"F32": 137022720}
    assert printed["metadata"] == stored.metadata


@pytest.mark.django_db
def test_second_run_reuses_the_stored_answer(fake_hub):
    call_command("lookup_model", "gpt2", stdout=StringIO())
    calls = fake_hub.requests_for()

    call_command("lookup_model", "openai-community/gpt2", stdout=StringIO())

    assert fake_hub.requests_for() == calls
    assert HfModelLookup.objects.count() == 1


@pytest.mark.django_db
def test_not_found_prints_the_failure_and_exits_non_zero(fake_hub):
    out = StringIO()

    with pytest.raises(CommandError, match="not_found: No model called acme/nothing-here"):
        call_command("lookup_model", "acme/nothing-here", stdout=out)

    assert json.loads(out.getvalue())["status"] == "failed"


def test_invalid_id_exits_non_zero_with_a_clear_message():
    result = subprocess.run(
        [sys.executable, "manage.py", "lookup_model", "https://huggingface.co/gpt2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9"},
    )

    assert result.returncode == 1
    assert "is not a valid model id: Enter the model id, not a web address" in result.stderr
    assert result.stdout == ""
