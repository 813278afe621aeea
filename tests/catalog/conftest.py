from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "catalog" / "data"


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
