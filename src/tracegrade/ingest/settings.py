"""Settings of ``tracegrade serve``: one validated model fed by CLI flags and ``TRACEGRADE_*`` variables."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tracegrade.env_vars import ENV_VARS, misspelled_env_vars
from tracegrade.errors import ConfigError, InvalidValueError
from tracegrade.ingest.client_address import TrustedProxies
from tracegrade.ingest.host_guard import is_loopback
from tracegrade.ingest.tokens import SCOPES, TokenTable
from tracegrade.store.database import duckdb_size_bytes
from tracegrade.store.journal import journal_directory
from tracegrade.store.lake_location import catalog_conninfo, is_lake_location
from tracegrade.store.mapping_batches import DEFAULT_MAPPING_BATCH_BYTES, MIN_MAPPING_BATCH_BYTES
from tracegrade.store.retention import RetentionPolicy
from tracegrade.timespec import parse_duration

__all__ = ["ENV_VARS", "ServeSettings", "misspelled_env_vars", "parse_byte_size"]

MIB = 1024 * 1024

MIN_STORE_MEMORY = 64 * 1000**2  # below this, DuckDB failed the receiver's checkpoints (measured at 32MB)


_SIZE = re.compile(r"^\s*(\d+)\s*(?:([kmg]i?b?|b)\s*)?$", re.IGNORECASE)  # one way to match: linear
_UNITS = {"": 1, "b": 1, "k": 1024, "m": MIB, "g": 1024 * MIB}


def parse_byte_size(value: int | str) -> int:
    """``16777216``, ``"16MiB"``, ``"512k"`` -> bytes (binary units: k = 1024)."""
    if isinstance(value, int):
        return value
    match = _SIZE.match(value)
    if match is None:
        raise ValueError(f"{value!r} is not a size; write bytes (16777216) or a unit (16MiB, 512KiB, 1GiB)")
    number, unit = match.groups()
    return int(number) * _UNITS[(unit or "")[:1].lower()]


class ServeSettings(BaseModel):
    """Everything the receiver needs; ports 0 pick free ports (the sidecar file says which)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    store: Path | str = Field(
        description="DuckDB file the spans are written to (created if missing), or a lake: ducklake:postgres:<conninfo>"
    )
    lake_data: Path | None = Field(None, description="where a lake's Parquet files go (the same path on every node)")
    journal: Path | None = Field(
        None, description="request journal directory (default <store>.journal; a lake needs one)"
    )
    host: str = Field("127.0.0.1", description="address both listeners bind to")
    grpc_port: int = Field(4317, ge=0, le=65535, description="OTLP/gRPC port")
    http_port: int = Field(4318, ge=0, le=65535, description="OTLP/HTTP port")
    token: str | None = Field(None, description="bearer token every request must carry (both protocols)")
    tokens: Path | None = Field(
        None,
        description="YAML file of tenants and their bearer tokens (tenants: {acme: [tok1, {token: tok2, scopes: "
        "[ingest]}]}); a request's token decides its tenant, its scopes "
        f"({', '.join(SCOPES)}; a plain token has all) what it may do; reloaded on SIGHUP",
    )
    auth_failure_limit: int = Field(
        10,
        ge=0,
        description="wrong credentials (tokens, UI cookies, sign-ins; the same one repeated counts once) a client "
        "address may present per --auth-failure-window, over gRPC and HTTP together, before every request from it "
        "is refused (429 / RESOURCE_EXHAUSTED with a retry delay) until that window ends; 0: no limit",
    )
    auth_failure_window: float = Field(
        60.0,
        gt=0,
        le=86_400,  # auth_throttle.MAX_WINDOW: the refusal's retry delay must be a number of seconds (inf is none)
        description="seconds of the --auth-failure-limit window, from an address's first wrong credential (at most "
        "86400, a day)",
    )
    trusted_proxies: str | None = Field(
        None,
        description="addresses or networks (comma-separated: 10.0.0.5,10.1.0.0/16) of the proxies in front of the "
        "receiver, whose X-Forwarded-For names the client --auth-failure-limit counts; unset, X-Forwarded-For is "
        "ignored and the client is the connection's peer",
    )
    tls_cert: Path | None = Field(None, description="PEM certificate chain; enables TLS on both listeners")
    tls_key: Path | None = Field(None, description="PEM private key of --tls-cert")
    max_request_bytes: int = Field(
        16 * MIB, ge=1024, description="largest request accepted, compressed and after decompression"
    )
    # A request that finds the queue full waits for room (queue_wait) rather than being sent away, so the
    # queue only has to hold the writer's next transaction (8,192 spans at most, a row group) while it
    # commits the current one. A larger queue only holds more spans in memory, at the same speed
    # (bench/RESULTS.md, bench_ingest).
    queue_spans: int = Field(10_000, ge=1, description="capacity of the write queue, in spans")
    queue_wait: float = Field(
        1.0, ge=0, description="seconds a request waits for room in a full write queue before it is refused"
    )
    # A quarter of it is committed before a checkpoint (StoreWriter.checkpoint_bytes): 24 MB still holds
    # a whole row group of 2 KB agent spans (8,192 of them are 16 MB as Arrow), so checkpoints stay on
    # row-group boundaries. A larger limit raises the peak at the same speed (bench/RESULTS.md, bench_ingest).
    store_memory_limit: str = Field(
        "96MB", description="DuckDB memory limit of the store (its buffer cache; at least 64MB)"
    )
    query_memory_limit: str = Field(
        "64MB", description="DuckDB memory that queries may use on top of --store-memory-limit (they spill beyond)"
    )
    query_timeout: float = Field(30.0, gt=0, description="seconds a query may run before it is cancelled")
    max_queries: int = Field(2, ge=1, description="queries run at once; more wait (up to --query-timeout) for a turn")
    # Each row returned is a Python object and JSON text in the receiver's memory (10,000,000 rows of one integer
    # took 2 GB): past the cap the answer says truncated, and DuckDB never produces the rest. The store commands
    # read through this endpoint when the server holds the file (grading lists every trace id), hence a cap far
    # above an ad-hoc query's needs.
    query_max_rows: int = Field(
        1_000_000, ge=1, description="rows a POST /v1/query answer holds at most; a longer result is cut (truncated)"
    )
    # Rows cap the count, not the size: 20 values of 10 MB are 200 MB of Python strings and more
    # of JSON text. The store commands' own reads (10,000 stored trajectories per grading query) stay far below.
    query_max_bytes: int = Field(
        256 * MIB,
        ge=1024,
        description="bytes of values a POST /v1/query answer holds at most (as JSON, about); a larger result is "
        "cut (truncated)",
    )
    require_auth: bool = Field(
        False, description="refuse to start without --token or --tokens, and without TLS when listening beyond loopback"
    )
    metrics_address: str | None = Field(
        None,
        description="HOST:PORT where GET /metrics is served (plain HTTP, no token) instead of on the HTTP port: its "
        "series name tenants and count their work, which keeps them off the port tenants reach",
    )
    max_inflight_requests: int = Field(32, ge=1, description="requests handled at once; more get 503 + Retry-After")
    max_inflight_per_tenant: int | None = Field(
        None,
        ge=1,
        description="export requests one tenant may have handled at once; more get 503 + Retry-After, so one "
        "tenant's flood leaves the others room; unset, half of --max-inflight-requests (rounded up) when the "
        "tokens file names two tenants or more, else no limit of its own",
    )
    shutdown_timeout: float = Field(
        30.0, gt=0, description="seconds to wait for in-flight requests on stop, then for pending trajectory rebuilds"
    )
    worker_rules: Path | None = Field(None, description="the rules.yaml of an online grading worker run in-process")
    retain: timedelta | None = Field(
        None,
        description="delete each trace (spans, log records, trajectory) once nothing of it was received for this "
        "long (30d, 12h); checked every tenth of it, at most hourly",
    )
    retain_tenants: dict[str, timedelta | None] | None = Field(
        None,
        description="tenants whose traces are kept for another time than --retain's: TENANT=DURATION pairs "
        "separated by commas (acme=7d,umbrella=forever)",
    )
    mapping_process: bool = Field(
        False,
        description="map large trajectory backlogs in a child process, off the receiver's GIL (~100 MB more)",
    )
    mapping_batch_bytes: int = Field(
        DEFAULT_MAPPING_BATCH_BYTES,
        ge=MIN_MAPPING_BATCH_BYTES,
        description="span bytes (name, attribute, event, link and resource text, and 512 a span) mapped into "
        "trajectories at once: a backlog of large traces is mapped a few at a time, a trace larger than this alone",
    )
    build_trajectories: bool = Field(
        True,
        description="build trajectories in this receiver; on a lake, --no-build-trajectories leaves them to "
        "`tracegrade build` processes (traces are queued in the catalog either way)",
    )

    @field_validator("store", mode="before")
    @classmethod
    def _store(cls, value: object) -> Path | str:
        if is_lake_location(value):
            catalog_conninfo(str(value))  # a ValueError says what a lake location looks like
            return str(value)
        return Path(str(value))

    @field_validator("retain", mode="before")
    @classmethod
    def _retain(cls, value: object) -> object:
        if value is None or isinstance(value, timedelta):
            return value
        try:
            return parse_duration(str(value), "retain")
        except InvalidValueError as exc:  # pydantic reports ValueErrors, naming the flag and its variable
            raise ValueError(str(exc).removeprefix("retain ")) from None

    @field_validator("retain_tenants", mode="before")
    @classmethod
    def _retain_tenants(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return RetentionPolicy.parse_tenants(value, "retain_tenants")
        except InvalidValueError as exc:
            raise ValueError(str(exc).removeprefix("retain_tenants: ")) from None

    def retention(self) -> RetentionPolicy | None:
        """What the receiver deletes when (``--retain``, ``--retain-tenants``); None: it keeps everything."""
        policy = RetentionPolicy(self.retain, self.retain_tenants or {})
        return policy if policy.shortest is not None else None

    @field_validator("max_request_bytes", "query_max_bytes", "mapping_batch_bytes", mode="before")
    @classmethod
    def _size(cls, value: int | str) -> int:
        return parse_byte_size(value)

    @field_validator("store_memory_limit")
    @classmethod
    def _memory_limit(cls, value: str) -> str:
        if duckdb_size_bytes(value) < MIN_STORE_MEMORY:
            raise ValueError(
                f"store memory limit {value.strip()} is too small: the receiver's store needs at least 64MB "
                "(DuckDB fails its checkpoints below that)"
            )
        return value.strip()

    @field_validator("query_memory_limit")
    @classmethod
    def _query_memory(cls, value: str) -> str:
        duckdb_size_bytes(value)  # a ValueError names the accepted forms
        return value.strip()

    @field_validator("trusted_proxies")
    @classmethod
    def _trusted_proxies(cls, value: str | None) -> str | None:
        TrustedProxies.parse(value)  # a ValueError names the entry that is no address
        return (value.strip() or None) if value is not None else None

    @field_validator("metrics_address")
    @classmethod
    def _metrics_address(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from tracegrade.evaluation.worker_endpoint import parse_listen_address

        return str(parse_listen_address(value))  # an InvalidValueError says what is wrong

    @field_validator("token")
    @classmethod
    def _token(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or any(c.isspace() for c in value)):
            raise ValueError("the bearer token must be non-empty and contain no whitespace")
        return value or None

    @model_validator(mode="after")
    def _tokens_file(self) -> ServeSettings:
        if self.tokens is not None:
            if self.token is not None:
                raise ValueError(
                    "give either --token (one tenant) or --tokens FILE (a token per tenant), not both; to keep "
                    "the --token's rows reachable, list it in the file under the tenant 'default'"
                )
            self.token_table()  # a file that does not load is refused now, with what is wrong
        return self

    def token_table(self) -> TokenTable:
        """The tenants and tokens in force: ``--tokens`` loaded now (TokensFileError if it does not load), or
        ``--token`` for the one default tenant."""
        return TokenTable.from_file(self.tokens) if self.tokens is not None else TokenTable.single(self.token)

    @property
    def auth_required(self) -> bool:
        """Every request must carry a bearer token (``--token`` or ``--tokens``)."""
        return self.token is not None or self.tokens is not None

    @model_validator(mode="after")
    def _lake_needs(self) -> ServeSettings:
        if not self.is_lake:
            if self.lake_data is not None:
                raise ValueError("--lake-data is for a lake store (--store ducklake:postgres:...), not a DuckDB file")
            if not self.build_trajectories:
                raise ValueError(
                    "--no-build-trajectories is for a lake store: a DuckDB file's trajectories are built by the "
                    "receiver that holds it (no other process can)"
                )
            return self
        if self.lake_data is None or self.journal is None:
            raise ValueError(
                "a lake store needs --lake-data PATH (its Parquet files, the same path on every node) and "
                "--journal DIR (this receiver's own request journal, on a local disk)"
            )
        return self

    @model_validator(mode="after")
    def _tls_pair(self) -> ServeSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("TLS needs both --tls-cert and --tls-key (or neither)")
        for path in (self.tls_cert, self.tls_key):
            if path is not None and not path.is_file():
                raise ValueError(f"TLS file {path} does not exist")
        return self

    def exposures(self) -> list[str]:
        """What leaves this receiver open to others, each with how to close it (empty on loopback)."""
        if is_loopback(self.host):
            return []
        found = []
        if not self.auth_required:
            found.append(
                f"--host {self.host} accepts connections from other machines but no --token is set: anyone who "
                "reaches it can send spans and query every stored trace; set --token (TRACEGRADE_TOKEN) or --tokens"
            )
        elif not self.tls_enabled:
            found.append(
                f"--host {self.host} accepts connections from other machines without TLS: the bearer token and "
                "the traces cross the network in clear text; set --tls-cert and --tls-key"
            )
        return found

    @property
    def is_lake(self) -> bool:
        """The store is a DuckLake (``ducklake:postgres:...``), not a DuckDB file."""
        return is_lake_location(self.store)

    @property
    def tls_enabled(self) -> bool:
        return self.tls_cert is not None

    @property
    def sidecar_path(self) -> Path:
        """``<store>.server.json`` (``<journal>.server.json`` for a lake): how other commands find the
        running server of this store."""
        from tracegrade.store import sidecar_path

        return sidecar_path(self.journal if self.is_lake and self.journal else self.store)

    @property
    def journal_path(self) -> Path:
        """``--journal``, else ``<store>.journal/``: the request journal that makes acknowledged exports durable."""
        return self.journal or journal_directory(self.store)

    @classmethod
    def build(cls, values: Mapping[str, object], *, source: str = "(serve options)") -> ServeSettings:
        """Validate ``values`` (None means "not given"), turning errors into one ConfigError."""
        given = {key: value for key, value in values.items() if value is not None}
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            problems = [(_where(err["loc"]), _describe(err)) for err in exc.errors()]
            raise ConfigError(source, problems) from None


def _where(location: tuple[int | str, ...]) -> str:
    """``--grpc-port (TRACEGRADE_GRPC_PORT)`` for a setting, so the user knows what to change."""
    name = str(location[0]) if location else ""
    if name in ENV_VARS:
        return f"--{name.replace('_', '-')} ({ENV_VARS[name]})"
    return ".".join(str(part) for part in location) or "settings"


def _describe(error: object) -> str:
    err = dict(error)  # type: ignore[call-overload]
    if err["type"] == "extra_forbidden":
        name = str(err["loc"][-1])
        close = difflib.get_close_matches(name, ServeSettings.model_fields, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown setting {name!r}{hint} (known: {', '.join(ServeSettings.model_fields)})"
    return str(err["msg"]).removeprefix("Value error, ")
