"""Shared benchmark files: `manage.py load_benchmarks FILE` (JSON or CSV).

A benchmark file holds published throughput measurements that every profile shares (a GPU's
speed does not depend on the institute), each with its source:

- JSON: `{"sources": {KEY: citation}, "benchmarks": [ {...BenchmarkIn fields...} ],
  "no_measurement": [{"family", "note"}]}` (catalog/data/shared/benchmarks.json); a row's `source`
  lists source keys, stored as their citations.
- CSV: a header row of BenchmarkIn field names; `source` is the citation itself.

Every row is checked before anything is written; the first bad row is refused with the file,
the row and the field named, and nothing changes. This module reads and checks the file without
a database (the bench and the accuracy report use it); catalog.benchmarks writes it.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from pydantic import ValidationError

from catalog.data_file import display_path
from catalog.data_schema import BenchmarkIn, CatalogFileError

MAX_SOURCE = 300  # Benchmark.source


def _fail(path: Path, where: str, message: str) -> CatalogFileError:
    return CatalogFileError(f"{display_path(path)}: {where}: {message}")


def _rows_from_json(path: Path, text: str) -> list[tuple[str, dict]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(path, f"line {exc.lineno}", f"not valid JSON ({exc.msg})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise _fail(path, "(file)", 'expected an object with a "benchmarks" list')
    sources = doc.get("sources") or {}
    if not isinstance(sources, dict):
        raise _fail(path, "sources", "expected an object of key: citation")
    out = []
    for index, raw in enumerate(doc["benchmarks"]):
        label = f"benchmarks[{index}]"
        if isinstance(raw, dict) and isinstance(raw.get("name"), str):
            label += f" ({raw['name']})"
        if not isinstance(raw, dict):
            raise _fail(path, label, "expected an object")
        row = dict(raw)
        keys = [k.strip() for k in str(row.get("source", "")).split(",") if k.strip()]
        unknown = [k for k in keys if k not in sources]
        if unknown:
            raise _fail(
                path, f"{label}.source", f"unknown source key {unknown[0]!r} (add it to 'sources')"
            )
        if keys:
            row["source"] = "; ".join(sources[k] for k in keys)[:MAX_SOURCE]
        out.append((label, row))
    return out


_INTS = {
    "params",
    "num_gpus",
    "batch_size",
    "seq_len",
    "hidden_size",
    "num_layers",
    "vocab_size",
}
_FLOATS = {"tokens_per_second", "peak_memory_gb", "mfu"}
_BOOLS = {"gradient_checkpointing", "fused_loss"}


def _rows_from_csv(path: Path, text: str) -> list[tuple[str, dict]]:
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        raise _fail(path, "(file)", "no header row")
    out = []
    for number, raw in enumerate(reader, start=2):  # row 1 is the header
        label = f"row {number}"
        if raw.get("name"):
            label += f" ({raw['name']})"
        if None in raw:
            raise _fail(path, label, "more cells than the header has columns")
        row: dict = {}
        for key, value in raw.items():
            value = (value or "").strip()
            if value == "":
                continue
            if key in _INTS | _FLOATS:
                try:
                    row[key] = int(value) if key in _INTS else float(value)
                except ValueError:
                    raise _fail(path, f"{label}.{key}", f"not a number: {value!r}") from None
            elif key in _BOOLS:
                if value.lower() not in ("true", "false", "yes", "no", "1", "0"):
                    raise _fail(path, f"{label}.{key}", "expected true or false")
                row[key] = value.lower() in ("true", "yes", "1")
            else:
                row[key] = value
        out.append((label, row))
    return out


def fail(path: Path, where: str, message: str) -> CatalogFileError:
    return _fail(path, where, message)


def benchmark_file_read(path: Path) -> list[tuple[str, BenchmarkIn]]:
    """(row label, row) for every row, checked against the schema; raises CatalogFileError
    naming the file, the row and the field."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogFileError(f"{display_path(path)}: cannot be read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise CatalogFileError(f"{display_path(path)}: not UTF-8 text") from exc
    if "\x00" in text:
        raise _fail(path, "(file)", "contains a NUL character")
    if path.suffix.lower() == ".csv":
        rows = _rows_from_csv(path, text)
    elif path.suffix.lower() == ".json":
        rows = _rows_from_json(path, text)
    else:
        raise _fail(path, "(file)", "expected a .json or .csv file")
    if not rows:
        raise _fail(path, "(file)", "no benchmarks in the file")
    parsed: list[tuple[str, BenchmarkIn]] = []
    seen: set[str] = set()
    for label, row in rows:
        try:
            bench = BenchmarkIn.model_validate(row)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            field = ".".join(str(p) for p in first["loc"]) or "(row)"
            raise _fail(path, f"{label}.{field}", first["msg"]) from exc
        if bench.name in seen:
            raise _fail(path, f"{label}.name", f"duplicate name {bench.name!r}")
        seen.add(bench.name)
        parsed.append((label, bench))
    return parsed
