"""A careless and a hostile user against every entry point.

The rule: bad input gets a clear message and changes nothing, a 500 is a bug, user text is
escaped where it is shown. PostgreSQL (not SQLite) is what refuses NUL characters in text and
jsonb, so these run against the real database. The first tests pin bugs that were found and
fixed; the tables after them keep the rest of the surface honest.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from pytest_django.asserts import assertContains, assertNotContains

from advisor.models import AdvisorSession, HfModelLookup
from allocations.models import AllocationEvent, AllocationRequest, Status
from catalog.models import Accelerator, Profile, System
from tests.allocations.factories import (
    as_post,
    complete_fields,
    make_request,
    make_session,
    make_user,
)

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
NUL = "abc\x00def"
XSS = '"><img src=x onerror=alert(1)><script>alert(2)</script>'
SCRIPT = "<script>alert(2)</script>"  # fits every max_length
NIL_UUID = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
def researcher():
    return make_user()


@pytest.fixture
def researcher_client(client, researcher):
    client.force_login(researcher)
    return client


@pytest.fixture
def staff_client(client):
    client.force_login(make_user(staff=True, is_superuser=True))
    return client


def post_json(client, body: str | bytes):
    return client.post(reverse("advisor:api-estimate"), data=body, content_type="application/json")


# --- POST /api/estimate and manage.py estimate ------------------------------------------------


@pytest.mark.parametrize("model_id", ["meta-llama/Llama\x00-2", "a/b\x00"])
def test_api_model_id_with_a_nul_is_a_field_error_not_a_database_error(
    client, default_catalog, model_id
):
    # Was a 500: the id went straight into the stored-lookup query and PostgreSQL refused it.
    response = post_json(client, json.dumps({"model_id": model_id, "task": "lora"}))
    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            {
                "field": "model_id",
                "message": "A model id uses only letters, digits, '-', '_' and '.' "
                "(and one '/' between organisation and name).",
            }
        ]
    }


def test_api_model_id_that_is_a_web_address_is_named_as_such(client, default_catalog):
    response = post_json(
        client, json.dumps({"model_id": "https://huggingface.co/org/name", "task": "lora"})
    )
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "field": "model_id",
            "message": "Enter the model id, not a web address: for https://huggingface.co/org/name "
            "type org/name.",
        }
    ]


def test_api_deeply_nested_body_is_a_400_not_a_recursion_error(client):
    # Was a 500: json.loads raised RecursionError on 100,000 nested arrays (200 KB).
    response = post_json(client, b"[" * 100_000 + b"]" * 100_000)
    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            {"field": "", "message": "The body is nested too deeply to be an estimate request."}
        ]
    }


@pytest.mark.parametrize(
    "raw",
    [
        b'{"params": NaN, "task": "lora"}',
        b'{"params": Infinity, "task": "lora"}',
        b'{"params": 1e999, "task": "lora"}',
        b"\xff\xfe{}",
        b'"just a string"',
        b"null",
        b"[1, 2]",
    ],
)
def test_api_junk_bodies_are_400s(client, default_catalog, raw):
    response = post_json(client, raw)
    assert response.status_code == 400
    assert response.json()["errors"]


def test_estimate_command_refuses_a_file_that_is_not_utf8(tmp_path):
    # Was a UnicodeDecodeError traceback.
    path = tmp_path / "request.json"
    path.write_bytes(b'{"task": "lora", "params": 7\xff}')
    with pytest.raises(CommandError, match=r"request.json is not UTF-8 text \(byte 28\)\."):
        call_command("estimate", "--input", str(path), stdout=io.StringIO())


def test_estimate_command_refuses_absurd_nesting(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CommandError, match="nested too deeply to be a request"):
        call_command("estimate", "--input", str(path), stdout=io.StringIO())


def test_estimate_command_model_id_with_a_nul_is_bad_input(tmp_path, default_catalog):
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"task": "lora", "model_id": "org/na\x00me"}))
    with pytest.raises(CommandError, match=r"Bad input:\n  model_id: A model id uses only"):
        call_command("estimate", "--input", str(path), stdout=io.StringIO())


# --- manage.py load_catalog -------------------------------------------------------------------


def test_load_catalog_refuses_a_file_that_is_not_utf8(tmp_path):
    # Was a UnicodeDecodeError traceback.
    path = tmp_path / "latin1.json"
    path.write_bytes('{"profile": {"name": "caf\u00e9"}}'.encode("latin-1"))  # é is byte 25
    with pytest.raises(CommandError, match=r"latin1.json: not UTF-8 text \(byte 25\)"):
        call_command("load_catalog", str(path), stdout=io.StringIO())
    assert not Profile.objects.exists()


def test_load_catalog_refuses_a_nul_character_and_writes_nothing(tmp_path, default_catalog):
    # Was a DataError traceback halfway through the load (the lookup by name hit PostgreSQL).
    from catalog.services import DATA_DIR

    doc = json.loads((DATA_DIR / "default.json").read_text())
    doc["systems"][0]["display_name"] = "Basker\x00ville"
    path = tmp_path / "nul.json"
    path.write_text(json.dumps(doc))
    before = list(System.objects.order_by("name").values_list("name", "display_name"))
    with pytest.raises(CommandError, match=r"nul.json: systems\[0\].*contains a NUL character"):
        call_command("load_catalog", str(path), stdout=io.StringIO())
    assert list(System.objects.order_by("name").values_list("name", "display_name")) == before


def test_load_catalog_refuses_absurd_nesting(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CommandError, match="deep.json: nested too deeply to be a catalog"):
        call_command("load_catalog", str(path), stdout=io.StringIO())


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b"null", b'{"profile": 5}'])
def test_load_catalog_malformed_files_are_command_errors(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(CommandError, match="bad.json: "):
        call_command("load_catalog", str(path), stdout=io.StringIO())
    assert not Profile.objects.exists()


def test_lookup_model_command_refuses_a_nul(db):
    with pytest.raises(CommandError, match="is not a valid model id"):
        call_command("lookup_model", "org/na\x00me", stdout=io.StringIO())
    assert not HfModelLookup.objects.exists()


# --- Allocation requests ----------------------------------------------------------------------


def test_tampered_facility_with_a_nul_is_refused_on_create(researcher_client, researcher):
    # Was a 500: the page's trial hint looked the raw posted facility up in the database.
    session = make_session(user=researcher)
    response = researcher_client.post(
        reverse("allocations:request-create", args=[session.pk]),
        as_post(complete_fields(facility="basker\x00ville"), action="submit"),
    )
    assert response.status_code == 200
    assert response.context["form"].errors["facility"] == [
        "Select a valid choice. basker\x00ville is not one of the available choices."
    ]
    assert not AllocationRequest.objects.exists()


def test_tampered_facility_with_a_nul_is_refused_on_edit(researcher_client, researcher):
    allocation_request = make_request(researcher=researcher)
    response = researcher_client.post(
        reverse("allocations:request-edit", args=[allocation_request.pk]),
        as_post(complete_fields(facility="\x00", project_title="Changed"), action="save"),
    )
    assert response.status_code == 200
    assert "facility" in response.context["form"].errors
    allocation_request.refresh_from_db()
    assert allocation_request.project_title == "Fine-tuning Llama for clinical notes"
    assert allocation_request.facility == "baskerville"


def test_resubmit_note_with_a_nul_is_refused_and_the_request_stays_put(
    researcher_client, researcher
):
    # Was a 500: the note was read from request.POST unchecked and stored on the event.
    allocation_request = make_request(researcher=researcher, status=Status.CHANGES_REQUESTED)
    response = researcher_client.post(
        reverse("allocations:request-edit", args=[allocation_request.pk]),
        as_post(complete_fields(), action="submit", resubmit_message="see\x00this"),
    )
    assert response.status_code == 200
    assert response.context["form"].errors["resubmit_message"] == [
        "Null characters are not allowed."
    ]
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.CHANGES_REQUESTED
    assert not AllocationEvent.objects.filter(allocation_request=allocation_request).exists()


def test_resubmit_note_reaches_staff_and_is_kept_when_the_form_fails(researcher_client, researcher):
    allocation_request = make_request(researcher=researcher, status=Status.CHANGES_REQUESTED)
    url = reverse("allocations:request-edit", args=[allocation_request.pk])
    failed = researcher_client.post(
        url, as_post(complete_fields(project_title=""), action="submit", resubmit_message=XSS)
    )
    assert failed.status_code == 200
    # What was typed comes back (escaped) instead of vanishing with the failed post.
    assertContains(failed, "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;")
    assertNotContains(failed, "<img src=x")
    response = researcher_client.post(
        url, as_post(complete_fields(), action="submit", resubmit_message="Shorter run, as asked.")
    )
    assert response.status_code == 302
    event = AllocationEvent.objects.get(allocation_request=allocation_request)
    assert (event.to_status, event.message) == (Status.RESUBMITTED, "Shorter run, as asked.")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("project_title", NUL),
        ("project_title", "x" * 10_000),
        ("justification", NUL),
        ("caller_name", "x" * 10_000),
        ("pi_email", "a@b\x00.ac.uk"),
        ("service", NUL),
        ("gpu_hours", "1e309"),
        ("gpu_hours", "NaN"),
        ("gpu_hours", "99999999999999999999999"),
        ("cpu_hours", "-Infinity"),
        ("start_date", "0000-00-00"),
        ("end_date", "99999-01-01"),
        ("start_date", "2027-02-30"),
        ("allocation_kind", "\x00"),
        ("data_sensitivity", XSS),
    ],
)
def test_bad_request_form_values_get_a_message_and_save_nothing(
    researcher_client, researcher, field, value
):
    session = make_session(user=researcher)
    response = researcher_client.post(
        reverse("allocations:request-create", args=[session.pk]),
        as_post(complete_fields(**{field: value}), action="submit"),
    )
    assert response.status_code == 200
    assert response.context["form"].errors[field]
    assert not AllocationRequest.objects.exists()


def test_script_in_every_request_text_field_is_escaped_where_shown(
    researcher_client, researcher, staff_client_factory
):
    texts = dict.fromkeys(
        (
            "caller_name",
            "caller_branch",
            "project_title",
            "project_code",
            "research_area",
            "pi_name",
        ),
        SCRIPT,
    )
    allocation_request = make_request(
        researcher=researcher, status=Status.SUBMITTED, justification="J" * 40 + XSS, **texts
    )
    allocation_request.researcher.first_name = SCRIPT
    allocation_request.researcher.save()
    pages = [
        reverse("allocations:request-detail", args=[allocation_request.pk]),
        reverse("allocations:request-list"),
    ]
    staff = staff_client_factory()
    admin_pages = [
        reverse("admin:allocations_allocationrequest_changelist"),
        reverse("admin:allocations_allocationrequest_change", args=[allocation_request.pk]),
        reverse(
            "admin:allocations_allocationrequest_decide", args=[allocation_request.pk, "approve"]
        ),
        reverse("admin:allocations_allocationrequest_rerun", args=[allocation_request.pk]),
    ]
    for client, urls in ((researcher_client, pages), (staff, admin_pages)):
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, url
            assertNotContains(response, "<script>alert(2)")
            assertNotContains(response, "<img src=x")
            assertContains(response, "&lt;script&gt;alert(2)&lt;/script&gt;")


@pytest.fixture
def staff_client_factory(db):
    def make():
        client = Client()
        client.force_login(make_user(staff=True, is_superuser=True))
        return client

    return make


def test_withdrawing_an_approved_request_is_refused_with_a_message(researcher_client, researcher):
    allocation_request = make_request(researcher=researcher, status=Status.APPROVED)
    response = researcher_client.post(
        reverse("allocations:request-withdraw", args=[allocation_request.pk]), follow=True
    )
    assertContains(response, "Cannot withdraw a request that is approved.")
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.APPROVED


def test_submitting_twice_records_one_submission(researcher_client, researcher):
    allocation_request = make_request(researcher=researcher)
    url = reverse("allocations:request-edit", args=[allocation_request.pk])
    first = researcher_client.post(url, as_post(complete_fields(), action="submit"))
    replay = researcher_client.post(url, as_post(complete_fields(), action="submit"), follow=True)
    assert first.status_code == 302
    assertContains(replay, "A request that is submitted cannot be edited.")
    assert AllocationEvent.objects.filter(to_status=Status.SUBMITTED).count() == 1


# --- The admin --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "allocations/allocationrequest/?status=%00",
        "allocations/allocationrequest/?facility=ab%00c",
        "allocations/allocationrequest/?q=%00",
        "catalog/system/?status=%00",
        "advisor/hfmodellookup/?status=%00&q=x",
        "autocomplete/?term=a%00&app_label=catalog&model_name=nodetype&field_name=accelerator",
    ],
)
def test_admin_filter_with_a_nul_goes_back_to_the_plain_list_with_a_message(staff_client, query):
    # Was a 500 for list filters: the value reached PostgreSQL when the list was rendered.
    make_request(status=Status.SUBMITTED)
    url = f"/admin/{query}"
    response = staff_client.get(url)
    assert response.status_code == 302
    assert response["Location"] == url.split("?")[0]
    page = staff_client.get("/admin/")
    assertContains(
        page, "Filters and searches cannot contain NUL characters; showing the page without them."
    )


def _admin_change_post(client, url: str, **changes) -> dict:
    form = client.get(url).context["adminform"].form
    data = {}
    for name in form.fields:
        value = form[name].value()
        if value is True:
            data[name] = "on"
        elif value not in (None, False):
            data[name] = value
    data.update(changes)
    return data


def test_admin_json_field_with_an_escaped_nul_is_a_form_error(staff_client, default_catalog):
    # Was a 500: jsonb refuses \u0000, and the admin's JSON box accepts it as valid JSON.
    accelerator = Accelerator.objects.get(name="a100-40-sxm4")
    url = reverse("admin:catalog_accelerator_change", args=[accelerator.pk])
    data = _admin_change_post(staff_client, url, seed_values='["bad\\u0000value"]')
    response = staff_client.post(url, data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["seed_values"] == [
        "Remove the NUL character (\\u0000): it cannot be stored."
    ]
    accelerator.refresh_from_db()
    assert "\x00" not in json.dumps(accelerator.seed_values, ensure_ascii=False)


@pytest.mark.parametrize(
    ("decision", "data", "field"),
    [
        ("approve", {"granted_gpu_hours": "1e309"}, "granted_gpu_hours"),
        ("approve", {"granted_gpu_hours": "NaN"}, "granted_gpu_hours"),
        ("approve", {"granted_gpu_hours": "99999999999999999999999"}, "granted_gpu_hours"),
        ("approve", {"granted_gpu_hours": "0"}, "granted_gpu_hours"),
        ("approve", {"granted_gpu_hours": "-3"}, "granted_gpu_hours"),
        ("approve", {"granted_gpu_hours": "10", "message": NUL}, "message"),
        ("approve", {"granted_gpu_hours": "10", "note": NUL}, "note"),
        ("reject", {"message": NUL}, "message"),
        ("request-changes", {"message": "\x00"}, "message"),
    ],
)
def test_admin_decisions_with_bad_values_change_nothing(staff_client, decision, data, field):
    allocation_request = make_request(status=Status.SUBMITTED)
    response = staff_client.post(
        reverse(
            "admin:allocations_allocationrequest_decide", args=[allocation_request.pk, decision]
        ),
        data,
    )
    assert response.status_code == 200
    assert response.context["form"].errors[field]
    allocation_request.refresh_from_db()
    assert allocation_request.status == Status.SUBMITTED
    assert not AllocationEvent.objects.exists()


@pytest.mark.parametrize(
    "data",
    [
        {"epochs": "1e309"},
        {"epochs": "NaN"},
        {"epochs": "0"},
        {"epochs": "-1"},
        {"accelerator": NUL},
        {"precision": "\x00"},
        {"accelerator": "x" * 500},
    ],
)
def test_admin_rerun_with_bad_values_gets_a_form_error(staff_client, data):
    allocation_request = make_request(status=Status.SUBMITTED)
    response = staff_client.post(
        reverse("admin:allocations_allocationrequest_rerun", args=[allocation_request.pk]), data
    )
    assert response.status_code == 200
    assert response.context["form"].errors
    assert response.context["comparison"] is None


@pytest.mark.parametrize("data", [{"epochs": "1e308"}, {"accelerator": XSS}, {"epochs": "1e-300"}])
def test_admin_rerun_with_absurd_values_answers_with_a_message(staff_client, default_catalog, data):
    allocation_request = make_request(status=Status.SUBMITTED)
    response = staff_client.post(
        reverse("admin:allocations_allocationrequest_rerun", args=[allocation_request.pk]), data
    )
    assert response.status_code == 200
    assertNotContains(response, "<script>alert(2)")
    assert response.context["error"] or response.context["form"].errors


@pytest.mark.parametrize(
    "path",
    [
        "allocations/allocationrequest/not-a-uuid/change/",
        "allocations/allocationrequest/not-a-uuid/decide/approve/",
        f"allocations/allocationrequest/{NIL_UUID}/rerun/",
        "catalog/system/%00/change/",
        "catalog/accelerator/99999999999999999999999/change/",
        "allocations/allocationrequest/?o=999",
        "allocations/allocationrequest/?submitted_at__gte=0000-00-00",
        "allocations/allocationrequest/?p=99999",
    ],
)
def test_admin_tampered_urls_are_never_a_500(staff_client, path):
    assert staff_client.get(f"/admin/{path}").status_code in (200, 302, 404)


def test_csv_export_neutralises_formulas_in_every_text_field(staff_client):
    allocation_request = make_request(
        status=Status.SUBMITTED,
        project_title='=HYPERLINK("http://evil","x")',
        pi_name="+SUM(A1)",
        research_area="@cmd",
        caller_branch="-2+3",
        justification="\t=1+1 " + "j" * 40,
    )
    response = staff_client.post(
        reverse("admin:allocations_allocationrequest_changelist"),
        {"action": "export_csv", "_selected_action": [str(allocation_request.pk)]},
    )
    header, row = list(csv.reader(io.StringIO(response.content.decode())))
    cells = dict(zip(header, row, strict=True))
    assert cells["project_title"] == """'=HYPERLINK("http://evil","x")"""
    assert cells["pi_name"] == "'+SUM(A1)"
    assert cells["research_area"] == "'@cmd"
    assert cells["caller_branch"] == "'-2+3"
    assert cells["justification"] == "'\t=1+1 " + "j" * 40


# --- The advisor flow -------------------------------------------------------------------------


def _start(client) -> AdvisorSession:
    """A session past the chart's first question (the cloud one), on its workload questions."""
    client.post(reverse("advisor:start"))
    advisor_session = AdvisorSession.objects.latest("created_at")
    client.post(_step_url(advisor_session, "azure"), {"answer": "no"})
    return advisor_session


def _step_url(advisor_session, step, *, embed=False):
    name = "advisor:embed-step" if embed else "advisor:step"
    return reverse(name, kwargs={"session_id": advisor_session.id, "step": step})


@pytest.mark.parametrize("embed", [False, True], ids=["page", "embed"])
@pytest.mark.parametrize("headers", [{}, HX], ids=["plain", "htmx"])
@pytest.mark.parametrize(
    ("step", "value"),
    [
        ("work_kind", NUL),
        ("work_kind", "x" * 100_000),
        ("work_kind", "\uff4c\uff4f\uff52\uff41"),
        ("model", "org/na\x00me"),
        ("model", "x" * 5000),
        ("model", XSS),
        ("model", "\uff4d\uff45\uff54\uff41/llama"),
    ],
)
def test_bad_step_answers_are_refused_and_change_nothing(client, step, value, headers, embed):
    advisor_session = _start(client)
    if step == "model":
        client.post(_step_url(advisor_session, "work_kind"), {"answer": "lora"})
    advisor_session.refresh_from_db()
    before = dict(advisor_session.answers)
    response = client.post(
        _step_url(advisor_session, step, embed=embed), {"answer": value}, headers=headers
    )
    assert response.status_code == 200
    assert response.context["form"].errors["answer"]
    assertNotContains(response, "<script>alert(2)", status_code=200)
    advisor_session.refresh_from_db()
    assert advisor_session.answers == before
    assert not HfModelLookup.objects.exists()


@pytest.mark.parametrize("value", ["1e309", "NaN", "-Infinity", "-1", "0", NUL, "1" * 400])
def test_bad_numbers_are_refused_with_a_message(client, value):
    advisor_session = _start(client)
    client.post(_step_url(advisor_session, "work_kind"), {"answer": "lora"})
    client.post(_step_url(advisor_session, "model"), {"answer": ""})
    response = client.post(_step_url(advisor_session, "model_params"), {"answer": value})
    assert response.status_code == 200
    assert response.context["form"].errors["answer"]
    advisor_session.refresh_from_db()
    assert "model_params" not in advisor_session.answers


def _answer_until(client, advisor_session, target: str) -> None:
    """Plain answers (first choice, 1 for numbers, no model) until `target` is the question
    ("outcome": until the flow ends)."""
    from advisor.flowchart import load_chart

    chart = load_chart(advisor_session.chart)
    for _ in range(30):
        advisor_session.refresh_from_db()
        step = advisor_session.current_step
        if step == target or (target == "outcome" and advisor_session.completed_at):
            return
        node = chart.by_id[step]
        value = {"number": "1", "model_id": "", "date": ""}.get(
            node.type, node.choices[0].value if node.choices else ""
        )
        if step == "work_kind":
            value = "lora"
        response = client.post(_step_url(advisor_session, step), {"answer": value})
        assert response.status_code == 302, (step, value)
    raise AssertionError(f"never reached {target}")


@pytest.mark.parametrize(
    "value",
    ["0000-00-00", "99999-01-01", "2027-02-30", "31/12/2027", "2027-13-01", NUL, "x" * 5000],
)
def test_impossible_dates_are_refused_with_a_message(client, default_catalog, value):
    advisor_session = _start(client)
    _answer_until(client, advisor_session, "timeline")
    response = client.post(_step_url(advisor_session, "timeline"), {"answer": value})
    assert response.status_code == 200
    assert response.context["form"].errors["answer"]
    advisor_session.refresh_from_db()
    assert "timeline" not in advisor_session.answers


@pytest.mark.parametrize("value", ["0001-01-01", "9999-12-31"])
def test_extreme_real_dates_reach_a_result(client, default_catalog, value):
    advisor_session = _start(client)
    _answer_until(client, advisor_session, "timeline")
    response = client.post(_step_url(advisor_session, "timeline"), {"answer": value})
    assert response.status_code == 302
    advisor_session.refresh_from_db()
    assert advisor_session.answers["timeline"] == value
    _answer_until(client, advisor_session, "outcome")
    response = client.get(reverse("advisor:result", kwargs={"session_id": advisor_session.id}))
    assert response.status_code == 200


def test_non_utf8_form_bytes_are_refused_like_any_bad_answer(client):
    advisor_session = _start(client)
    response = client.post(
        _step_url(advisor_session, "work_kind"),
        data="answer=lo%FF%FEra",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 200
    assert response.context["form"].errors["answer"] == ["Choose one of the options listed."]
    advisor_session.refresh_from_db()
    assert advisor_session.answers == {"azure": "no"}


def test_thousands_of_fields_are_a_400_page(client):
    advisor_session = _start(client)
    body = "&".join(f"f{i}=x" for i in range(2000)) + "&answer=lora"
    response = client.post(
        _step_url(advisor_session, "work_kind"),
        data=body,
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 400
    assertContains(
        response, "<h1>That request could not be understood</h1>", status_code=400, html=True
    )
    advisor_session.refresh_from_db()
    assert advisor_session.answers == {"azure": "no"}


def test_a_step_answered_twice_keeps_the_second_answer(client):
    advisor_session = _start(client)
    url = _step_url(advisor_session, "work_kind")
    assert client.post(url, {"answer": "lora"}).status_code == 302
    assert client.post(url, {"answer": "qlora"}).status_code == 302
    advisor_session.refresh_from_db()
    assert advisor_session.answers == {"azure": "no", "work_kind": "qlora"}


@pytest.mark.parametrize(
    "path",
    [
        f"/a/{NIL_UUID}/step/work_kind/",
        f"/a/{NIL_UUID}/result/",
        f"/a/{NIL_UUID}/chart/",
        f"/embed/a/{NIL_UUID}/result/",
        f"/a/{NIL_UUID}/",
        "/a/not-a-uuid/step/work_kind/",
        "/lookups/99999999999999999999/",
        "/lookups/0/",
        "/no/such/page/",
    ],
)
def test_unknown_addresses_are_404_pages(client, path):
    response = client.get(path)
    assert response.status_code == 404


@pytest.mark.parametrize("page", ["", "step/work_kind/", "result/"])
def test_unknown_session_inside_the_embed_answers_in_the_frame(client, settings, page):
    # Was Django's 404 with X-Frame-Options: DENY: an empty box inside the intranet page.
    settings.EMBED_ALLOWED_ORIGINS = ["https://intranet.example.ac.uk"]
    response = client.get(f"/embed/a/{NIL_UUID}/{page}")
    assert response.status_code == 404
    assert "X-Frame-Options" not in response
    assert response["Content-Security-Policy"] == (
        "frame-ancestors 'self' https://intranet.example.ac.uk"
    )
    assertContains(response, "There is no advisor session at this address", status_code=404)
    assertContains(response, 'href="/embed/"', status_code=404)


@pytest.mark.parametrize("step", ["%00", "..%2F..%2Fetc", "x" * 300, "%3Cscript%3E"])
def test_tampered_step_names_are_404s(client, step):
    advisor_session = _start(client)
    response = client.get(f"/a/{advisor_session.id}/step/{step}/")
    assert response.status_code == 404
    assertNotContains(response, "<script>", status_code=404)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("put", "/"),
        ("delete", "/api/estimate"),
        ("patch", "/lookups/"),
        ("post", "/chart/"),
        ("post", "/catalog/"),
        ("get", "/requests/{pk}/withdraw/"),
    ],
)
def test_wrong_methods_are_405s(researcher_client, researcher, method, path):
    allocation_request = make_request(researcher=researcher)
    response = getattr(researcher_client, method)(path.format(pk=allocation_request.pk))
    assert response.status_code == 405


# --- Hub lookups, suggestions, the catalog ----------------------------------------------------


@pytest.mark.parametrize("headers", [{}, HX], ids=["plain", "htmx"])
@pytest.mark.parametrize(
    "repo_id", [NUL, XSS, "a" * 500, "\uff4d\uff45\uff54\uff41/llama", "org/name\x00"]
)
def test_bad_lookup_ids_get_a_message_and_start_nothing(client, repo_id, headers):
    response = client.post(reverse("advisor:lookup-start"), {"repo_id": repo_id}, headers=headers)
    assertContains(response, 'class="errorlist', status_code=200)
    assertContains(response, 'aria-invalid="true"')
    assertNotContains(response, "<script>alert(2)")
    assert not HfModelLookup.objects.exists()


@pytest.mark.parametrize(
    "query", ["%00%00%00", "a" * 10_000, "%ff%fe%fd", "%3Cscript%3Ealert(2)%3C/script%3E"]
)
def test_model_suggestions_survive_junk_queries(client, query, settings):
    settings.HF_ENDPOINT = "http://127.0.0.1:9"  # nothing listens: the Hub is unreachable
    response = client.get(f"/models/suggest?q={query}")
    assert response.status_code == 200
    assertNotContains(response, "<script>alert(2)")


@pytest.mark.parametrize(
    "query", ["sort=%00&profile=", "sort=-&profile=", "sort=" + "x" * 5000, "sort=%ff%fe"]
)
def test_catalog_ignores_a_junk_sort(client, default_catalog, query):
    response = client.get(f"/catalog/?{query}")
    assert response.status_code == 200
    assert response.context["sort"] == "system"


@pytest.mark.parametrize("profile", ["%00", "nope", "%3Cscript%3E", "x" * 5000])
def test_catalog_unknown_profile_is_a_404(client, default_catalog, profile):
    response = client.get(f"/catalog/?profile={profile}")
    assert response.status_code == 404
    assertNotContains(response, "<script>", status_code=404)


# --- Login ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("username", "password"),
    [
        ("ad\x00min", "x"),
        ("x" * 10_000, "x"),
        ("admin", "p\x00w"),
        (XSS, XSS),
    ],
)
def test_login_with_junk_is_refused_with_a_message(client, username, password):
    response = client.post(reverse("login"), {"username": username, "password": password})
    assert response.status_code == 200
    assert response.context["form"].errors
    assertNotContains(response, "<script>alert(2)")


@pytest.mark.parametrize(
    "next_url",
    ["javascript:alert(1)", "//evil.example/", "%00", "/%5Cevil.example/", "https://evil.example/"],
)
def test_login_never_redirects_off_site(client, researcher, settings, next_url):
    response = client.post(
        f"{reverse('login')}?next={next_url}",
        {"username": researcher.username, "password": "pw-for-tests-only"},
    )
    assert response.status_code == 302
    assert response["Location"] == settings.LOGIN_REDIRECT_URL


# --- Error pages ------------------------------------------------------------------------------


def test_404_page_is_the_sites_own(client):
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    assertContains(response, "<h1>Page not found</h1>", status_code=404, html=True)
    assertContains(response, 'href="/catalog/"', status_code=404)


def test_403_page_is_the_sites_own(client):
    # Staff without the model permission reach the review URL but may not decide.
    client.force_login(make_user(staff=True))
    allocation_request = make_request(status=Status.SUBMITTED)
    response = client.get(
        reverse(
            "admin:allocations_allocationrequest_decide", args=[allocation_request.pk, "approve"]
        )
    )
    assert response.status_code == 403
    assertContains(response, "<h1>You cannot open this page</h1>", status_code=403, html=True)


def test_400_page_is_the_sites_own(client):
    response = client.get("/", headers={"Host": "evil.example"})
    assert response.status_code == 400
    assertContains(
        response, "<h1>That request could not be understood</h1>", status_code=400, html=True
    )


def test_500_page_renders_without_any_context(rf):
    from django.views.defaults import server_error

    response = server_error(rf.get("/"))
    assert response.status_code == 500
    body = response.content.decode()
    assert "<h1>Something went wrong on our side</h1>" in body
    assert "your earlier answers are kept" in body


def test_csrf_failure_is_a_plain_403_page(db):
    client = Client(enforce_csrf_checks=True)
    response = client.post(reverse("advisor:start"))
    assert response.status_code == 403
    assertContains(response, "<h1>Your form could not be sent</h1>", status_code=403, html=True)
    assertContains(response, "reload the page", status_code=403)
    assert response["X-Frame-Options"] == "DENY"
    assert not AdvisorSession.objects.exists()


def test_csrf_failure_inside_the_embed_shows_in_the_frame_and_offers_a_new_tab(db, settings):
    # A browser that blocks third-party cookies posts from the intranet frame without the
    # CSRF cookie: the answer must be visible in the frame, not blanked by X-Frame-Options.
    settings.EMBED_ALLOWED_ORIGINS = ["https://intranet.example.ac.uk"]
    client = Client(enforce_csrf_checks=True)
    response = client.post(reverse("advisor:embed-start"))
    assert response.status_code == 403
    assert "X-Frame-Options" not in response
    assert response["Content-Security-Policy"] == (
        "frame-ancestors 'self' https://intranet.example.ac.uk"
    )
    assertContains(response, 'href="/" target="_blank"', status_code=403)
    assertContains(response, "Open the advisor in a new tab", status_code=403)
    assert not AdvisorSession.objects.exists()


def test_every_probe_left_the_database_alone(client):
    """A sweep of junk against every page at once: nothing created, nothing a 500."""
    for path in [
        "/",
        "/chart/",
        "/catalog/",
        "/lookups/",
        "/models/suggest?q=%00",
        "/requests/",
        "/accounts/login/",
    ]:
        for headers in ({}, HX):
            assert client.get(path, headers=headers).status_code < 500
    assert not AdvisorSession.objects.exists()
    assert not HfModelLookup.objects.exists()
    assert not AllocationRequest.objects.exists()


# --- Single sign-on behind the proxy ----------------------------------------------------------


@pytest.fixture
def proxy_sso(settings):
    auth = "django.contrib.auth.middleware.AuthenticationMiddleware"
    middleware = list(settings.MIDDLEWARE)
    middleware.insert(
        middleware.index(auth) + 1, "allocations.middleware.ProxyRemoteUserMiddleware"
    )
    settings.MIDDLEWARE = middleware
    settings.AUTHENTICATION_BACKENDS = [
        "allocations.backends.ProxyRemoteUserBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    settings.AUTH_REMOTE_USER_HEADER = "HTTP_X_REMOTE_USER"
    return settings


@pytest.mark.parametrize("name", ["x" * 151, "jd\x00oe", "jdoe\x1b[31m"])
def test_unusable_proxy_user_name_signs_nobody_in(client, proxy_sso, django_user_model, name):
    # Was a 500 on every page: the name went into the username column as it came.
    response = client.get("/requests/", headers={"X-Remote-User": name})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert not django_user_model.objects.exists()


def test_longest_usable_proxy_user_name_signs_in(client, proxy_sso):
    response = client.get("/requests/", headers={"X-Remote-User": "x" * 150})
    assert response.status_code == 200
    assert response.wsgi_request.user.get_username() == "x" * 150


def test_lookup_model_command_refuses_a_nul_in_the_revision(db):
    # Was a DataError traceback: the revision was stored as given.
    with pytest.raises(CommandError, match="The revision must be a branch, tag or commit sha"):
        call_command("lookup_model", "org/name", "--revision", "ma\x00in", stdout=io.StringIO())
    assert not HfModelLookup.objects.exists()
