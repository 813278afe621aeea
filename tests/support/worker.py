"""A real Celery worker process for the integration tests (eager mode is not a test of a task)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def database_url(settings_dict: dict) -> str:
    user = settings_dict.get("USER") or "postgres"
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{password}" if password else user
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{auth}@{host}:{port}/{settings_dict['NAME']}"


class WorkerProcess:
    """`celery worker` in a subprocess, on the test run's own queue.

    bin/dev test gives each run a unique CELERY_TASK_DEFAULT_QUEUE, so parallel runs on one Redis
    never take each other's tasks.
    """

    def __init__(
        self, *, database_url: str, broker_url: str, queue: str, log_dir: Path, extra_env=None
    ):
        self.queue = queue
        self.name = f"worker-{uuid.uuid4().hex[:8]}"
        self.log_path = log_dir / f"celery-{self.name}.log"
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": broker_url,
            "CELERY_TASK_DEFAULT_QUEUE": self.queue,
            "DJANGO_DB_CONN_MAX_AGE": "0",
            "PYTHONUNBUFFERED": "1",
            # bin/start-worker runs `celery` from PATH: this interpreter's environment.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            **(extra_env or {}),
        }
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self, timeout: float = 60) -> None:
        self.starts += 1
        log = self.log_path.open("a")
        log.write(f"\n--- start #{self.starts} ---\n")
        log.flush()
        self.process = subprocess.Popen(
            # The production entry point (docker-compose "worker"), one process, our queue.
            [
                str(ROOT / "bin" / "start-worker"),
                "--pool=solo",
                "-Q",
                self.queue,
                "--without-gossip",
                "--without-mingle",
                "--hostname",
                f"{self.name}-{self.starts}@localhost",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        marker = f"{self.name}-{self.starts}@localhost ready."
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Celery worker exited:\n{self.log()}")
            if marker in self.log():
                return
            time.sleep(0.2)
        raise RuntimeError(f"the Celery worker did not become ready:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: the worker dies mid-task, with no chance to acknowledge or clean up."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
