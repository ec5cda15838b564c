"""How ``tracegrade serve`` refuses to start: a port in use (either protocol) is one line naming the port and
the flag to change, exit code 2, and nothing created; listening beyond loopback without a token or TLS is
warned about, and refused with --require-auth."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tracegrade.ingest.settings import ServeSettings

_LAUNCH = "from tracegrade.cli.main import main; main()"


def _serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")}
    return subprocess.run(
        [sys.executable, "-c", _LAUNCH, "serve", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture
def busy_port():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize(("flag", "other"), [("--grpc-port", "--http-port"), ("--http-port", "--grpc-port")])
def test_a_port_in_use_is_one_clean_line_and_creates_nothing(tmp_path: Path, busy_port: int, flag, other) -> None:
    store = tmp_path / "store.duckdb"
    result = _serve("--store", str(store), flag, str(busy_port), other, "0")
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("E1")]
    assert len(lines) == 1, result.stderr  # (grpc's own C++ log line aside)
    assert f"127.0.0.1:{busy_port}" in lines[0] and flag in lines[0] and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_require_auth_refuses_a_wildcard_address_without_a_token(tmp_path: Path) -> None:
    result = _serve("--store", str(tmp_path / "s.duckdb"), "--host", "0.0.0.0", "--require-auth")
    assert result.returncode == 2
    assert "refusing to start (--require-auth)" in result.stderr and "set --token" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_exposures_name_what_is_missing_and_how_to_fix_it(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    assert ServeSettings(store=store).exposures() == []
    assert ServeSettings(store=store, host="::1").exposures() == []
    (no_token,) = ServeSettings(store=store, host="0.0.0.0").exposures()
    assert "no --token is set" in no_token and "TRACEGRADE_TOKEN" in no_token
    (clear_text,) = ServeSettings(store=store, host="10.1.2.3", token="secret").exposures()
    assert "without TLS" in clear_text and "--tls-cert and --tls-key" in clear_text
