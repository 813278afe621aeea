"""Reading and checking a catalog data file (catalog/data/<profile>.json): the JSON read, NUL
characters refused, the document validated against catalog.data_schema, then the references
and uniqueness that one record alone cannot check. Every failure is a CatalogFileError whose
message names the file, the entry and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from catalog.data_schema import CatalogFile, CatalogFileError


def _entry_label(raw: Any, loc: tuple[Any, ...]) -> str:
    """`systems[3] (jade2).node_types[0].gpus_per_node` from a pydantic location."""
    parts: list[str] = []
    node = raw
    for depth, item in enumerate(loc):
        if isinstance(item, int):
            parts[-1] = f"{parts[-1]}[{item}]" if parts else f"[{item}]"
            node = node[item] if isinstance(node, list) and item < len(node) else None
            # Top-level entries carry their name (a charge rate: its accelerator), so the
            # message says which one.
            key = "accelerator" if loc[0] == "charge_rates" else "name"
            label = node.get(key) if isinstance(node, dict) else None
            if depth == 1 and isinstance(label, str):
                parts[-1] += f" ({label})"
        else:
            parts.append(str(item))
            node = node.get(item) if isinstance(node, dict) else None
    return ".".join(parts)


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _fail(path: Path, raw: Any, loc: tuple[Any, ...], message: str) -> CatalogFileError:
    where = _entry_label(raw, loc) if loc else "(file)"
    return CatalogFileError(f"{display_path(path)}: {where}: {message}")


def _source_keys(value: str) -> list[str]:
    return [key.strip() for key in value.split(",") if key.strip()]


def _cross_check(doc: CatalogFile, raw: Any, path: Path) -> None:
    """References and uniqueness that one record alone cannot check."""

    def unique(items: list[Any], field: str, base: tuple[Any, ...]) -> None:
        seen: set[str] = set()
        for index, item in enumerate(items):
            key = getattr(item, field)
            if key in seen:
                raise _fail(path, raw, (*base, index, field), f"duplicate name {key!r}")
            seen.add(key)

    def cited(value: str, loc: tuple[Any, ...]) -> None:
        for key in _source_keys(value):
            if key not in doc.sources:
                raise _fail(path, raw, loc, f"unknown source key {key!r} (add it to 'sources')")

    unique(doc.accelerators, "name", ("accelerators",))
    unique(doc.systems, "name", ("systems",))
    unique(doc.benchmarks, "name", ("benchmarks",))
    accelerators = {acc.name for acc in doc.accelerators}
    systems = {system.name for system in doc.systems}

    for i, acc in enumerate(doc.accelerators):
        cited(acc.source, ("accelerators", i, "source"))
        for j, seed in enumerate(acc.seed_values):
            cited(seed.source, ("accelerators", i, "seed_values", j, "source"))
    for i, system in enumerate(doc.systems):
        base = ("systems", i)
        cited(system.source, (*base, "source"))
        if system.tooling_source:
            cited(system.tooling_source, (*base, "tooling_source"))
        if system.tooling and not system.tooling_source:
            raise _fail(path, raw, (*base, "tooling_source"), "a tooling matrix needs a source")
        if system.currency_value is not None:
            currency_value(system, raw, path, base, cited)
        unique(system.node_types, "name", (*base, "node_types"))
        unique(system.partitions, "name", (*base, "partitions"))
        node_names = set()
        for j, node_type in enumerate(system.node_types):
            loc = (*base, "node_types", j)
            cited(node_type.source, (*loc, "source"))
            if node_type.accelerator not in accelerators:
                raise _fail(
                    path,
                    raw,
                    (*loc, "accelerator"),
                    f"unknown accelerator {node_type.accelerator!r} (not in this file's "
                    "accelerators)",
                )
            node_names.add(node_type.name)
        for j, partition in enumerate(system.partitions):
            loc = (*base, "partitions", j)
            cited(partition.source, (*loc, "source"))
            for k, name in enumerate(partition.node_types):
                if name not in node_names:
                    raise _fail(
                        path,
                        raw,
                        (*loc, "node_types", k),
                        f"unknown node type {name!r} (not in this system's node_types)",
                    )
    unique_charge_rates(doc, raw, path)
    for i, rate in enumerate(doc.charge_rates):
        loc = ("charge_rates", i)
        cited(rate.source, (*loc, "source"))
        if rate.accelerator not in accelerators:
            raise _fail(
                path, raw, (*loc, "accelerator"), f"unknown accelerator {rate.accelerator!r}"
            )
    for i, bench in enumerate(doc.benchmarks):
        loc = ("benchmarks", i)
        cited(bench.source, (*loc, "source"))
        if bench.accelerator not in accelerators:
            raise _fail(
                path, raw, (*loc, "accelerator"), f"unknown accelerator {bench.accelerator!r}"
            )
        if bench.system is not None and bench.system not in systems:
            raise _fail(path, raw, (*loc, "system"), f"unknown system {bench.system!r}")


def currency_value(system, raw: Any, path: Path, base: tuple, cited) -> None:
    """A conversion names the system's currency it converts from and another to convert to."""
    loc = (*base, "currency_value")
    cited(system.currency_value.source, (*loc, "source"))
    if not system.currency:
        raise _fail(
            path, raw, (*base, "currency"), "a currency_value needs the currency it converts from"
        )
    if system.currency_value.currency == system.currency:
        raise _fail(
            path,
            raw,
            (*loc, "currency"),
            f"converts {system.currency} to itself; give its value in another currency",
        )


def unique_charge_rates(doc: CatalogFile, raw: Any, path: Path) -> None:
    seen: set[str] = set()
    for index, rate in enumerate(doc.charge_rates):
        if rate.accelerator in seen:
            raise _fail(
                path,
                raw,
                ("charge_rates", index, "accelerator"),
                f"a second charge rate for {rate.accelerator!r} (one per accelerator)",
            )
        seen.add(rate.accelerator)


def _nul_location(value: Any, loc: tuple) -> tuple | None:
    """Where the first NUL character is, in a key or a string value, else None."""
    if isinstance(value, str):
        return loc if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in key:
                return loc
            found = _nul_location(item, (*loc, key))
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _nul_location(item, (*loc, index))
            if found is not None:
                return found
    return None


def validate_catalog_file(path: Path) -> CatalogFile:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogFileError(f"{display_path(path)}: cannot be read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise CatalogFileError(
            f"{display_path(path)}: not UTF-8 text (byte {exc.start}); save it as UTF-8 JSON"
        ) from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CatalogFileError(
            f"{display_path(path)}: not valid JSON (line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg})"
        ) from exc
    except RecursionError as exc:
        raise CatalogFileError(f"{display_path(path)}: nested too deeply to be a catalog") from exc
    nul_at = _nul_location(raw, ())
    if nul_at is not None:
        # PostgreSQL text cannot hold NUL: refuse here, before any write, with the place named.
        raise _fail(path, raw, nul_at, "contains a NUL character (\\u0000)")
    try:
        doc = CatalogFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise _fail(path, raw, tuple(first["loc"]), first["msg"]) from exc
    _cross_check(doc, raw, path)
    return doc
