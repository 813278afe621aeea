"""Fuzzing every entry point researchers and tools reach, bounded in time: never a 500.

Hypothesis builds bodies from the API's own JSON Schema (every request field, with values of
every JSON type, huge and tiny numbers, NUL bytes, deep nesting), raw bytes in any declared
charset, and answers to every question of the flowchart. bench/hostile_requests.py does the
same at volume against a running server.
"""

from __future__ import annotations

import io
import json
from urllib.parse import quote

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.engine.models import EstimateRequest
from advisor.models import AdvisorSession

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

REQUEST_FIELDS = sorted(EstimateRequest.model_json_schema()["properties"])
CONFIG_KEYS = [
    "model_type",
    "architectures",
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "max_position_embeddings",
    "num_local_experts",
    "tie_word_embeddings",
]
NUMBERS = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -1, 1, 2**31, 2**63, 10**15, 1e308, 1e-308, 5e-324]),
)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    NUMBERS,
    st.text(max_size=40),
    st.sampled_from(["\x00", "<script>alert(1)</script>", "meta-llama/Llama-2-7b-hf", "bf16"]),
)
JSON = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
CONFIGS = st.dictionaries(st.sampled_from(CONFIG_KEYS), st.one_of(NUMBERS, LEAVES), max_size=8)
REQUESTS = st.dictionaries(
    st.sampled_from(REQUEST_FIELDS), st.one_of(JSON, NUMBERS, CONFIGS), max_size=8
)
CHARSETS = st.sampled_from(["", "; charset=utf-8", "; charset=latin-1", "; charset=utf-16"])


@pytest.fixture
def _catalog():
    call_command("load_catalog", "default", stdout=io.StringIO())


def _client(django_settings) -> Client:
    django_settings.DEBUG = False
    return Client(raise_request_exception=False)


@pytest.mark.usefixtures("_catalog")
@FUZZ
@given(body=REQUESTS)
def test_api_answers_any_schema_shaped_request_without_a_server_error(settings, body):
    response = _client(settings).post(
        "/api/estimate", json.dumps(body), content_type="application/json"
    )
    assert response.status_code in (200, 400), (body, response.content[:500])
    assert response["Content-Type"] == "application/json"


@pytest.mark.usefixtures("_catalog")
@FUZZ
@given(raw=st.binary(max_size=300), charset=CHARSETS)
def test_api_answers_any_bytes_without_a_server_error(settings, raw, charset):
    response = _client(settings).generic(
        "POST", "/api/estimate", raw, content_type=f"application/json{charset}"
    )
    assert response.status_code < 500, (raw, response.content[:500])


@pytest.mark.usefixtures("_catalog")
@FUZZ
@given(
    step=st.sampled_from(
        [
            "work_kind",
            "model_params",
            "precision",
            "batch_size",
            "seq_len",
            "dataset_tokens",
            "epochs",
            "num_gpus",
            "timeline",
            "data_sensitivity",
            "no_such_step",
        ]
    ),
    answer=st.one_of(
        st.text(max_size=60), NUMBERS.map(str), st.sampled_from(["1e308", "-0", "nan"])
    ),
    charset=CHARSETS,
    htmx=st.booleans(),
)
def test_flow_answers_never_cause_a_server_error(settings, step, answer, charset, htmx):
    client = _client(settings)
    client.post(reverse("advisor:start"))
    advisor_session = AdvisorSession.objects.order_by("-created_at").first()
    client.post(
        reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": "azure"}),
        {"answer": "no"},
    )
    client.post(
        reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": "work_kind"}),
        {"answer": "lora"},
    )
    url = reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": step})
    body = "answer=" + quote(answer, safe="")
    encoding = "latin-1" if "latin-1" in charset else "utf-16" if "16" in charset else "utf-8"
    response = client.generic(
        "POST",
        url,
        body.encode(encoding, errors="replace"),
        content_type=f"application/x-www-form-urlencoded{charset}",
        headers={"HX-Request": "true"} if htmx else {},
    )
    assert response.status_code < 500, (step, answer, response.content[:500])


@FUZZ
@given(query=st.text(max_size=120))
def test_suggestions_and_lookups_never_cause_a_server_error(fake_hub, settings, query):
    client = _client(settings)
    assert client.get(reverse("advisor:model-suggest"), {"q": query}).status_code < 500
    assert client.post(reverse("advisor:lookup-start"), {"repo_id": query}).status_code < 500
