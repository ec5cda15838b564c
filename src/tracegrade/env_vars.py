"""The ``TRACEGRADE_*`` environment variables tracegrade knows, and the check that refuses a misspelt one.

Every command runs the check (the ``tracegrade`` group's callback): a typo such as ``TRACEGRADE_STOER``
would otherwise be ignored silently, and ``import`` would fill ``./tracegrade.duckdb`` instead of the store
meant. Only near misses of a known name are refused, so unrelated variables that happen to share the
prefix are left alone. Kept free of heavy imports: the check runs before every command, ``--help`` included.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

__all__ = ["ENV_VARS", "KNOWN_ENV_VARS", "misspelled_env_vars"]

# serve's setting name -> environment variable (also the click ``envvar`` of the matching flag, and of the
# same option on other commands: --store, --lake-data, --token)
ENV_VARS: dict[str, str] = {
    "store": "TRACEGRADE_STORE",
    "lake_data": "TRACEGRADE_LAKE_DATA",
    "journal": "TRACEGRADE_JOURNAL",
    "host": "TRACEGRADE_HOST",
    "grpc_port": "TRACEGRADE_GRPC_PORT",
    "http_port": "TRACEGRADE_HTTP_PORT",
    "token": "TRACEGRADE_TOKEN",
    "tokens": "TRACEGRADE_TOKENS",
    "auth_failure_limit": "TRACEGRADE_AUTH_FAILURE_LIMIT",
    "auth_failure_window": "TRACEGRADE_AUTH_FAILURE_WINDOW",
    "trusted_proxies": "TRACEGRADE_TRUSTED_PROXIES",
    "tls_cert": "TRACEGRADE_TLS_CERT",
    "tls_key": "TRACEGRADE_TLS_KEY",
    "max_request_bytes": "TRACEGRADE_MAX_REQUEST_BYTES",
    "queue_spans": "TRACEGRADE_QUEUE_SPANS",
    "queue_wait": "TRACEGRADE_QUEUE_WAIT",
    "store_memory_limit": "TRACEGRADE_STORE_MEMORY_LIMIT",
    "max_inflight_requests": "TRACEGRADE_MAX_INFLIGHT_REQUESTS",
    "max_inflight_per_tenant": "TRACEGRADE_MAX_INFLIGHT_PER_TENANT",
    "shutdown_timeout": "TRACEGRADE_SHUTDOWN_TIMEOUT",
    "worker_rules": "TRACEGRADE_WORKER_RULES",
    "retain": "TRACEGRADE_RETAIN",
    "retain_tenants": "TRACEGRADE_RETAIN_TENANTS",
    "mapping_process": "TRACEGRADE_MAPPING_PROCESS",
    "mapping_batch_bytes": "TRACEGRADE_MAPPING_BATCH_BYTES",
    "build_trajectories": "TRACEGRADE_BUILD_TRAJECTORIES",
    "query_timeout": "TRACEGRADE_QUERY_TIMEOUT",
    "max_queries": "TRACEGRADE_MAX_QUERIES",
    "query_memory_limit": "TRACEGRADE_QUERY_MEMORY_LIMIT",
    "query_max_rows": "TRACEGRADE_QUERY_MAX_ROWS",
    "query_max_bytes": "TRACEGRADE_QUERY_MAX_BYTES",
    "require_auth": "TRACEGRADE_REQUIRE_AUTH",
    "metrics_address": "TRACEGRADE_METRICS_ADDRESS",
}

# Read outside serve's settings; known, so that neither they nor a name close to them is taken for a typo.
_ELSEWHERE = (
    "TRACEGRADE_TENANT",  # --tenant of the store commands (cli/store_access.py)
    "TRACEGRADE_COMPILE",  # setup.py: build the mypyc-compiled modules or not
    "TRACEGRADE_BUILD",  # setup.py, set by build_backend/: which build this is
    "TRACEGRADE_TEST_PG_DSN",  # the test suite's PostgreSQL cluster (.ci/run)
    "TRACEGRADE_LOADGEN",  # bench/: the load generator's path
    "TRACEGRADE_IMAGE",  # deploy/compose.yaml
    "TRACEGRADE_CATALOG_PASSWORD",  # deploy/compose.yaml
    "TRACEGRADE_TOKENS_FILE",  # deploy/compose.yaml
)
KNOWN_ENV_VARS: frozenset[str] = frozenset(ENV_VARS.values()) | frozenset(_ELSEWHERE)


def misspelled_env_vars(environ: Mapping[str, str]) -> list[str]:
    """One message per ``TRACEGRADE_*`` variable that looks like a typo of a known one, with the suggestion."""
    problems = []
    for name in sorted(environ):
        if name.startswith("TRACEGRADE_") and name not in KNOWN_ENV_VARS:
            close = difflib.get_close_matches(name, KNOWN_ENV_VARS, n=1, cutoff=0.85)
            if close:
                problems.append(f"unknown environment variable {name}; did you mean {close[0]}?")
    return problems
