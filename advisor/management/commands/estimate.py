"""python manage.py estimate --input FILE.json (or - for stdin) | --schema"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from advisor.engine import RequestError
from advisor.engine.models import EstimateRequest, EstimateResult
from advisor.estimation import estimate_run
from advisor.json_input import JsonNumberError, json_loads


class Command(BaseCommand):
    help = "Estimate memory, GPU hours and the best system for a workload given as JSON."

    def add_arguments(self, parser):
        parser.add_argument("--input", help="Request JSON file, or - to read stdin.")
        parser.add_argument(
            "--schema", action="store_true", help="Print the request and result JSON Schemas."
        )

    def handle(self, *args, **options):
        if options["schema"]:
            schemas = {
                "request": EstimateRequest.model_json_schema(),
                "result": EstimateResult.model_json_schema(),
            }
            self.stdout.write(json.dumps(schemas, indent=2))
            return
        source = options["input"]
        if not source:
            raise CommandError("Give --input FILE.json (or --input - for stdin), or --schema.")
        try:
            text = sys.stdin.read() if source == "-" else _read(source)
            data = json_loads(text)
        except JsonNumberError as exc:
            raise CommandError(f"{source} cannot be an estimate request: {exc}.") from None
        except OSError as exc:
            raise CommandError(f"Cannot read {source}: {exc.strerror}.") from None
        except UnicodeDecodeError as exc:
            raise CommandError(f"{source} is not UTF-8 text (byte {exc.start}).") from None
        except json.JSONDecodeError as exc:
            raise CommandError(f"{source} is not valid JSON: {exc}.") from None
        except RecursionError:
            raise CommandError(f"{source} is nested too deeply to be a request.") from None
        try:
            result = estimate_run(data=data)
        except RequestError as exc:
            lines = [f"{field or 'request'}: {message}" for field, message in exc.errors]
            raise CommandError("Bad input:\n  " + "\n  ".join(lines)) from None
        self.stdout.write(result.model_dump_json(indent=2))


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()
