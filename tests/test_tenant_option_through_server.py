"""Through a running server the token decides the tenant, so every store command refuses ``--tenant`` there
instead of silently answering as the token's tenant while the user believes the rows are another's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli
from tests.support.server_process import ServerProcess
from tests.support.tenant_traffic import write_tokens

ACME = "acme-read-token"


@pytest.fixture(scope="module")
def served_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    workdir = tmp_path_factory.mktemp("tenant-through-server")
    tokens = write_tokens(workdir / "tokens.yaml", {"acme": [ACME], "globex": ["globex-read-token"]})
    store = workdir / "store.duckdb"
    (workdir / "config.json").write_text('{"criteria": {"contains_keywords": {"keywords": ["refund"]}}}')
    server = ServerProcess(store, extra_args=("--tokens", str(tokens))).start()
    try:
        yield store, workdir
    finally:
        assert server.terminate() == 0, server.log()


@pytest.mark.parametrize(
    "command",
    [
        ["sql", "SELECT count(*) FROM spans"],
        ["traces"],
        ["show", "0" * 32],
        ["runs"],
        ["export", "--format", "parquet", "-o", "{workdir}/parquet"],
        ["export-cases", "-o", "{workdir}/cases.json"],
        ["grade", "--config", "{workdir}/config.json", "--where", "true", "--no-record", "--out", "{workdir}/r"],
    ],
    ids=lambda command: command[0],
)
def test_tenant_is_refused_through_a_server(served_store: tuple[Path, Path], command: list[str]) -> None:
    store, workdir = served_store
    args = [part.format(workdir=workdir) for part in command]
    refused = run_cli(*args, "--store", store, "--token", ACME, "--tenant", "globex")
    assert refused.exit_code == 2, refused.output
    assert "--tenant globex does not apply through a server" in refused.stderr
    assert "Pass a token of tenant globex with --token" in refused.stderr
    # the same command without --tenant reads as the token's tenant and is not refused for it
    allowed = run_cli(*args, "--store", store, "--token", ACME)
    assert "does not apply through a server" not in allowed.stderr
