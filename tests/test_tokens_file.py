"""The tokens file of ``serve --tokens``: what it maps, and a precise refusal (file, entry, fix) for each way it
can be wrong; a receiver's settings refuse a broken file before anything starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from tests.support.server_process import ServerProcess
from tests.support.tenant_traffic import sql
from tests.support.waiting import wait_until
from tracegrade.errors import ConfigError
from tracegrade.ingest.intake import Forbidden, Intake, Overloaded, Unauthenticated
from tracegrade.ingest.metrics import ReceiverMetrics
from tracegrade.ingest.settings import ServeSettings
from tracegrade.ingest.tokens import SCOPES, Grant, TokensFileError, TokenTable, ui_session
from tracegrade.store.tenancy import DEFAULT_TENANT


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_each_token_names_its_tenant_and_a_plain_token_may_do_everything(tmp_path: Path) -> None:
    table = TokenTable.from_file(_file(tmp_path, "tenants:\n  acme: [a1, a2, a1]\n  globex: g1\n"))
    assert [table.grant_of(t) for t in ("a1", "a2", "g1", "nope")] == [
        Grant("acme", frozenset(SCOPES)),
        Grant("acme", frozenset(SCOPES)),
        Grant("globex", frozenset(SCOPES)),
        None,
    ]
    assert table.tenants == ["acme", "globex"] and table.per_tenant and not table.open
    assert TokenTable.single("t").grant_of("t") == Grant(DEFAULT_TENANT, frozenset(SCOPES))
    assert not TokenTable.single("t").per_tenant and TokenTable.single(None).open


def test_a_token_with_scopes_may_do_what_they_list(tmp_path: Path) -> None:
    text = (
        "tenants:\n  acme:\n    - {token: exporter, scopes: [ingest]}\n"
        "    - {token: analyst, scopes: [read, record]}\n    - admin\n"
        "  globex: {token: janitor, scopes: forget}\n"
    )
    table = TokenTable.from_file(_file(tmp_path, text))
    assert table.grant_of("exporter") == Grant("acme", frozenset({"ingest"}))
    assert table.grant_of("analyst") == Grant("acme", frozenset({"read", "record"}))
    assert table.grant_of("admin") == Grant("acme", frozenset(SCOPES))
    assert table.grant_of("janitor") == Grant("globex", frozenset({"forget"}))
    assert table.grant_of_session(ui_session("analyst")) == table.grant_of("analyst")


def test_a_tenant_with_a_short_token_is_named_in_a_warning(tmp_path: Path) -> None:
    long = "x" * 16
    table = TokenTable.from_file(_file(tmp_path, f"tenants:\n  acme: [{long}, short]\n  globex: [{long}y]\n"))
    warning = table.short_token_warning()
    assert warning is not None and warning.startswith("tenant(s) acme have a token of fewer than 16 characters")
    assert "secrets.token_urlsafe" in warning and "short" not in warning  # the tenant, never the token
    assert (
        TokenTable.single(long).short_token_warning() is None and TokenTable.single(None).short_token_warning() is None
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "the file is empty; a tokens file has one key, 'tenants'"),
        ("{}", "expected one key, 'tenants' (found [])"),
        ("acme: [a]\n", "expected one key, 'tenants' (found ['acme'])"),
        ("tenants: {}\n", "'tenants' must map each tenant to a list of its tokens"),
        ("tenants:\n  acme: []\n", "tenants.acme: give a list of one or more tokens"),
        ("tenants:\n  'bad name': [a]\n", "tenants: 'bad name' is not a valid tenant name"),
        ("tenants:\n  acme: ['has space']\n", "tenants.acme[0]: a token must be a non-empty string"),
        ("tenants:\n  acme: [7]\n", "tenants.acme[0]: a token must be a non-empty string"),
        (
            "tenants:\n  acme: [a]\n  globex: [b, a]\n",
            "tenants.globex[1]: this token is listed for tenant 'acme' too",
        ),
        ("tenants: [acme\n", "invalid YAML"),
        ("tenants:\n  acme: [{token: t, scopes: [write]}]\n", "tenants.acme[0].scopes: unknown scope 'write';"),
        (
            "tenants:\n  acme: [{token: t, scopes: [judges]}]\n",
            "unknown scope 'judges' (did you mean 'judge'?); the scopes are ingest, read, record, forget, purge, judge",
        ),
        ("tenants:\n  acme: [{token: t, scopes: []}]\n", "tenants.acme[0].scopes: list one or more of ingest"),
        ("tenants:\n  acme: [{token: t}]\n", "tenants.acme[0]: give a token alone, or {token: ..., scopes"),
        ("tenants:\n  acme: [{token: t, scope: [read]}]\n", "(found keys ['scope', 'token'])"),
        ("tenants:\n  acme: [{token: 'a b', scopes: [read]}]\n", "tenants.acme[0].token: a token must be"),
        (
            "tenants:\n  acme: [t, {token: t, scopes: [read]}]\n",
            "tenants.acme[1]: this token is listed twice with different scopes",
        ),
    ],
)
def test_a_broken_file_is_refused_saying_where_and_how_to_fix_it(tmp_path: Path, text: str, says: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(TokensFileError) as refused:
        TokenTable.from_file(path)
    assert str(refused.value).startswith(f"tokens file {path}: ") and says in str(refused.value)


ALL_SCOPES_BY_A_REPEATED_KEY = (
    "tenants:\n  acme:\n    - {token: aaaaaaaaaaaaaaaaaaaa1, scopes: [read],\n"
    "       scopes: [ingest, read, forget, record, judge]}\n"
)
A_TENANT_DROPPED_BY_A_REPEATED_KEY = (
    "tenants:\n  acme: [aaaaaaaaaaaaaaaaaaaa1]\n  globex: [gggggggggggggggggggg1]\n  acme: [bbbbbbbbbbbbbbbbbbbb1]\n"
)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (ALL_SCOPES_BY_A_REPEATED_KEY, "at $.tenants.acme[0].scopes: duplicate key 'scopes' (line 4, column 8)"),
        (A_TENANT_DROPPED_BY_A_REPEATED_KEY, "at $.tenants.acme: duplicate key 'acme' (line 4, column 3)"),
        ("tenants: &t\n  acme: [*t]\n", "at $.tenants.acme[0]: a recursive alias"),
    ],
)
def test_a_key_given_twice_or_a_recursive_alias_is_refused_as_every_tracegrade_file(
    tmp_path: Path, text: str, says: str
) -> None:
    """Not "the last one wins": a repeated ``scopes`` would grant every scope, a repeated tenant drop tokens."""
    path = _file(tmp_path, text)
    with pytest.raises(TokensFileError) as refused:
        TokenTable.from_file(path)
    assert str(refused.value).startswith(f"tokens file {path}: {says}")
    assert "keep one of them" in str(refused.value) or "remove the recursive alias" in str(refused.value)
    with pytest.raises(ConfigError, match=r"duplicate key|recursive alias"):
        ServeSettings.build({"store": tmp_path / "s.duckdb", "tokens": path})


def test_a_tokens_file_is_yaml_by_any_name_and_a_pipe_is_refused_without_waiting(tmp_path: Path) -> None:
    named = tmp_path / "tokens"
    named.write_text("tenants:\n  acme: [a-token]\n", encoding="utf-8")
    assert TokenTable.from_file(named).grant_of("a-token") == Grant("acme", frozenset(SCOPES))
    fifo = tmp_path / "tokens.fifo"
    os.mkfifo(fifo)
    load = f"from tracegrade.ingest.tokens import TokenTable; TokenTable.from_file({str(fifo)!r})"
    # in a child process: reading a FIFO nobody writes to would wait for ever
    done = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=60)
    assert "TokensFileError: tokens file" in done.stderr and "a FIFO (named pipe), not a regular file" in done.stderr


def test_a_reload_refuses_a_key_given_twice_and_the_tokens_in_use_stay(tmp_path: Path) -> None:
    tokens = _file(tmp_path, "tenants:\n  acme: [aaaaaaaaaaaaaaaaaaaa1]\n  globex: [gggggggggggggggggggg1]\n")
    with ServerProcess(tmp_path / "store.duckdb", extra_args=("--tokens", str(tokens))) as server:
        assert sql(server.http_url, "SELECT 1", "aaaaaaaaaaaaaaaaaaaa1").status == 200
        tokens.write_text(A_TENANT_DROPPED_BY_A_REPEATED_KEY, encoding="utf-8")
        os.kill(server.pid, signal.SIGHUP)
        wait_until(lambda: "NOT reloaded" in server.log(), "the refused reload", 30)
        assert "at $.tenants.acme: duplicate key 'acme' (line 4, column 3)" in server.log()
        for token in ("aaaaaaaaaaaaaaaaaaaa1", "gggggggggggggggggggg1"):  # the tokens in use stay
            assert sql(server.http_url, "SELECT 1", token).status == 200
        assert sql(server.http_url, "SELECT 1", "bbbbbbbbbbbbbbbbbbbb1").status == 401


def test_serve_refuses_a_broken_file_and_both_token_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a valid tenant name"):
        ServeSettings.build({"store": tmp_path / "s.duckdb", "tokens": _file(tmp_path, "tenants: {'a b': [x]}\n")})
    good = _file(tmp_path, "tenants: {acme: [x]}\n")
    with pytest.raises(ConfigError, match="give either --token"):
        ServeSettings.build({"store": tmp_path / "s.duckdb", "tokens": good, "token": "t"})
    settings = ServeSettings.build({"store": tmp_path / "s.duckdb", "tokens": good, "host": "0.0.0.0"})
    assert settings.auth_required and not any("no --token" in e for e in settings.exposures())


async def test_the_intake_names_the_tenant_of_a_token_and_refuses_the_rest(tmp_path: Path) -> None:
    path = _file(tmp_path, "tenants: {acme: [a-token], globex: [g-token, {token: g-export, scopes: [ingest]}]}\n")
    metrics = ReceiverMetrics(queue_depth=lambda: 0, inflight=lambda: 0)
    intake = Intake(None, metrics, tokens=TokenTable.from_file(path), max_inflight_requests=1, max_queue_spans=10)
    try:
        assert [intake.authorize("Bearer a-token", scope=scope) for scope in SCOPES] == ["acme"] * len(SCOPES)
        assert intake.authorize("bearer  g-token ", scope="forget") == "globex"
        assert intake.authorize("Bearer g-export", scope="ingest") == "globex"
        for scope in ("read", "record", "forget"):
            with pytest.raises(Forbidden) as refused:
                intake.authorize("Bearer g-export", scope=scope)
            assert str(refused.value) == (
                f"this token may not {SCOPES[scope]}: its scopes are ingest; use a token whose scopes include "
                f"{scope!r} (or add it to this token's scopes in {path})"
            )
        with pytest.raises(Forbidden, match="may not read the store"):
            intake.authorize_ui_session(ui_session("g-export"))
        assert intake.authorize_ui_session(ui_session("g-token")) == "globex"
        for value in (None, "", "Bearer", "Basic a-token", "Bearer a-tokenX"):
            with pytest.raises(Unauthenticated):
                intake.authorize(value, scope="ingest")
        intake.tokens = TokenTable.single(None)  # no token configured: everyone is the default tenant
        assert intake.authorize(None, scope="forget") == DEFAULT_TENANT
    finally:
        intake.close()


async def test_with_two_tenants_one_may_hold_half_the_export_slots_and_the_other_still_gets_in(tmp_path: Path) -> None:
    metrics = ReceiverMetrics(queue_depth=lambda: 0, inflight=lambda: 0)
    two = TokenTable.from_file(_file(tmp_path, "tenants: {acme: [a-token], globex: [g-token]}\n"))
    opened = object()  # admission only asks whether a store is open (a writer is set); it writes nothing
    intake = Intake(opened, metrics, tokens=two, max_inflight_requests=5, max_queue_spans=10)
    try:
        async with AsyncExitStack() as held:
            for _ in range(3):  # half of 5, rounded up
                await held.enter_async_context(intake.admit("acme"))
            with pytest.raises(Overloaded) as refused:
                await held.enter_async_context(intake.admit("acme"))
            assert refused.value.message == (
                "tenant 'acme' has 3 requests in flight, its share of the 5 this receiver handles at once; retry later"
            )
            assert refused.value.http_status == 503 and refused.value.retry_after == 1.0
            for _ in range(2):
                await held.enter_async_context(intake.admit("globex"))
            with pytest.raises(Overloaded, match="5 requests in flight"):  # the receiver's own limit, then
                await held.enter_async_context(intake.admit("globex"))
        assert intake.inflight == 0
        async with intake.admit("acme"), intake.admit("acme"), intake.admit("acme"):  # the slots came back
            pass
        intake.tokens = TokenTable.single("t")  # one tenant: every slot is its own
        assert intake.tenant_share == 5
    finally:
        intake.close()
    explicit = Intake(
        object(), metrics, tokens=two, max_inflight_requests=5, max_inflight_per_tenant=4, max_queue_spans=10
    )
    try:
        assert explicit.tenant_share == 4
    finally:
        explicit.close()
