"""The OTLP receiver behind ``tracegrade serve``: storage, gRPC and HTTP front ends on one asyncio loop.

Start-up binds both ports (so a port in use fails before anything is created), opens the storage (which
replays the request journal), starts both listeners and writes the ``<store>.server.json`` sidecar. While
it runs, a watch reopens the storage whenever the store fails (a full disk, an I/O error), answering
503 / UNAVAILABLE with ``Retry-After`` meanwhile, and replays the journal: nothing acknowledged is lost. After
a full disk, the in-process worker writes nothing until the disk has room (``disk_room``), so that its writes do
not fail the reopened store again.
Queries run at most ``--max-queries`` at a time, each cancelled after ``--query-timeout`` or when its
client hangs up. Stopping (SIGTERM/SIGINT or :meth:`ReceiverServer.stop`) turns readiness off, refuses
new requests (retryably), cancels running queries, lets admitted requests finish, flushes the writer,
closes the store and removes the sidecar: everything acknowledged is on disk. SIGHUP reloads the
``--tokens`` file: a file that does not load is refused (logged with what is wrong) and the tokens in use
stay.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import signal
import socket
import ssl
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from aiohttp import web

from tracegrade.errors import InvalidValueError, StoreError, TracegradeError
from tracegrade.evaluation.worker_endpoint import parse_listen_address
from tracegrade.ingest.auth_throttle import AuthThrottle
from tracegrade.ingest.body_budget import BodyBudget
from tracegrade.ingest.disk_room import DiskRoom
from tracegrade.ingest.forget_endpoint import add_forget_route
from tracegrade.ingest.grpc_services import GRPC_FLOW_CONTROL, OtlpGrpcServices, grpc_receive_limit
from tracegrade.ingest.host_guard import host_guard
from tracegrade.ingest.http_app import HttpFrontEnd
from tracegrade.ingest.intake import Intake, ShuttingDown, StoreUnavailable
from tracegrade.ingest.mcp_endpoint import add_mcp_route
from tracegrade.ingest.metrics import ReceiverMetrics
from tracegrade.ingest.metrics_listener import MetricsListener
from tracegrade.ingest.private_paths import PrivatePaths
from tracegrade.ingest.purge_endpoint import add_purge_route
from tracegrade.ingest.query_gate import GatedStore, QueryGate
from tracegrade.ingest.rebuild_endpoint import RebuildRequests
from tracegrade.ingest.request_error_log import request_error_log
from tracegrade.ingest.runs_endpoint import add_runs_route
from tracegrade.ingest.settings import ServeSettings
from tracegrade.ingest.storage import Storage, StorageHooks
from tracegrade.ingest.tokens import TokenTable
from tracegrade.store.database import duckdb_size_bytes
from tracegrade.store.file_purge import Purged, PurgeInterrupt, purge_deleted_rows
from tracegrade.store.query_control import QueryControl
from tracegrade.store.readonly import SandboxLimits
from tracegrade.store.tenant_scope import TenantStore
from tracegrade.ui import add_ui_routes
from tracegrade.ui.app import MAX_REQUEST_LINE

if TYPE_CHECKING:
    from tracegrade.evaluation.worker_metrics import WorkerHealth, WorkerMetrics

__all__ = ["ReceiverServer", "run_server"]

READY_QUEUE_FRACTION = 0.8  # readiness turns false when the write queue is fuller than this
STOP_GRACE = 2.0  # seconds idle connections get to close once in-flight requests are done
STORE_WATCH_SECONDS = 0.25  # how often the receiver checks whether its store failed
REOPEN_RETRY_SECONDS = 2.0  # between attempts to reopen a failed store (the disk may still be full)
REOPEN_LOG_SECONDS = 60.0  # the same failure of those attempts is logged at most this often
# the Retry-After of what a stopping receiver refuses, and of what it refuses while it reopens its store
RETRY_AFTER_STOPPING = 5.0
RETRY_AFTER_REOPENING = 1.0
QUERY_CONSISTENCY_TIMEOUT = 30.0  # longest a query waits for acknowledged spans to be committed
CLIENT_CHECK_SECONDS = 0.2  # how often a running query checks that its client is still there
MIN_SANDBOX_MEMORY = 32 * 1024 * 1024  # least memory an MCP grading call's SQL-assertion sandbox gets

log = logging.getLogger(__name__)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _tls_files_problem(cert: Any, key: Any, error: ssl.SSLError) -> str:
    """Which of the TLS files OpenSSL refused, and why, as far as their text tells."""
    if error.reason == "KEY_VALUES_MISMATCH":
        return "the key does not belong to the certificate"
    texts = {}
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        try:
            texts[flag] = Path(path).read_text(encoding="ascii", errors="replace")
        except OSError:
            texts[flag] = ""
    if "-----BEGIN CERTIFICATE-----" not in texts["--tls-cert"]:
        swapped = "PRIVATE KEY-----" in texts["--tls-cert"] and "BEGIN CERTIFICATE" in texts["--tls-key"]
        return f"--tls-cert {cert} holds no PEM certificate" + (" (the two files look swapped)" if swapped else "")
    if "PRIVATE KEY-----" not in texts["--tls-key"]:
        return f"--tls-key {key} holds no PEM private key"
    return f"OpenSSL cannot read them ({error.reason or error})"


class ReceiverServer:
    """One receiver: ``await start()``, then ``await stop()`` (or ``await serve_until_signalled()``)."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.http_port: int | None = None
        self.grpc_port: int | None = None
        self._storage: Storage | None = None
        self._intake: Intake | None = None
        self._grpc: grpc.aio.Server | None = None
        self._http: web.AppRunner | None = None
        self.metrics_listener: MetricsListener | None = None  # with --metrics-address, where /metrics is served
        self._http_socket: socket.socket | None = None
        self._tls: ssl.SSLContext | None = None
        # a /v1/query waits for its turn on the loop and takes a thread only once it has one
        self._query_executor = ThreadPoolExecutor(settings.max_queries, thread_name_prefix="tracegrade-query")
        self._queries = QueryGate(
            settings.max_queries, settings.query_timeout, settings.query_max_bytes, PrivatePaths.of(settings)
        )
        self._watch: asyncio.Task[None] | None = None
        # held while the store is closed and opened again (after a failure, or for a purge): one at a time
        self._store_turn = asyncio.Lock()
        # a purge under way (POST /v1/purge), which a stop interrupts, and set once none is: a stop waits for it
        self._purge: PurgeInterrupt | None = None
        self._no_purge = asyncio.Event()
        self._no_purge.set()
        self._rebuilds: RebuildRequests | None = None  # POST /v1/rebuild's, which a stop ends after their step
        self._stop_requested = asyncio.Event()
        self._stopped = False
        self.reopened = 0  # times the store was reopened after a failure
        self.auth_throttle: AuthThrottle | None = None  # the limit on wrong credentials, both ports together
        # the in-process worker's (--worker-rules), kept when the store is reopened: its series go on counting
        self._worker_metrics: WorkerMetrics | None = None
        # and its id: the worker of the reopened store hands back the leases the failure left under it
        self._worker_id: str | None = None
        # kept across reopenings too: after the store failed for a full disk, the trajectory rebuilder and the
        # worker wait for room to write (every receiver builds, so every receiver keeps one)
        self._disk_room = DiskRoom(self._store_directory())

    # -- addresses --------------------------------------------------------------------------------------

    @property
    def http_url(self) -> str:
        scheme = "https" if self.settings.tls_enabled else "http"
        return f"{scheme}://{_host_port(self.settings.host, self.http_port or 0)}"

    @property
    def grpc_target(self) -> str:
        return _host_port(self.settings.host, self.grpc_port or 0)

    # -- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            self._tls = self._ssl_context()  # first: grpc's own check of the files reports them as a bind failure
            self._bind_grpc()
            self._bind_http()
            if self.settings.metrics_address is not None:
                self.metrics_listener = self._metrics_listener(self.settings.metrics_address)
            # what the in-flight slots bounded when they also covered reading bodies: nothing new to configure
            body_budget = BodyBudget(self.settings.max_inflight_requests * self.settings.max_request_bytes)
            metrics = ReceiverMetrics(
                queue_depth=lambda: self.writer.queue_depth if self.writer is not None else 0,
                inflight=lambda: self.inflight,
                store_stats=lambda: self._storage.journaled.stats if self._storage is not None else {},
                waiting_for_room=lambda: self._intake.waiting_for_room if self._intake is not None else 0,
                body_bytes=lambda: body_budget.held,
                waiting_for_body_room=lambda: body_budget.waiting,
                decoding_bytes=lambda: self._intake.decoding_bytes if self._intake is not None else 0,
                waiting_to_decode=lambda: self._intake.waiting_to_decode if self._intake is not None else 0,
                queries_running=lambda: self._queries.running,
                queries_waiting=lambda: self._queries.waiting,
                more=self._worker_metrics_page,
            )
            self.auth_throttle = AuthThrottle.from_settings(self.settings, metrics)
            tokens = self.settings.token_table()
            if warning := tokens.short_token_warning():
                log.warning(warning)
            self._intake = Intake(
                None,
                metrics,
                tokens=tokens,
                max_inflight_requests=self.settings.max_inflight_requests,
                max_inflight_per_tenant=self.settings.max_inflight_per_tenant,
                queue_wait=self.settings.queue_wait,
                max_queue_spans=self.settings.queue_spans,
                max_request_bytes=self.settings.max_request_bytes,
            )
            self._storage = await loop.run_in_executor(None, self._open_storage, self._hooks(loop))
            self._intake.replace_writer(self._storage.journaled)
            assert self._grpc is not None
            services = OtlpGrpcServices(
                self._intake,
                metrics,
                self.settings.max_request_bytes,
                body_budget=body_budget,
                # a waiting call holds no message: as many as grpc's limit on calls at once allowed before
                max_waiting_calls=2 * self.settings.max_inflight_requests,
                auth_throttle=self.auth_throttle,
            )
            self._grpc.add_generic_rpc_handlers(services.handlers())
            await self._grpc.start()
            front_end = HttpFrontEnd(
                self._intake,
                metrics,
                max_request_bytes=self.settings.max_request_bytes,
                body_budget=body_budget,
                run_query=self._run_query,
                readiness=self.readiness,
                auth_throttle=self.auth_throttle,
                worker_health=self.worker_health,
                metrics_elsewhere=self.metrics_listener is not None,
            )
            app = front_end.build_app()
            guard = host_guard(self.settings.host)
            if guard is not None:
                app.middlewares.append(guard)
            intake = self._intake
            store = lambda: self._usable_storage().store  # noqa: E731
            add_runs_route(app, store, functools.partial(intake.authorize, scope="record"))
            settle = lambda: self._usable_storage().journaled.wait_stored(QUERY_CONSISTENCY_TIMEOUT)  # noqa: E731
            forgets = functools.partial(intake.authorize, scope="forget")
            add_forget_route(app, store, forgets, intake.count_forgotten, settle)
            purge = None if self.settings.is_lake else self.purge_deleted
            add_purge_route(app, purge, functools.partial(intake.authorize, scope="purge"))
            rebuilt = None if self.settings.is_lake else store
            per_tenant = lambda: intake.tokens.per_tenant  # noqa: E731
            draining = lambda: intake.draining  # noqa: E731
            self._rebuilds = RebuildRequests(
                rebuilt, self._store_turn, draining, per_tenant, self.settings.mapping_batch_bytes
            )
            self._rebuilds.add_route(app, functools.partial(intake.authorize, scope="record"))
            # the web UI and MCP read through one path: the query gate's limits, as the caller's tenant
            reads = lambda tenant: GatedStore(self.reader(tenant), self._queries, tenant)  # noqa: E731
            may_read = functools.partial(intake.authorize, scope="read")
            add_ui_routes(app, reads, may_read, intake.authorize_ui_session)
            may_judge = functools.partial(intake.authorize, scope="judge")
            add_mcp_route(app, reads, may_read, may_judge, self.settings.host, self._assertion_limits())
            await self._start_http(app)
            if self.metrics_listener is not None:
                await self.metrics_listener.start(front_end.metrics_page)
        except BaseException:
            await self._shutdown()
            raise
        self._watch = asyncio.create_task(self._watch_store())
        self._write_sidecar()
        loop.run_in_executor(None, self._note_outdated_trajectories)  # not awaited: listening never waits for it

    def _hooks(self, loop: asyncio.AbstractEventLoop) -> StorageHooks:
        assert self._intake is not None
        intake = self._intake
        return StorageHooks(
            on_dequeued=functools.partial(self._report_room, loop),
            on_stored=lambda result: loop.call_soon_threadsafe(self._count_stored, result),
            on_expired=lambda expired: loop.call_soon_threadsafe(intake.count_expired, expired),
            decode=self._intake.decode_record,
        )

    def _note_outdated_trajectories(self) -> None:
        """Log how many stored trajectories an older mapper built, and the command that rebuilds them (once, at
        start). They are not rebuilt here: on a big store that would take the receiver's CPU for hours."""
        from tracegrade.store.lake_location import redacted
        from tracegrade.store.outdated import outdated_count

        try:
            count = outdated_count(self._usable_storage().store)
        except TracegradeError as exc:  # the store failed (it is reopened) or closed: nothing to advise now
            log.debug("counting the trajectories an older mapper built failed: %s", exc)
            return
        if not count:
            return
        if self.settings.is_lake:
            how = (
                f"`tracegrade rebuild --store {redacted(self.settings.store)} --lake-data {self.settings.lake_data}` "
                "rebuilds them beside the receivers"
            )
        else:
            how = f"`tracegrade rebuild --store {self.settings.store}` has this receiver rebuild them as it runs"
        log.warning(
            "%d stored trace(s) hold a trajectory built by an older trajectory mapper, which keeps what that mapper "
            "derived (a trace is built again only when more of its spans arrive); %s",
            count,
            how,
        )

    def _store_directory(self) -> Path:
        """Where the store writes: a file's directory, or a lake's data path (its catalog is another machine's)."""
        if self.settings.is_lake and self.settings.lake_data is not None:
            return Path(self.settings.lake_data).absolute()
        return Path(self.settings.store).absolute().parent

    def _open_storage(self, hooks: StorageHooks) -> Storage:
        """Open the storage (on an executor thread); its worker, if any, counts in the metrics of the one before,
        goes by its id (and hands back its leases), and waits for room on a disk that filled up."""
        storage = Storage.open(self.settings, hooks, self._worker_metrics, self._disk_room, self._worker_id)
        if storage.worker is not None:
            self._worker_metrics = storage.worker.metrics
            self._worker_id = storage.worker.worker.worker_id
        return storage

    def _bind_grpc(self) -> None:
        """Create the gRPC server and bind its port (services are added once the storage is open)."""
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", grpc_receive_limit(self.settings.max_request_bytes)),
                ("grpc.max_send_message_length", 4 * 1024 * 1024),
                ("grpc.so_reuseport", 0),
                *GRPC_FLOW_CONTROL,
            ],
        )
        self._grpc = server
        address = _host_port(self.settings.host, self.settings.grpc_port)
        try:
            if self.settings.tls_enabled:
                credentials = grpc.ssl_server_credentials(
                    [(self.settings.tls_key.read_bytes(), self.settings.tls_cert.read_bytes())]  # type: ignore[union-attr]
                )
                port = server.add_secure_port(address, credentials)
            else:
                port = server.add_insecure_port(address)
        except RuntimeError:  # grpcio 1.60+ raises where older releases returned 0
            port = 0
        if port == 0:
            raise OSError(
                f"cannot listen for OTLP/gRPC on {address}: the port is in use or the address is not local; "
                "choose another with --grpc-port (0 picks a free one) or --host"
            )
        self.grpc_port = port

    def _bind_http(self) -> None:
        family = socket.AF_INET6 if ":" in self.settings.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.settings.host, self.settings.http_port))
        except OSError as exc:
            sock.close()
            address = _host_port(self.settings.host, self.settings.http_port)
            raise OSError(
                f"cannot listen for OTLP/HTTP on {address}: {exc.strerror or exc}; "
                "choose another with --http-port (0 picks a free one) or --host"
            ) from None
        self._http_socket = sock
        self.http_port = sock.getsockname()[1]

    def _metrics_listener(self, address: str) -> MetricsListener:
        """The listener of ``--metrics-address``; one on an OTLP port of this receiver is refused naming it (the
        OTLP/HTTP socket is only bound until aiohttp listens on it, so binding the same port would not fail here,
        but aiohttp's listen would, naming neither)."""
        port = parse_listen_address(address).port
        ours = {self.http_port: "OTLP/HTTP port (--http-port)", self.grpc_port: "OTLP/gRPC port (--grpc-port)"}
        if port in ours:
            raise InvalidValueError(
                f"cannot serve /metrics on {address}: port {port} is this receiver's {ours[port]}; give "
                "--metrics-address another port"
            )
        return MetricsListener(address)

    async def _start_http(self, app: web.Application) -> None:
        self._http = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            logger=request_error_log(),
            auto_decompress=False,
            shutdown_timeout=STOP_GRACE,
            max_line_size=MAX_REQUEST_LINE,  # the web UI's long addresses (see MAX_REQUEST_LINE)
        )
        await self._http.setup()
        assert self._http_socket is not None
        site = web.SockSite(self._http, self._http_socket, ssl_context=self._tls)
        await site.start()

    def _ssl_context(self) -> ssl.SSLContext | None:
        """OTLP/HTTP's TLS context; loading it checks the certificate and key that both listeners use."""
        if not self.settings.tls_enabled:
            return None
        cert, key = self.settings.tls_cert, self.settings.tls_key
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(str(cert), str(key))
        except ssl.SSLError as exc:
            problem = _tls_files_problem(cert, key, exc)
            raise OSError(
                f"cannot serve TLS with --tls-cert {cert} and --tls-key {key}: {problem}; give a PEM certificate "
                "chain and the PEM private key that belongs to it"
            ) from None
        except OSError as exc:
            raise OSError(f"cannot read --tls-cert {cert} or --tls-key {key}: {exc.strerror or exc}") from None
        return context

    async def stop(self) -> None:
        """Graceful stop: refuse new work, finish admitted requests, flush the writer, remove the sidecar."""
        if self._stopped:
            return
        self._cancel_queries("the receiver is shutting down", RETRY_AFTER_STOPPING)
        if self._intake is not None:
            self._intake.begin_drain()
            if self._purge is not None:  # a copy of a large file takes hours: the old file stays, whole
                self._purge.interrupt()
            await self._no_purge.wait()  # its store left closed, or open again: closed below, not left open
            if self._rebuilds is not None:  # ends after its step in progress: the store is closed below
                await self._rebuilds.ended()
            await self._intake.wait_idle(self.settings.shutdown_timeout)
        await self._shutdown()
        self.settings.sidecar_path.unlink(missing_ok=True)

    async def _shutdown(self) -> None:
        self._stopped = True
        loop = asyncio.get_running_loop()
        if self._watch is not None:
            self._watch.cancel()
        self._cancel_queries("the receiver is shutting down", RETRY_AFTER_STOPPING)
        if self._grpc is not None:
            await self._grpc.stop(STOP_GRACE)
        if self._http is not None:
            await self._http.cleanup()
        elif self._http_socket is not None:
            self._http_socket.close()
        if self.metrics_listener is not None:
            await self.metrics_listener.stop()
        if self._storage is not None:  # flushes the queue, rebuilds pending trajectories, closes the store
            storage = self._storage
            drain = storage.failure is None
            close = functools.partial(storage.close, drain=drain, rebuild_seconds=self.settings.shutdown_timeout)
            await loop.run_in_executor(None, close)
        if self._intake is not None:
            self._intake.close()
        self._query_executor.shutdown(wait=True)

    @property
    def token_table(self) -> TokenTable:
        """The tokens in force (once started)."""
        assert self._intake is not None, "the server has not started"
        return self._intake.tokens

    def reload_tokens(self) -> bool:
        """Load the ``--tokens`` file again (SIGHUP); True when its tokens are in force now. A file that
        does not load is refused with what is wrong, and the tokens in use stay."""
        if self.settings.tokens is None or self._intake is None:
            return False
        try:
            table = self.settings.token_table()
        except TracegradeError as exc:
            log.error("the tokens file was NOT reloaded; the tokens in use stay: %s", exc)
            return False
        self._intake.tokens = table
        log.warning("reloaded %s: %s", self.settings.tokens, table.describe())
        if warning := table.short_token_warning():
            log.warning(warning)
        return True

    def request_stop(self) -> None:
        """Ask :meth:`serve_until_signalled` to stop (safe from a signal handler on the loop)."""
        self._stop_requested.set()

    async def serve_until_signalled(self) -> None:
        """Run until SIGTERM/SIGINT (or :meth:`request_stop`), then stop gracefully; SIGHUP reloads the
        tokens file."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        loop.add_signal_handler(signal.SIGHUP, self.reload_tokens)
        try:
            await self._stop_requested.wait()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            await self.stop()

    # -- a failed store -----------------------------------------------------------------------------------

    async def _watch_store(self) -> None:
        while not self._stopped:
            await asyncio.sleep(STORE_WATCH_SECONDS)
            storage = self._storage
            if storage is not None and storage.failure is not None and not self._stopped:
                async with self._store_turn:
                    if storage is self._storage:  # not closed by a purge meanwhile
                        await self._reopen(storage)

    async def _reopen(self, failed: Storage) -> None:
        """Close the failed storage and open a new one on the same store and journal, retrying until it
        opens; exports and queries are told to retry meanwhile."""
        assert self._intake is not None
        loop = asyncio.get_running_loop()
        reason = failed.failure
        log.error("the store failed (%s); reopening it and replaying the request journal", reason)
        if reason is not None:  # the reopened store's rebuilder and worker wait for room
            self._disk_room.store_failed(reason)
        self._intake.begin_recovery(f"the store is being reopened after a failure ({reason})")
        self._cancel_queries("the store failed and is being reopened", RETRY_AFTER_REOPENING)
        await self._intake.wait_idle(self.settings.shutdown_timeout)
        self._storage = None
        await loop.run_in_executor(None, functools.partial(failed.close, drain=False))
        if await self._open_again():
            self.reopened += 1
            log.warning("the store is open again; every acknowledged request in the journal was replayed")

    async def _open_again(self) -> bool:
        """Open the storage after ``_storage`` was closed (exports refused meanwhile: ``begin_recovery``),
        retrying until it opens, and take exports again; False when the receiver stopped first."""
        assert self._intake is not None
        loop = asyncio.get_running_loop()
        attempts, said, said_at = 0, "", 0.0
        while not self._stopped:
            try:
                storage = await loop.run_in_executor(None, self._open_storage, self._hooks(loop))
            except Exception as exc:  # whatever failed, the receiver must keep trying: it refuses exports meanwhile
                attempts += 1
                # a disk that stays full fails every attempt alike: say so when the reason changes, else once a minute
                if str(exc) != said or time.monotonic() - said_at >= REOPEN_LOG_SECONDS:
                    said, said_at = str(exc), time.monotonic()
                    log.error(
                        "reopening the store failed (%s); %d attempt(s) so far, trying again every %g s",
                        exc,
                        attempts,
                        REOPEN_RETRY_SECONDS,
                    )
                if self._intake.draining:  # a stop is under way: the journal keeps what was acknowledged
                    return False
                await asyncio.sleep(REOPEN_RETRY_SECONDS)
                continue
            if self._stopped:  # stopped while it opened: close it as a stop would
                await loop.run_in_executor(None, storage.close)
                return False
            self._storage = storage
            self._intake.replace_writer(storage.journaled)
            self._intake.end_recovery()
            return True
        return False

    # -- purging the store file ---------------------------------------------------------------------------

    async def purge_deleted(self) -> Purged:
        """Rewrite the store file without the bytes of its deleted rows (``POST /v1/purge``) through the path a
        failed store is reopened by: exports and queries are refused retryably, the storage is closed once what
        it acknowledged is committed, the file purged (``purge_deleted_rows``: the old file or the new one, whole,
        whenever the receiver dies) and opened again, replaying the journal. StoreUnavailable while the store is
        being reopened; StoreError when the purge failed (the store is open again all the same); ShuttingDown when
        the receiver is told to stop meanwhile, which interrupts the purge (the old file stays, the store closed)."""
        assert self._intake is not None
        storage = self._usable_storage()
        loop = asyncio.get_running_loop()
        async with self._store_turn:
            if self._intake.draining or self._stopped:
                raise ShuttingDown(
                    "the receiver is shutting down; purge the file once it has stopped", RETRY_AFTER_STOPPING
                )
            if storage is not self._storage or storage.failure is not None:
                raise StoreUnavailable(
                    "the store is being reopened after a failure; retry shortly", RETRY_AFTER_REOPENING
                )
            # from here a stop interrupts the purge, and waits for its end
            interrupt = self._purge = PurgeInterrupt()
            self._no_purge.clear()
            why = "the store file is being purged of its deleted rows"
            log.warning("%s; exports and queries are refused (retryably) until it is open again", why)
            self._intake.begin_recovery(why)
            self._cancel_queries(why, RETRY_AFTER_REOPENING)
            await self._intake.wait_idle(self.settings.shutdown_timeout)
            self._storage = None
            try:
                # drained: what was acknowledged is in the file that is copied (the journal keeps it as well)
                close = functools.partial(storage.close, drain=True, rebuild_seconds=0)
                await loop.run_in_executor(None, close)
                purged = await loop.run_in_executor(None, purge_deleted_rows, Path(self.settings.store), interrupt)
            except StoreError as exc:
                if not interrupt.requested:
                    # the operator sees it too, not only the client that asked
                    log.error("%s; the store is opened again, as it was", exc)
                    raise
                log.warning("the purge was interrupted by the stop: %s", exc)
                raise ShuttingDown(
                    "the receiver is stopping: the purge was interrupted, the file is as it was; "
                    "purge it once the receiver runs again",
                    5.0,
                ) from None
            finally:
                self._purge = None
                try:
                    opened = not self._intake.draining and await self._open_again()
                finally:
                    self._no_purge.set()
        log.warning("%s%s", purged.summary(), "; the store is open again" if opened else "")
        return purged

    def reader(self, tenant: str | None, store: Any = None) -> Any:
        """What a caller of ``tenant`` reads (``store``, by default the open one): the store as that tenant
        sees it when tenants have their own tokens (``--tokens``), else the whole store."""
        store = store if store is not None else self._usable_storage().store
        if tenant is None or self._intake is None or not self._intake.tokens.per_tenant:
            return store
        return TenantStore(store, tenant)

    def _usable_storage(self) -> Storage:
        """The open storage, or a retryable refusal while it is being reopened."""
        storage = self._storage
        if storage is None or (self._intake is not None and self._intake.recovering):
            # what exports are told: a reopening after a failure, or a purge
            why = (self._intake.recovering if self._intake is not None else None) or "the store is being reopened"
            raise StoreUnavailable(f"{why}; retry shortly", RETRY_AFTER_REOPENING)
        return storage

    # -- state ------------------------------------------------------------------------------------------

    def _count_stored(self, result: Any) -> None:
        if self._intake is not None:
            self._intake.count_stored(result)

    @property
    def journal(self) -> Any:
        """The RequestJournal (None before ``start`` and while the store is reopened)."""
        return None if self._storage is None else self._storage.journaled.journal

    @property
    def writer(self) -> Any:
        """The StoreWriter (None before ``start`` and while the store is reopened)."""
        return None if self._storage is None else self._storage.writer

    @property
    def inflight(self) -> int:
        """Export requests being handled now."""
        return self._intake.inflight if self._intake is not None else 0

    def _report_room(self, loop: asyncio.AbstractEventLoop) -> None:
        """The writer took records from its queue (called on its thread): wake requests waiting for room."""
        try:
            loop.call_soon_threadsafe(self._room_freed)
        except RuntimeError:  # the loop has closed: no request is waiting any more
            pass

    def _room_freed(self) -> None:
        if self._intake is not None:
            self._intake.room_freed()

    def readiness(self) -> tuple[bool, str]:
        """(ready, why): ready while started, not stopping, the store open and the write queue has room."""
        if self._intake is None:
            return False, "starting"
        if self._intake.draining:
            return False, "shutting down"
        if self._intake.recovering:
            return False, self._intake.recovering
        storage = self._storage
        if storage is None:
            return False, "starting"
        if storage.failure is not None:
            return False, f"store failed, reopening: {storage.failure}"
        depth, capacity = storage.writer.queue_depth, self.settings.queue_spans
        if depth >= READY_QUEUE_FRACTION * capacity:
            return False, f"write queue nearly full ({depth} of {capacity} spans)"
        return True, "ready"

    def worker_health(self) -> WorkerHealth | None:
        """The in-process worker's health (None without --worker-rules): reported on /healthz/worker and in
        /healthz's body, never as /healthz's or /readyz's status (see HttpFrontEnd)."""
        return None if self._worker_metrics is None else self._worker_metrics.health()

    def _worker_metrics_page(self) -> str:
        return "" if self._worker_metrics is None else self._worker_metrics.render()

    # -- queries ----------------------------------------------------------------------------------------

    async def _run_query(
        self, sql: str, params: Sequence[Any] | None, connected: Callable[[], bool], tenant: str
    ) -> Any:
        """Run a query of ``tenant``'s within the receiver's limits (see QueryGate), also cancelled when
        ``connected()`` turns False (the client hung up)."""
        if self._intake is not None and self._intake.draining:
            raise ShuttingDown("the receiver is shutting down; retry later", RETRY_AFTER_STOPPING)
        storage = self._usable_storage()
        control = self._queries.admit(QueryControl(self.settings.query_timeout, max_rows=self.settings.query_max_rows))
        await self._queries.turn(tenant, control, connected, CLIENT_CHECK_SECONDS)
        loop = asyncio.get_running_loop()
        running = loop.run_in_executor(self._query_executor, self._query_stored, storage, sql, params, control, tenant)
        while True:
            done, _ = await asyncio.wait({running}, timeout=CLIENT_CHECK_SECONDS)
            if done:
                try:
                    return running.result()
                except StoreError:
                    self._refuse_if_store_closed(storage)
                    raise
            if not connected():
                control.cancel("its client closed the connection")

    def _refuse_if_store_closed(self, storage: Storage) -> None:
        """A query on ``storage`` failed: when the receiver closed that storage meanwhile (a purge, a reopening after
        a failure, a stop), which cancels the queries on it, raise the retryable refusal a query sent now gets (the
        query is not at fault: asked again, it is answered)."""
        if self._intake is not None and self._intake.draining:
            raise ShuttingDown("the receiver is shutting down; retry later", RETRY_AFTER_STOPPING) from None
        if storage is not self._storage or (self._intake is not None and self._intake.recovering):
            why = (self._intake.recovering if self._intake is not None else None) or "the store was opened again"
            raise StoreUnavailable(f"{why}; retry shortly", RETRY_AFTER_REOPENING) from None

    def _assertion_limits(self) -> SandboxLimits:
        """The limits of SQL assertions graded for a caller (MCP ``grade``): a query's time limit, and a query's
        memory, but at least MIN_SANDBOX_MEMORY (``--query-memory-limit 0MB`` leaves queries no room of their
        own in the store's pool, while an assertion's sandbox is a database of its own that holds the case)."""
        memory = max(duckdb_size_bytes(self.settings.query_memory_limit), MIN_SANDBOX_MEMORY)
        return SandboxLimits(self.settings.query_timeout, f"{memory}B")

    def _query_stored(
        self, storage: Storage, sql: str, params: Sequence[Any] | None, control: QueryControl, tenant: str
    ) -> Any:
        """Run a query, in the turn ``tenant`` holds, once every span acknowledged before it is committed (read
        your acknowledged writes)."""
        try:
            storage.journaled.wait_stored(min(QUERY_CONSISTENCY_TIMEOUT, self.settings.query_timeout))
            reader = self.reader(tenant, storage.store)
        except BaseException:
            self._queries.leave(tenant, control)
            raise
        return self._queries.run_in_turn(reader, sql, params, control, tenant)

    def _cancel_queries(self, reason: str, retry_after: float) -> None:
        self._queries.cancel_all(reason, retry_after)

    def _write_sidecar(self) -> None:
        """``<store>.server.json`` (written atomically) tells other commands where this server listens."""
        path = self.settings.sidecar_path
        document = {
            "pid": os.getpid(),
            "http_url": self.http_url,
            "grpc_target": self.grpc_target,
            "tls": self.settings.tls_enabled,
            "token_required": self.settings.auth_required,
        }
        temporary = path.with_name(path.name + f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        os.replace(temporary, path)


async def _serve(settings: ServeSettings, announce: Any) -> None:
    server = ReceiverServer(settings)
    await server.start()
    announce(server)
    await server.serve_until_signalled()


def run_server(settings: ServeSettings, announce: Any = lambda server: None) -> None:
    """Run a receiver in this thread until signalled; ``announce(server)`` is called once it listens."""
    asyncio.run(_serve(settings, announce))
