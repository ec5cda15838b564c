"""The settings of the limit on wrong credentials: a window that is no number of seconds and a proxy list that
does not say what it seems to are refused at start, saying which flag and what to write instead.

An infinite ``--auth-failure-window`` used to be accepted, and then every request from an address over the
limit failed with 500 (HTTP) / UNKNOWN (gRPC): the refusal's retry delay cannot be infinite.
"""

from __future__ import annotations

import http.client
import math
from pathlib import Path

import pytest

from tests.support.server_inprocess import running_server
from tests.support.server_requests import span_json, traces_proto, unique_trace_id
from tracegrade.errors import ConfigError
from tracegrade.ingest.auth_throttle import AuthThrottle
from tracegrade.ingest.client_address import TrustedProxies
from tracegrade.ingest.settings import ServeSettings

GOOD = "the-right-token-0123456789"
MAX_WINDOW = 86_400.0  # a day: the longest --auth-failure-window


@pytest.mark.parametrize("window", [math.inf, 1e300, MAX_WINDOW + 1])
def test_a_window_longer_than_a_day_is_refused_naming_the_flag(window: float) -> None:
    with pytest.raises(ConfigError, match=r"--auth-failure-window \(TRACEGRADE_AUTH_FAILURE_WINDOW\).*86400"):
        ServeSettings.build({"store": "s.duckdb", "auth_failure_window": window})
    with pytest.raises(ValueError, match="at most 86400 s"):
        AuthThrottle(3, window)


def test_the_longest_window_refuses_with_a_retry_delay_in_seconds(tmp_path: Path) -> None:
    with running_server(
        tmp_path / "store.duckdb", token=GOOD, auth_failure_limit=1, auth_failure_window=MAX_WINDOW
    ) as server:
        port = server.server.http_port
        assert port is not None
        statuses, retry_after = [], None
        for token in ("a-wrong-guess", GOOD):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"}
                connection.request("POST", "/v1/traces", traces_proto([span_json(unique_trace_id(), 0)]), headers)
                response = connection.getresponse()
                response.read()
                statuses.append(response.status)
                retry_after = response.getheader("Retry-After")
            finally:
                connection.close()
        assert statuses == [401, 429]
        assert retry_after is not None and 0 < int(retry_after) <= MAX_WINDOW


def test_a_trusted_proxy_with_bits_past_its_prefix_is_refused_with_both_readings() -> None:
    with pytest.raises(ConfigError, match=r"--trusted-proxies.*'10\.0\.0\.5/8'.*10\.0\.0\.0/8.*or 10\.0\.0\.5 for"):
        ServeSettings.build({"store": "s.duckdb", "trusted_proxies": "10.0.0.5/8"})
    assert TrustedProxies.parse("10.0.0.0/8").client_of("10.9.9.9", ["192.0.2.1"]) == "192.0.2.1"


def test_a_trusted_proxy_written_as_ipv4_mapped_ipv6_is_trusted() -> None:
    # a dual-stack listener shows an IPv4 peer as ::ffff:10.0.0.5; peers are compared as IPv4
    proxies = TrustedProxies.parse("::ffff:10.0.0.5, ::ffff:10.1.0.0/112")
    assert proxies.client_of("10.0.0.5", ["192.0.2.1"]) == "192.0.2.1"
    assert proxies.client_of("::ffff:10.1.2.3", ["192.0.2.2"]) == "192.0.2.2"
    assert proxies.client_of("10.2.0.1", ["192.0.2.3"]) == "10.2.0.1"  # not a proxy: its header is ignored
