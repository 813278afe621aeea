"""Export of allocation requests for staff: CSV and JSON rows keep the catalog keys.

Cells a spreadsheet would run as a formula are neutralised (OWASP "CSV injection").
"""

from __future__ import annotations

from typing import Any

from allocations.models import AllocationRequest

# Cells a spreadsheet would run as a formula (OWASP "CSV injection").
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")

EXPORT_FIELDS = (
    "id",
    "status",
    "project_title",
    "project_code",
    "research_area",
    "research_purpose",
    "caller_name",
    "caller_branch",
    "researcher",
    "researcher_email",
    "pi_name",
    "pi_email",
    "service",
    "facility",
    "allocation_kind",
    "accelerator",
    "num_gpus",
    "gpu_hours",
    "granted_gpu_hours",
    "cpu_hours",
    "trial",
    "start_date",
    "end_date",
    "data_sensitivity",
    "facility_fields",
    "justification",
    "engine_version",
    "submitted_at",
    "decided_at",
)


def csv_safe(value: Any) -> str:
    """The cell as text, with a leading quote where a spreadsheet would see a formula."""
    text = "" if value is None else str(value)
    if text.startswith(FORMULA_PREFIXES):
        return "'" + text
    return text


def export_row(allocation_request: AllocationRequest) -> dict[str, Any]:
    row = {}
    for field in EXPORT_FIELDS:
        if field == "researcher":
            row[field] = allocation_request.researcher.get_username()
        elif field == "researcher_email":
            row[field] = allocation_request.researcher.email
        elif field == "id":
            row[field] = str(allocation_request.pk)
        elif field == "facility_fields":
            # The secure environment's own questions and answers (issue 15).
            row[field] = list(allocation_request.facility_fields or [])
        else:
            row[field] = getattr(allocation_request, field)
    return row


def facility_fields_text(answers: list[dict[str, str]]) -> str:
    """A secure environment's answers in one cell: "label: value; label: value"."""
    return "; ".join(f"{item['label']}: {item['value']}" for item in answers)
