"""`rebuild`, `import` and `build` take `serve`'s --mapping-batch-bytes (and TRACEGRADE_MAPPING_BATCH_BYTES, which
the option overrides): a smaller budget maps the same traces in more batches, each command saying how many, into
the same trajectory rows; a value that is not a size of at least 64KiB is a usage error (exit 2) before the store
is touched.

The traces are ``TRACES`` of ``SPANS`` spans with a ``PAYLOAD``-byte attribute each (some 50 KB of stored spans a
trace): the default 16MiB holds them all in one batch, 64KiB holds one of them and not two, so each is mapped alone.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from tests.support import pg_cluster
from tests.support.export_load import make_batches
from tests.support.pg_cluster import PgServer
from tracegrade.cli.main import cli
from tracegrade.ingest.decode import read_otlp_file
from tracegrade.store import TraceStore
from tracegrade.store.lake import LakeStore
from tracegrade.store.trajectories import TRAJECTORY_TABLES

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake

TRACES, SPANS, PAYLOAD = 12, 20, 2000
ENV_VAR = "TRACEGRADE_MAPPING_BATCH_BYTES"
SMALL = "64KiB"
BAD_SIZES = ["0", "-5", "lots", "16XB", "1k"]  # the last one is a size, below the least accepted


def _cli(*args: str | Path, env: Mapping[str, str | None] | None = None) -> Result:
    """One command in-process, with ``env`` on top of this process's variables (TRACEGRADE_MAPPING_BATCH_BYTES
    unset unless given)."""
    return CliRunner(env={ENV_VAR: None, **(env or {})}).invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _batches(output: str) -> int:
    """The mapping batches a command reports: rebuild's "mapped in N batch(es)", import's and build's "in N
    batch(es)"."""
    found = re.findall(r"in (\d+) batch\(es\)", output)
    assert len(found) == 1, output
    return int(found[0])


def _trajectory_rows(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every trajectory table's rows, sorted, without ``updated_at`` (when the build ran, which differs)."""
    with TraceStore(path, read_only=True) as store:
        rows = {}
        for table in TRAJECTORY_TABLES:
            columns = store.query(f"SELECT * FROM {table} LIMIT 0").columns
            kept = ", ".join(f'"{column}"' for column in columns if column != "updated_at")
            rows[table] = sorted(store.query(f"SELECT {kept} FROM {table}").rows, key=repr)
        return rows


@pytest.fixture(scope="module")
def otlp_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The traces as one OTLP/protobuf file, as the OpenTelemetry SDK's exporter encodes them."""
    path = tmp_path_factory.mktemp("otlp") / "traces.pb"
    path.write_bytes(
        encode_spans([span for trace in make_batches(TRACES, SPANS, PAYLOAD) for span in trace]).SerializeToString()
    )
    return path


@pytest.fixture(scope="module")
def built_store(otlp_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store file holding the traces and their trajectories (imported with the default budget); tests copy it."""
    path = tmp_path_factory.mktemp("built") / "store.duckdb"
    imported = _cli("import", "--store", path, otlp_file)
    assert imported.exit_code == 0, imported.output
    return path


@pytest.fixture
def store(built_store: Path, tmp_path: Path) -> Path:
    return Path(shutil.copy(built_store, tmp_path / "store.duckdb"))


def test_rebuild_with_a_smaller_budget_maps_in_more_batches_into_the_same_rows(store: Path, tmp_path: Path) -> None:
    other = Path(shutil.copy(store, tmp_path / "other.duckdb"))
    default = _cli("rebuild", "--all", "--store", store)
    small = _cli("rebuild", "--all", "--store", other, "--mapping-batch-bytes", SMALL)
    assert default.exit_code == 0 and small.exit_code == 0, default.output + small.output
    assert f"rebuilt the trajectories of {TRACES} trace(s)" in small.output
    assert _batches(default.output) == 1
    assert _batches(small.output) == TRACES  # two traces are over 64KiB: each is mapped alone
    assert _trajectory_rows(other) == _trajectory_rows(store)
    assert len(_trajectory_rows(store)["traces"]) == TRACES


def test_rebuild_reads_the_environment_variable_and_the_option_overrides_it(store: Path) -> None:
    from_env = _cli("rebuild", "--all", "--store", store, env={ENV_VAR: SMALL})
    assert from_env.exit_code == 0, from_env.output
    assert _batches(from_env.output) == TRACES
    overridden = _cli("rebuild", "--all", "--store", store, "--mapping-batch-bytes", "16MiB", env={ENV_VAR: SMALL})
    assert overridden.exit_code == 0, overridden.output
    assert _batches(overridden.output) == 1


@pytest.mark.parametrize("size", BAD_SIZES)
def test_rebuild_refuses_a_bad_size_and_leaves_the_store_as_it_was(store: Path, size: str) -> None:
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    refused = _cli("rebuild", "--all", "--store", store, f"--mapping-batch-bytes={size}")
    assert refused.exit_code == 2, refused.output
    assert "Invalid value for '--mapping-batch-bytes'" in refused.output
    assert f"'{size}' is" in refused.output and "or a unit (16MiB, 512KiB, 1GiB)" in refused.output
    assert "rebuilding" not in refused.output
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before


def test_a_bad_size_in_the_environment_is_refused_naming_the_variable(store: Path) -> None:
    refused = _cli("rebuild", "--all", "--store", store, env={ENV_VAR: "lots"})
    assert refused.exit_code == 2, refused.output
    assert "'lots' is not a size" in refused.output and f"it is the value of {ENV_VAR}" in refused.output


def test_import_maps_with_the_budget_given(otlp_file: Path, built_store: Path, tmp_path: Path) -> None:
    small = tmp_path / "small.duckdb"
    imported = _cli("import", "--store", small, "--mapping-batch-bytes", SMALL, otlp_file)
    assert imported.exit_code == 0, imported.output
    assert _batches(imported.output) == TRACES
    assert _trajectory_rows(small) == _trajectory_rows(built_store)  # imported there with the default budget

    refused = _cli("import", "--store", tmp_path / "refused.duckdb", "--mapping-batch-bytes", "16XB", otlp_file)
    assert refused.exit_code == 2 and "Invalid value for '--mapping-batch-bytes'" in refused.output
    assert not (tmp_path / "refused.duckdb").exists()


def test_build_once_maps_a_lakes_queue_with_the_budget_given(
    otlp_file: Path, pg_server: PgServer, tmp_path: Path
) -> None:
    location, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"
    with LakeStore(location, data_path=data) as lake:  # stored and queued for a build, not built
        lake.write(read_otlp_file(otlp_file)[0].spans)
    refused = _cli("build", "--store", location, "--lake-data", data, "--once", "--mapping-batch-bytes", "0")
    assert refused.exit_code == 2 and "Invalid value for '--mapping-batch-bytes'" in refused.output
    built = _cli("build", "--store", location, "--lake-data", data, "--once", "--mapping-batch-bytes", SMALL)
    assert built.exit_code == 0, built.output
    assert f"built the trajectories of {TRACES} traces" in built.output
    assert _batches(built.output) == TRACES
    with LakeStore(location, read_only=True) as lake:
        assert lake.query("SELECT count(*), min(span_count), max(span_count) FROM traces").rows == [
            (TRACES, SPANS, SPANS)
        ]
