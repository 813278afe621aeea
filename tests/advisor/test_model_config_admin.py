"""Staff add a model's config.json by upload; bad files get a clear message and store nothing."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from advisor.model_configs import find_bundled
from advisor.models import HfModelLookup, StaffModelConfig
from advisor.services import hf_model_lookup_request

pytestmark = pytest.mark.django_db
ADD = "/admin/advisor/staffmodelconfig/add/"
MISTRAL = find_bundled("mistralai/Mistral-7B-v0.1").config


def upload(admin_client, content: bytes, repo_id: str = "acme/in-house-7b", **extra):
    return admin_client.post(
        ADD,
        {
            "repo_id": repo_id,
            "source": "from the authors",
            "file": SimpleUploadedFile("config.json", content, "application/json"),
            **extra,
        },
    )


def test_staff_upload_is_validated_counted_and_stored(admin_client, admin_user):
    response = upload(admin_client, json.dumps(MISTRAL).encode())

    assert response.status_code == 302
    row = StaffModelConfig.objects.get()
    assert (row.repo_id, row.model_type, row.params_total) == (
        "acme/in-house-7b",
        "mistral",
        7_241_732_096,
    )
    assert row.config == MISTRAL
    assert row.added_by == admin_user
    listing = admin_client.get("/admin/advisor/staffmodelconfig/").content.decode()
    assert "acme/in-house-7b" in listing


def test_uploaded_config_answers_lookups_when_the_hub_cannot(
    admin_client, fake_hub, settings, django_capture_on_commit_callbacks
):
    upload(admin_client, json.dumps(MISTRAL).encode(), repo_id="acme/in-house-7b")
    settings.HF_ENDPOINT = "http://127.0.0.1:9"

    with django_capture_on_commit_callbacks(execute=True):
        lookup = hf_model_lookup_request(repo_id="acme/in-house-7b")
    lookup.refresh_from_db()

    assert lookup.status == HfModelLookup.Status.DONE
    assert lookup.metadata["config_source"] == "staff"
    assert lookup.metadata["params_total"] == 7_241_732_096
    listing = admin_client.get("/admin/advisor/hfmodellookup/").content.decode()
    assert "staff config (Hub did not answer)" in listing


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "The file is not valid JSON"),
        (b"[1, 2, 3]", "A config.json is a JSON object ({...}), not a list."),
        (b"\xff\xfe\x00junk", "The file is not UTF-8 text"),
        (
            json.dumps({**MISTRAL, "model_type": "brand_new_lm", "architectures": []}).encode(),
            "cannot count model_type &#x27;brand_new_lm&#x27;",
        ),
        (
            json.dumps({**MISTRAL, "vocab_size": 1e308}).encode(),
            "config.json field &#x27;vocab_size&#x27; is 1e+308, beyond any real model",
        ),
        (
            json.dumps({**MISTRAL, "num_hidden_layers": "32"}).encode(),
            "must be a positive integer, got &#x27;32&#x27;",
        ),
        (
            json.dumps(MISTRAL).replace('"hidden_size": 4096', '"hidden_size": NaN').encode(),
            "config.json contains NaN, which is not a JSON number.",
        ),
        (
            json.dumps({**MISTRAL, "name_or_path": "a\x00b"}).encode(),
            "config.json contains a NUL character.",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "The file is"),
        (b" " * 1_000_001, "a config.json is at most 1,000,000"),
        (("9" * 5000).encode(), "The file is not valid JSON"),
    ],
    ids=[
        "not-json",
        "list",
        "not-utf8",
        "unknown-family",
        "huge-vocab",
        "string-layers",
        "nan",
        "nul",
        "deep-nesting",
        "too-big",
        "huge-integer",
    ],
)
def test_bad_uploads_get_a_clear_message_and_store_nothing(admin_client, content, message):
    response = upload(admin_client, content)

    assert response.status_code == 200  # the form again, with the error
    page = response.content.decode()
    assert "errorlist" in page
    assert message in page
    assert StaffModelConfig.objects.count() == 0


def test_bad_repo_id_is_refused_and_nothing_is_stored(admin_client):
    response = upload(admin_client, json.dumps(MISTRAL).encode(), repo_id="https://hf.co/x/y")

    assert response.status_code == 200
    assert "not a web address" in response.content.decode()
    assert StaffModelConfig.objects.count() == 0


def test_a_second_upload_for_the_same_model_in_another_case_is_refused(admin_client):
    upload(admin_client, json.dumps(MISTRAL).encode(), repo_id="acme/in-house-7b")

    response = upload(admin_client, json.dumps(MISTRAL).encode(), repo_id="ACME/In-House-7b")

    assert response.status_code == 200
    assert "already added" in response.content.decode()
    assert StaffModelConfig.objects.count() == 1


def test_replacing_the_file_recounts_and_keeping_it_keeps_the_count(admin_client):
    upload(admin_client, json.dumps(MISTRAL).encode())
    row = StaffModelConfig.objects.get()
    change = f"/admin/advisor/staffmodelconfig/{row.pk}/change/"

    kept = admin_client.post(change, {"repo_id": row.repo_id, "source": "checked again"})
    row.refresh_from_db()
    assert kept.status_code == 302
    assert (row.source, row.params_total) == ("checked again", 7_241_732_096)

    smaller = {**MISTRAL, "num_hidden_layers": 16}
    replaced = admin_client.post(
        change,
        {
            "repo_id": row.repo_id,
            "source": "pruned",
            "file": SimpleUploadedFile("config.json", json.dumps(smaller).encode()),
        },
    )
    row.refresh_from_db()
    assert replaced.status_code == 302
    assert row.config["num_hidden_layers"] == 16
    assert row.params_total < 7_241_732_096


def test_model_config_admin_is_for_staff_only(client, django_user_model):
    django_user_model.objects.create_user("researcher", password="pw-123456789")
    client.login(username="researcher", password="pw-123456789")

    response = client.get(ADD)

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
