"""A real PostgreSQL for the lake tests: $TRACEGRADE_TEST_PG_DSN when set (CI starts one cluster for the
whole run), else a throwaway cluster started with scripts/pg_cluster.sh for this test session.

Each test asks for a database of its own (``PgServer.new_database``), so lakes never share a catalog.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["PgServer", "PrivateCluster", "pg_server"]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pg_cluster.sh"
DSN_VARIABLE = "TRACEGRADE_TEST_PG_DSN"


def _postgres_tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class PgServer:
    dsn: str  # libpq conninfo (key=value) of a database on the server

    def conninfo(self, database: str) -> str:
        return re.sub(r"\s*\bdbname\s*=\s*\S+", "", self.dsn).strip() + f" dbname={database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        psql = _postgres_tool("psql")
        assert psql, "psql not found: install PostgreSQL (apt-get install postgresql)"
        done = subprocess.run(
            [psql, self.conninfo(database), "-v", "ON_ERROR_STOP=1", "-qtAc", sql],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def new_database(self) -> str:
        """A new, empty database; its conninfo."""
        name = f"lake_{uuid.uuid4().hex[:12]}"
        self.psql(f"CREATE DATABASE {name}")
        return self.conninfo(name)


class PrivateCluster:
    """A throwaway cluster (scripts/pg_cluster.sh) in a directory of its own, on a free port: a test that
    stops and starts PostgreSQL uses one, never the shared one."""

    def __init__(self) -> None:
        if _postgres_tool("pg_ctl") is None:
            pytest.fail(f"PostgreSQL is not installed (apt-get install postgresql) and ${DSN_VARIABLE} is not set")
        self.parent = tempfile.mkdtemp(prefix="tracegrade-pg-")
        os.chmod(self.parent, 0o711)  # the postgres user (the cluster's owner when run as root) must reach it
        self.directory = Path(self.parent) / "cluster"
        self.port = _free_port()

    def _script(self, *args: str) -> str:
        done = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"pg_cluster.sh {' '.join(args)} failed:\n{done.stderr}"
        return done.stdout

    def start(self) -> PgServer:
        """Start (or start again) the cluster; its server."""
        return PgServer(self._script("start", str(self.directory), str(self.port)).strip().splitlines()[-1])

    def stop(self) -> None:
        self._script("stop", str(self.directory))

    def remove(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "stop", str(self.directory)], capture_output=True, timeout=120)
        shutil.rmtree(self.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    dsn = os.environ.get(DSN_VARIABLE)
    if dsn:
        yield PgServer(dsn)
        return
    cluster = PrivateCluster()
    try:
        yield cluster.start()
    finally:
        cluster.remove()
