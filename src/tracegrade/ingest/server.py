"""The OTLP receiver behind ``tracegrade serve``: store writer, gRPC and HTTP front ends on one asyncio loop.

Start-up opens the store, starts the writer, binds both listeners and writes the ``<store>.server.json``
sidecar. Stopping (SIGTERM/SIGINT or :meth:`ReceiverServer.stop`) turns readiness off and refuses new
requests (503 / UNAVAILABLE, both retryable), lets admitted requests finish, flushes the writer, closes
the store and removes the sidecar: everything acknowledged is on disk.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import socket
import ssl
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web

from tracegrade.ingest.grpc_services import OtlpGrpcServices
from tracegrade.ingest.http_app import HttpFrontEnd
from tracegrade.ingest.inprocess_worker import InProcessWorker, start_inprocess_worker
from tracegrade.ingest.intake import Intake
from tracegrade.ingest.journaled_writer import JournaledWriter
from tracegrade.ingest.metrics import ReceiverMetrics
from tracegrade.ingest.runs_endpoint import add_runs_route
from tracegrade.ingest.settings import ServeSettings, duckdb_size_bytes

__all__ = ["ReceiverServer", "run_server"]

READY_QUEUE_FRACTION = 0.8  # readiness turns false when the write queue is fuller than this
STOP_GRACE = 2.0  # seconds idle connections get to close once in-flight requests are done
QUERY_CONSISTENCY_TIMEOUT = 30.0  # longest a query waits for acknowledged spans to be committed


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ReceiverServer:
    """One receiver: ``await start()``, then ``await stop()`` (or ``await serve_until_signalled()``)."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.http_port: int | None = None
        self.grpc_port: int | None = None
        self._store: Any = None
        self._writer: Any = None
        self._intake: Intake | None = None
        self._grpc: grpc.aio.Server | None = None
        self._http: web.AppRunner | None = None
        self._worker: InProcessWorker | None = None
        self._query_executor = ThreadPoolExecutor(2, thread_name_prefix="tracegrade-query")
        self._stop_requested = asyncio.Event()
        self._stopped = False

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
        from tracegrade.store import StoreWriter, TraceStore
        from tracegrade.store.journal import RequestJournal
        from tracegrade.store.mapping_process import MappingProcess

        settings = self.settings
        loop = asyncio.get_running_loop()
        self._store = await loop.run_in_executor(
            # the request journal is the store's log: DuckDB writes no WAL of its own (see TraceStore)
            None,
            functools.partial(TraceStore, settings.store, memory_limit=settings.store_memory_limit, wal=False),
        )
        try:
            writer = StoreWriter(
                self._store,
                max_queue_spans=settings.queue_spans,
                # the whole queue may go into one transaction (spans stop at the row group's end anyway)
                max_batch_spans=settings.queue_spans,
                # a checkpoint needs about as much memory again as it writes: a quarter of the limit each
                checkpoint_bytes=duckdb_size_bytes(settings.store_memory_limit) // 4,
                # no mapping child unless asked for: it costs about 100 MB while a backlog keeps it running
                mapping=MappingProcess() if settings.mapping_process else MappingProcess(in_process_spans=None),
                on_dequeued=functools.partial(self._report_room, loop),
            )
            writer.start()
            self._writer = JournaledWriter(
                writer,
                RequestJournal(settings.journal_path),
                on_stored=lambda result: loop.call_soon_threadsafe(self._count_stored, result),
            )
            if settings.worker_rules is not None:
                self._worker = start_inprocess_worker(writer, settings.worker_rules)
            metrics = ReceiverMetrics(
                queue_depth=lambda: writer.queue_depth,
                inflight=lambda: self.inflight,
                store_stats=lambda: self._writer.stats,
                waiting_for_room=lambda: self._intake.waiting_for_room if self._intake is not None else 0,
            )
            self._intake = Intake(
                self._writer,
                metrics,
                token=settings.token,
                max_inflight_requests=settings.max_inflight_requests,
                queue_wait=settings.queue_wait,
            )
            await loop.run_in_executor(None, self._writer.recover, self._intake.decode_record)
            self._writer.start()
            await self._start_grpc(OtlpGrpcServices(self._intake, metrics))
            front_end = HttpFrontEnd(
                self._intake,
                metrics,
                max_request_bytes=settings.max_request_bytes,
                run_query=self._run_query,
                readiness=self.readiness,
            )
            app = front_end.build_app()
            add_runs_route(app, self._store, self._intake.authorize)
            await self._start_http(app)
        except BaseException:
            await self._shutdown()
            raise
        self._write_sidecar()

    async def _start_grpc(self, services: OtlpGrpcServices) -> None:
        limit = self.settings.max_request_bytes
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", 4 * 1024 * 1024),
                ("grpc.so_reuseport", 0),
            ],
            maximum_concurrent_rpcs=2 * self.settings.max_inflight_requests,
        )
        server.add_generic_rpc_handlers(services.handlers())
        address = _host_port(self.settings.host, self.settings.grpc_port)
        if self.settings.tls_enabled:
            credentials = grpc.ssl_server_credentials(
                [(self.settings.tls_key.read_bytes(), self.settings.tls_cert.read_bytes())]  # type: ignore[union-attr]
            )
            port = server.add_secure_port(address, credentials)
        else:
            port = server.add_insecure_port(address)
        if port == 0:
            raise OSError(f"cannot listen for OTLP/gRPC on {address} (port in use or address not local)")
        self._grpc = server
        self.grpc_port = port
        await server.start()

    async def _start_http(self, app: web.Application) -> None:
        self._http = web.AppRunner(
            app, handle_signals=False, access_log=None, auto_decompress=False, shutdown_timeout=STOP_GRACE
        )
        await self._http.setup()
        family = socket.AF_INET6 if ":" in self.settings.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.settings.host, self.settings.http_port))
        except OSError as exc:
            sock.close()
            raise OSError(
                f"cannot listen for OTLP/HTTP on {self.settings.host}:{self.settings.http_port}: {exc}"
            ) from None
        self.http_port = sock.getsockname()[1]
        site = web.SockSite(self._http, sock, ssl_context=self._ssl_context())
        await site.start()

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self.settings.tls_enabled:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self.settings.tls_cert), str(self.settings.tls_key))
        return context

    async def stop(self) -> None:
        """Graceful stop: refuse new work, finish admitted requests, flush the writer, remove the sidecar."""
        if self._stopped:
            return
        if self._intake is not None:
            self._intake.begin_drain()
            await self._intake.wait_idle(self.settings.shutdown_timeout)
        await self._shutdown()
        self.settings.sidecar_path.unlink(missing_ok=True)

    async def _shutdown(self) -> None:
        self._stopped = True
        loop = asyncio.get_running_loop()
        if self._worker is not None:  # finishes the job in hand before the store closes
            await loop.run_in_executor(None, self._worker.stop)
        if self._grpc is not None:
            await self._grpc.stop(STOP_GRACE)
        if self._http is not None:
            await self._http.cleanup()
        if self._writer is not None:  # flushes the queue, rebuilds pending trajectories, closes the store
            close = functools.partial(self._writer.close, rebuild_seconds=self.settings.shutdown_timeout)
            await loop.run_in_executor(None, close)
        elif self._store is not None:
            await loop.run_in_executor(None, self._store.close)
        if self._intake is not None:
            self._intake.close()
        self._query_executor.shutdown(wait=True)

    def request_stop(self) -> None:
        """Ask :meth:`serve_until_signalled` to stop (safe from a signal handler on the loop)."""
        self._stop_requested.set()

    async def serve_until_signalled(self) -> None:
        """Run until SIGTERM/SIGINT (or :meth:`request_stop`), then stop gracefully."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        try:
            await self._stop_requested.wait()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            await self.stop()

    # -- state ------------------------------------------------------------------------------------------

    def _count_stored(self, result: Any) -> None:
        if self._intake is not None:
            self._intake.count_stored(result)

    @property
    def journal(self) -> Any:
        """The RequestJournal (None before ``start``)."""
        return None if self._writer is None else self._writer.journal

    @property
    def writer(self) -> Any:
        """The StoreWriter (None before ``start``): the online grading worker shares it."""
        return None if self._writer is None else self._writer.writer

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
        """(ready, why): ready while started, not stopping, and the write queue has room."""
        if self._intake is None or self._writer is None:
            return False, "starting"
        if self._intake.draining:
            return False, "shutting down"
        if self._writer.writer.store.failure is not None:
            return False, f"store failed, restart needed: {self._writer.writer.store.failure}"
        depth, capacity = self._writer.writer.queue_depth, self.settings.queue_spans
        if depth >= READY_QUEUE_FRACTION * capacity:
            return False, f"write queue nearly full ({depth} of {capacity} spans)"
        return True, "ready"

    async def _run_query(self, sql: str, params: Sequence[Any] | None) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._query_executor, self._query_stored, sql, params)

    def _query_stored(self, sql: str, params: Sequence[Any] | None) -> Any:
        """Run a query once every span acknowledged before it is committed (read your acknowledged writes)."""
        self._writer.wait_stored(QUERY_CONSISTENCY_TIMEOUT)
        return self._writer.writer.query(sql, params)

    def _write_sidecar(self) -> None:
        """``<store>.server.json`` (written atomically) tells other commands where this server listens."""
        path = self.settings.sidecar_path
        document = {
            "pid": os.getpid(),
            "http_url": self.http_url,
            "grpc_target": self.grpc_target,
            "tls": self.settings.tls_enabled,
            "token_required": self.settings.token is not None,
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
    """Run a receiver in this thread until signalled; ``announce(server)`` is called once it listens.

    The process is the receiver's own (``tracegrade serve``): Arrow's allocator and glibc's thresholds
    are set for it."""
    from tracegrade.ingest.malloc_tuning import fix_malloc_thresholds
    from tracegrade.store.arrow_pool import use_receiver_allocator

    use_receiver_allocator()
    fix_malloc_thresholds()
    Path(settings.store).parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(_serve(settings, announce))
