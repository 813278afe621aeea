"""A Redis server a test starts, stops and restarts itself, on its own free port.

The shared Redis on 6379 serves every test run on the machine; a test that takes Redis away
needs one nobody else uses. Data is kept in an append-only file in the test's own folder, so a
restart brings the queued tasks back, as the compose service (`--appendonly yes`) does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from config.celery import app as celery_app


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    def __init__(self, directory: Path):
        self.binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self, timeout: float = 10) -> RedisServer:
        log = (self.directory / "redis.log").open("a")
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--save",
                "",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError((self.directory / "redis.log").read_text())
            if self.ping():
                return self
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM: Redis goes away; what it holds is in the append-only file."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        deadline = time.monotonic() + 5
        while self.ping() and time.monotonic() < deadline:
            time.sleep(0.05)


@contextlib.contextmanager
def celery_broker(url: str) -> Iterator[None]:
    """Point this process's Celery app at another broker (tasks are sent, not run in-process)."""
    conf = celery_app.conf
    previous = (conf.broker_url, conf.task_always_eager)
    # Celery reads the URL from the environment first (Settings.broker_url), then the setting.
    previous_env = os.environ.get("CELERY_BROKER_URL")

    def reset_pools() -> None:
        # The app keeps its connection and producer pools; new ones follow the new URL. (Closing
        # the old ones would break kombu's process-wide pools, which are keyed by URL.)
        celery_app._pool = None
        celery_app.amqp._producer_pool = None

    conf.broker_url = url
    os.environ["CELERY_BROKER_URL"] = url
    conf.task_always_eager = False
    reset_pools()
    try:
        yield
    finally:
        conf.broker_url, conf.task_always_eager = previous
        if previous_env is None:
            os.environ.pop("CELERY_BROKER_URL", None)
        else:
            os.environ["CELERY_BROKER_URL"] = previous_env
        reset_pools()
