"""Writes docs/calibration.md: the engine's error against the institute's own jobs.

    python scripts/calibration_report.py             # from the database DATABASE_URL names
    python scripts/calibration_report.py --output -  # print instead of writing the file

Reads the application's database (trial-run measurements and imported Slurm accounting), so run
it where that database is, e.g. `docker compose exec web python scripts/calibration_report.py`.
The figures are those of the admin's calibration page (allocations/calibration.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_OUTPUT = ROOT / "docs" / "calibration.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT), help="file to write, or -")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.utils import timezone

    from allocations.calibration import (
        calibration_markdown,
        calibration_points,
        calibration_report,
    )

    text = calibration_markdown(
        calibration_report(calibration_points()), generated_on=timezone.localdate()
    )
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
