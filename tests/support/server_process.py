"""Run ``tracegrade serve`` as a subprocess (for signal and crash tests and the benchmark)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

__all__ = ["ServerProcess"]

_LAUNCH = "from tracegrade.cli.main import main; main()"
_CHECKOUT = Path(__file__).resolve().parents[2]


class ServerProcess:
    """``tracegrade serve --store STORE`` in a child process; ports 0 mean "pick free ones".

    ``start()`` waits until ``/readyz`` answers 200 and reads the real ports from the sidecar file. The server runs
    in the store's directory, so what it writes to its working directory (the default judge cache) stays there.
    """

    def __init__(
        self,
        store: Path,
        *,
        grpc_port: int = 0,
        http_port: int = 0,
        extra_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        launch: str = _LAUNCH,
    ):
        self.store = Path(store)
        self.workdir = self.store.absolute().parent  # the server's working directory
        self.extra_env = env or {}
        self.grpc_port = grpc_port
        self.http_port = http_port
        self.extra_args = extra_args
        self.launch = launch  # Python code that runs the CLI in the child
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.store.with_name(self.store.name + ".serve.log")

    @property
    def sidecar(self) -> Path:
        return self.store.with_name(self.store.name + ".server.json")

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self, timeout: float = 90.0) -> ServerProcess:
        args = [
            sys.executable,
            "-c",
            self.launch,
            "serve",
            "--store",
            str(self.store),
            "--host",
            "127.0.0.1",
            "--grpc-port",
            str(self.grpc_port),
            "--http-port",
            str(self.http_port),
            *self.extra_args,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")} | self.extra_env
        # the checkout stays importable from the store's directory (worker rules may name a tests.support plugin)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_CHECKOUT), env.get("PYTHONPATH")]))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.workdir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tracegrade serve exited with {self.process.returncode}:\n{self.log()}")
            if self._read_sidecar() and self._ready():
                return self
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"tracegrade serve was not ready within {timeout}s:\n{self.log()}")

    def _read_sidecar(self) -> bool:
        try:
            document = json.loads(self.sidecar.read_text())
        except (OSError, ValueError):
            return False
        if document.get("pid") != self.process.pid:  # type: ignore[union-attr]
            return False
        self.http_port = int(document["http_url"].rsplit(":", 1)[1])
        self.grpc_port = int(document["grpc_target"].rsplit(":", 1)[1])
        return True

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.http_url + "/readyz", timeout=2) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: the graceful stop path. Returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: no chance to flush anything."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.kill()
