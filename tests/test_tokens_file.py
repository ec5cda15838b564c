"""The tokens file of ``serve --tokens``: what it maps, and a precise refusal (file, entry, fix) for each way it
can be wrong; a receiver's settings refuse a broken file before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracegrade.errors import ConfigError
from tracegrade.ingest.intake import Intake, Unauthenticated
from tracegrade.ingest.metrics import ReceiverMetrics
from tracegrade.ingest.settings import ServeSettings
from tracegrade.ingest.tokens import TokensFileError, TokenTable
from tracegrade.store.tenancy import DEFAULT_TENANT


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_each_token_names_its_tenant(tmp_path: Path) -> None:
    table = TokenTable.from_file(_file(tmp_path, "tenants:\n  acme: [a1, a2]\n  globex: g1\n"))
    assert [table.tenant_of(t) for t in ("a1", "a2", "g1", "nope")] == ["acme", "acme", "globex", None]
    assert table.tenants == ["acme", "globex"] and table.per_tenant and not table.open
    assert TokenTable.single("t").tenant_of("t") == DEFAULT_TENANT and not TokenTable.single("t").per_tenant
    assert TokenTable.single(None).open


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
        ("", "expected one key, 'tenants'"),
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
        ("tenants: [acme\n", "not valid YAML"),
    ],
)
def test_a_broken_file_is_refused_saying_where_and_how_to_fix_it(tmp_path: Path, text: str, says: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(TokensFileError) as refused:
        TokenTable.from_file(path)
    assert str(refused.value).startswith(f"tokens file {path}: ") and says in str(refused.value)


def test_serve_refuses_a_broken_file_and_both_token_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a valid tenant name"):
        ServeSettings.build({"store": tmp_path / "s.duckdb", "tokens": _file(tmp_path, "tenants: {'a b': [x]}\n")})
    good = _file(tmp_path, "tenants: {acme: [x]}\n")
    with pytest.raises(ConfigError, match="give either --token"):
        ServeSettings.build({"store": tmp_path / "s.duckdb", "tokens": good, "token": "t"})
    settings = ServeSettings.build({"store": tmp_path / "s.duckdb", "tokens": good, "host": "0.0.0.0"})
    assert settings.auth_required and not any("no --token" in e for e in settings.exposures())


async def test_the_intake_names_the_tenant_of_a_token_and_refuses_the_rest(tmp_path: Path) -> None:
    tokens = TokenTable.from_file(_file(tmp_path, "tenants: {acme: [a-token], globex: [g-token]}\n"))
    metrics = ReceiverMetrics(queue_depth=lambda: 0, inflight=lambda: 0)
    intake = Intake(None, metrics, tokens=tokens, max_inflight_requests=1, max_queue_spans=10)
    try:
        assert intake.authorize("Bearer a-token") == "acme"
        assert intake.authorize("bearer  g-token ") == "globex"
        for value in (None, "", "Bearer", "Basic a-token", "Bearer a-tokenX"):
            with pytest.raises(Unauthenticated):
                intake.authorize(value)
        intake.tokens = TokenTable.single(None)  # no token configured: everyone is the default tenant
        assert intake.authorize(None) == DEFAULT_TENANT
    finally:
        intake.close()
