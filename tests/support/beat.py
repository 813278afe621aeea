"""Celery beat in a subprocess, started through the production entry point (bin/start-beat)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class BeatProcess:
    def __init__(self, *, env: dict[str, str], directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self.log_path = directory / "celery-beat.log"
        self.env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "CELERY_BEAT_SCHEDULE_FILE": str(directory / "celerybeat-schedule"),
            **env,
        }
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 30) -> BeatProcess:
        log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [str(ROOT / "bin" / "start-beat"), "--max-interval", "1"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"celery beat exited:\n{self.log()}")
            if "beat: Starting..." in self.log():
                return self
            time.sleep(0.2)
        raise RuntimeError(f"celery beat did not start:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
