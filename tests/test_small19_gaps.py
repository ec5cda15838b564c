"""A refusal inside ``EXPLAIN …`` names the refused call's line and column in the text the user wrote, not in the
statement left once ``EXPLAIN`` is taken off; an ``EXPLAIN`` after a comment is read as one (it was refused as a
statement other than SELECT). (The gaps closed with it are tested beside their kin: a tenant's forget
in test_forget.py, import's note through a server in test_cli_import_remote.py, the file a failed lake write left in
test_rebuild_lake_full_disk.py.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tracegrade.errors import QueryRefused
from tracegrade.store import TraceStore

_BOMB = "repeat('x', 2000000000)"  # refused by the gate's cap on built values, naming the call's place

# (what, the query as written, where its call of repeat() is in it)
EXPLAINED: list[tuple[str, str, str]] = [
    ("plain", f"SELECT {_BOMB}", "line 1, column 8 (character 8)"),
    ("EXPLAIN", f"EXPLAIN SELECT {_BOMB}", "line 1, column 16 (character 16)"),
    ("EXPLAIN ANALYZE", f"EXPLAIN ANALYZE SELECT {_BOMB}", "line 1, column 24 (character 24)"),
    ("lower-case, spaced", f"  explain   analyse  SELECT {_BOMB}", "line 1, column 29 (character 29)"),
    ("prefix over lines", f"EXPLAIN\n  ANALYZE\n    SELECT 1, {_BOMB}", "line 3, column 15 (character 33)"),
    ("call on a later line", f"EXPLAIN ANALYZE SELECT 1,\n  {_BOMB}", "line 2, column 3 (character 29)"),
    ("after a comment line", f"-- why\nEXPLAIN SELECT {_BOMB}", "line 2, column 16 (character 23)"),
    ("after a block comment", f"/* why */ EXPLAIN SELECT {_BOMB}", "line 1, column 26 (character 26)"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TraceStore]:
    with TraceStore(tmp_path_factory.mktemp("explain") / "s.duckdb") as opened:
        yield opened


@pytest.mark.parametrize(("what", "sql", "where"), EXPLAINED, ids=[case[0] for case in EXPLAINED])
def test_a_refusal_under_explain_names_the_calls_place_in_the_query_as_written(
    store: TraceStore, what: str, sql: str, where: str
) -> None:
    with pytest.raises(QueryRefused) as refused:
        store.query(sql)
    assert str(refused.value).startswith(f"repeat() at {where} was refused: it would build"), refused.value


@pytest.mark.parametrize("sql", ["-- the plan\nEXPLAIN SELECT 1", "/* the plan */ EXPLAIN ANALYZE SELECT 1"])
def test_an_explain_after_a_comment_runs(store: TraceStore, sql: str) -> None:
    assert store.query(sql).rows
