"""Bundled config.json files of widely used open models, for lookups when the Hub does not answer.

`index.json` lists each model: its repo id (and older aliases such as `gpt2`), the file, the
count the engine gives, the published count it is checked against (tests/advisor/
test_bundled_configs.py) and where both come from, and the licence its card states. Plain
Python: the engine and the management commands can read it without Django.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DIRECTORY = Path(__file__).resolve().parent


@dataclass(frozen=True)
class BundledConfig:
    repo_id: str
    config: dict[str, Any]
    licence: str
    config_source: str
    published_params: float
    published_source: str


@functools.cache
def _index() -> dict[str, dict[str, Any]]:
    data = json.loads((DIRECTORY / "index.json").read_text(encoding="utf-8"))
    by_id: dict[str, dict[str, Any]] = {}
    for entry in data["models"]:
        for name in (entry["repo_id"], *entry.get("aliases", ())):
            by_id[name.lower()] = entry
    return by_id


def entries() -> list[dict[str, Any]]:
    """Every bundled model's index entry, in repo id order."""
    seen = {id(entry): entry for entry in _index().values()}
    return sorted(seen.values(), key=lambda entry: entry["repo_id"].lower())


def find_bundled(repo_id: str) -> BundledConfig | None:
    """The bundled config of `repo_id` (any case, or an older alias), or None."""
    entry = _index().get(repo_id.lower())
    if entry is None:
        return None
    config = json.loads((DIRECTORY / entry["file"]).read_text(encoding="utf-8"))
    return BundledConfig(
        repo_id=entry["repo_id"],
        config=config,
        licence=entry["licence"],
        config_source=entry["config_source"],
        published_params=entry["published_params"],
        published_source=entry["published_source"],
    )
