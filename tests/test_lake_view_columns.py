"""A tenant's guarded views on a lake list each table's columns, kept per DuckLake schema version
(``lake_view_columns``): a column another process adds to the lake (as a newer tracegrade's migration does) is in
the tenant's next query, though the columns were listed before it came."""

from __future__ import annotations

from pathlib import Path

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_schema import FIRST_COPY

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)


def test_a_column_added_after_the_columns_were_listed_is_in_a_tenants_next_query(
    pg_server: PgServer, tmp_path: Path
) -> None:
    location, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"
    with LakeStore(location, data_path=data) as store:
        span = make_span(1, 1)
        store.write([span], tenant="acme")
        store.write([make_span(2, 2)], tenant="globex")
        for _ in range(2):  # listed, then known
            assert store.query("SELECT * FROM spans", tenant="acme").columns[-1] != "added_later"
        with LakeStore(location, data_path=data) as other:  # another process on the lake migrates it
            key, order = FIRST_COPY["spans"]
            other.execute_write("ALTER TABLE spans ADD COLUMN added_later VARCHAR DEFAULT 'backfilled'")
            other.execute_write(
                "CREATE OR REPLACE VIEW lake.main.spans AS SELECT * FROM raw.spans "
                f"QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY {order}) = 1"
            )
        result = store.query("SELECT * FROM spans", tenant="acme")
        assert result.columns[-1] == "added_later"
        assert result.rows[0][result.columns.index("span_id")] == span.span_id
        assert result.rows[0][-1] == "backfilled"
        assert store.query("SELECT span_id, added_later FROM spans", tenant="acme").rows == [
            (span.span_id, "backfilled")
        ]
