"""Import Slurm accounting (sacct --json, or sacct -P --format=...) into usage records."""

from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from allocations.sacct import MAX_FILE_BYTES
from allocations.usage_services import usage_import

EXAMPLE = (
    "sacct --allusers --starttime=2026-01-01 --json > jobs.json   or   "
    "sacct --allusers -P --format=JobID,Cluster,Account,User,Partition,State,Start,End,"
    "ElapsedRaw,AllocTRES > jobs.txt"
)


class Command(BaseCommand):
    help = (
        "Import a Slurm accounting export and match its jobs to approved requests by Slurm "
        f"account and dates. Re-importing changes nothing. Export with: {EXAMPLE}"
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="the export; - reads standard input")
        parser.add_argument(
            "--cluster",
            default="",
            help="cluster name for exports without a Cluster field (sacct -P without Cluster)",
        )
        parser.add_argument(
            "--time-zone",
            default=None,
            help="the cluster's time zone, in which sacct -P prints Start/End "
            "(default: the site's TIME_ZONE)",
        )

    def handle(self, *args, **options):
        name = options["file"]
        if name == "-":
            import sys

            raw = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        else:
            path = Path(name)
            if not path.is_file():
                raise CommandError(f"{name}: no such file.")
            with path.open("rb") as handle:
                raw = handle.read(MAX_FILE_BYTES + 1)
        try:
            summary = usage_import(
                raw=raw,
                file_name=Path(name).name if name != "-" else "stdin",
                cluster=options["cluster"],
                time_zone=options["time_zone"],
            )
        except ValidationError as exc:
            problems = [m for messages in exc.message_dict.values() for m in messages]
            shown = "\n  ".join(problems[:50])
            more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
            raise CommandError(f"Nothing imported. {name}:\n  {shown}{more}") from exc
        self.stdout.write(str(summary))
        for line in summary.skipped[:20]:
            self.stdout.write(f"  left out: {line}")
        if len(summary.skipped) > 20:
            self.stdout.write(f"  ... and {len(summary.skipped) - 20} more left out")
