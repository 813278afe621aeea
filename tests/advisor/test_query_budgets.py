"""Query budgets of the advisor's pages: counts, not timings (bench/ measures speed).

These run outside a test transaction (transactional_db) so the counts are the ones production
sees: no SAVEPOINT statements that only a test's wrapping transaction would add.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

from advisor.models import AdvisorSession
from tests.support.walks import LORA_7B

pytestmark = pytest.mark.django_db(transaction=True)

HX = {"HX-Request": "true"}
# The answers before the dataset-size question, which the tests then answer.
MEASURED = [name for name, _value in LORA_7B].index("dataset_tokens")


@pytest.fixture
def halfway(client):
    """A session with half of LORA_7B answered, and the catalog built once in this process."""
    call_command("load_catalog", "default", verbosity=0)
    client.post(reverse("advisor:start"))
    advisor_session = AdvisorSession.objects.get()
    # The chart asks about Azure first (a later answer to it changes nothing here).
    for step, value in [("azure", "no"), *LORA_7B[:MEASURED]]:
        client.post(_step(advisor_session, step), {"answer": value})
    return advisor_session


def _step(advisor_session, step):
    return reverse("advisor:step", kwargs={"session_id": advisor_session.id, "step": step})


@pytest.mark.parametrize("headers", [{}, HX], ids=["plain", "htmx"])
def test_an_answer_post_takes_at_most_five_queries(
    client, halfway, headers, django_assert_max_num_queries
):
    # The advisor session, the browser's session, the catalog's stamp and one conditional
    # UPDATE of the advisor session (no transaction: no BEGIN or COMMIT either).
    step, value = LORA_7B[MEASURED]
    with django_assert_max_num_queries(5):
        response = client.post(_step(halfway, step), {"answer": value}, headers=headers)
    assert response.status_code in (200, 302)
    halfway.refresh_from_db()
    assert halfway.answers[step] == 20


def test_a_step_page_takes_at_most_three_queries(client, halfway, django_assert_max_num_queries):
    with django_assert_max_num_queries(3):  # the browser's session, the advisor session, stamp
        response = client.get(_step(halfway, LORA_7B[MEASURED][0]))
    assert response.status_code == 200


def test_the_result_page_takes_at_most_three_queries(
    client, halfway, django_assert_max_num_queries
):
    for step, value in LORA_7B[MEASURED:]:
        client.post(_step(halfway, step), {"answer": value})
    url = reverse("advisor:result", kwargs={"session_id": halfway.id})
    with django_assert_max_num_queries(3):
        response = client.get(url)
    assert response.status_code == 200
    assert b"GPU hours to request" in response.content
    # Again, from the page cache: the browser's session and the advisor session, which brings
    # the catalog's stamp along.
    with django_assert_max_num_queries(2):
        again = client.get(url)
    assert again.content.count(b"GPU hours to request") == response.content.count(
        b"GPU hours to request"
    )


def test_an_answer_saved_meanwhile_elsewhere_is_not_overwritten(client, halfway):
    """Two tabs: the page read the session, another tab saved it; this answer is refused."""
    from advisor import flow_services

    stale = AdvisorSession.objects.get(pk=halfway.pk)
    step, value = LORA_7B[MEASURED]
    flow_services.advisor_session_answer(
        advisor_session=AdvisorSession.objects.get(pk=halfway.pk), step=step, raw=value
    )
    with pytest.raises(flow_services.SessionChanged):
        flow_services.advisor_session_answer(advisor_session=stale, step=step, raw="99")
    halfway.refresh_from_db()
    assert halfway.answers[step] == 20


def test_a_step_before_any_sizing_check_reads_no_catalog(
    client, halfway, django_assert_max_num_queries
):
    # The browser's session and the advisor session: no sizing check on the path yet, so the
    # catalog's stamp is not read either.
    with django_assert_max_num_queries(2):
        response = client.get(_step(halfway, LORA_7B[MEASURED][0]))
    assert response.status_code == 200


def test_a_sizing_check_runs_the_engine_once_until_the_catalog_changes(
    client, halfway, monkeypatch
):
    from advisor import flow_decisions
    from catalog.models import CatalogVersion

    runs = []

    def counted(request, catalog):
        runs.append(request)
        return real(request, catalog)

    real = flow_decisions.estimate
    monkeypatch.setattr(flow_decisions, "estimate", counted)
    for step, value in LORA_7B[MEASURED:]:
        client.post(_step(halfway, step), {"answer": value})
    # fp16 work is weighed against V100s: the chart's sizing check runs the engine.
    client.post(_step(halfway, "precision"), {"answer": "fp16"})
    url = reverse("advisor:result", kwargs={"session_id": halfway.id})
    first = client.get(url)
    checked = len(runs)
    second = client.get(url)

    assert checked >= 1
    assert first.status_code == second.status_code == 200
    assert len(runs) == checked  # the second view reuses the check's estimate
    CatalogVersion.objects.bump()  # what every catalog write does
    assert client.get(url).status_code == 200
    assert len(runs) == checked + 1
