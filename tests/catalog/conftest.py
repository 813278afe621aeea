from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

DATA = Path(__file__).resolve().parents[2] / "catalog" / "data"


@pytest.fixture
def default_catalog(db):
    call_command("load_catalog", "default", stdout=io.StringIO())


@pytest.fixture
def default_data() -> dict:
    return json.loads((DATA / "default.json").read_text(encoding="utf-8"))


@pytest.fixture
def write_catalog(tmp_path):
    """Write a (modified) data document to a file and return its path."""

    def write(doc: dict, name: str = "broken.json") -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(doc), encoding="utf-8")
        return path

    return write
