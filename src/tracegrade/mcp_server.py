"""``tracegrade mcp``: the store's read-only tools for coding agents, over the Model Context Protocol (stdio;
``tracegrade serve`` also serves them at ``/mcp`` over streamable HTTP, see :mod:`tracegrade.ingest.mcp_endpoint`).

A coding agent debugging an agent asks what happened (list and search traces, read a trajectory, run SQL in
the store's sandbox), how it was graded (runs, failing cases with reasons, a diff of two runs), and can grade
traces or an eval set with a config of its choosing (the result is returned, never recorded). The tools are
the web UI's own reads (``tracegrade.ui.api``), built on the official ``mcp`` SDK (``tracegrade[mcp]``).
Nothing but protocol messages may reach stdout: it is the transport.

``grade`` runs on a worker thread (never on the event loop that serves the other tools, or a receiver's
exports) in a SQL-assertion sandbox of its own. Served over the network (``limits`` given: ``/mcp`` of
``tracegrade serve``), its caller is not the machine's owner: it takes the config and eval set inline only,
bounded in size, never a path on the server; judges use the server's own endpoint and credentials (a config
naming another is refused), and only for a token with the ``judge`` scope (they spend the server's money);
and its SQL assertions run within the receiver's query limits. On stdio, a
developer's own machine, paths are read, but only regular files of bounded size.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from tracegrade.cli.common import friendly_errors, judge_free_default
from tracegrade.cli.store_access import store_options
from tracegrade.criteria.trajectory_db import own_sandbox
from tracegrade.errors import QueryCancelled, StoreError, TracegradeError, did_you_mean
from tracegrade.evaluation.selection import SelectionNames, TraceSelection, selected_trace_ids
from tracegrade.models.config import CRITERIA_SLOTS, CriterionConfig, EvalConfig
from tracegrade.models.dataset import EvalSet
from tracegrade.store.readonly import SandboxLimits
from tracegrade.ui import api

__all__ = ["GRADE_DEFAULT_LIMIT", "GRADE_MAX_TRACES", "GRADING_AT_ONCE", "MAX_FILE_BYTES", "MAX_INLINE_BYTES"]
__all__ += ["build_server", "command"]

MAX_INLINE_BYTES = 4 * 1024 * 1024  # an inline config or eval set from a caller over the network (as JSON)
MAX_FILE_BYTES = 64 * 1024 * 1024  # a config or eval set file that the stdio server reads
GRADING_AT_ONCE = 2  # grade calls running at once; more wait (each holds a thread and a sandbox)
# Traces one reference-free ``grade`` call grades at most: the tool answers in one message, and a served call
# holds a grading thread the receiver shares with its exports. Bigger selections are the CLI's (``tracegrade grade``,
# which streams them in chunks of this size and records the run). Without limit or trace_ids, the newest 20.
GRADE_MAX_TRACES = 10_000
GRADE_DEFAULT_LIMIT = 20
_NAMES = SelectionNames(where="where", since="since", sample="sample", limit="limit")  # grade's own arguments
# Config fields that point judges at another endpoint or other credentials (a caller's URL would receive
# the server's own key) or name a file on the server: refused to callers over the network.
_JUDGE_OVERRIDES = ("api_base", "api_key")
_SERVER_FILES = ("judge_cache_path", "calibration_file")

_INSTRUCTIONS = (
    "Read-only access to a tracegrade store of OpenTelemetry traces of LLM agents and their grading runs. "
    "Start with list_traces or list_runs; get_trajectory shows what one trace did (nodes, LLM calls, tool calls); "
    "run_sql queries the tables (traces, spans, logs, evaluations, tool_calls, llm_calls, node_visits, eval_runs, "
    "eval_case_results, eval_results, calibrations); failing_cases and diff_runs explain grading results; grade grades "
    "traces or an eval set with a config without recording anything."
)


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Our errors (bad filter, unknown trace, refused SQL…) reach the model as its message, not as a crash."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except (TracegradeError, KeyError, ValueError, OSError) as exc:
        raise ToolError(str(exc)) from None


def _regular_file(path: str, kind: str) -> Path:
    """``path`` if it is a regular file of at most MAX_FILE_BYTES: a FIFO or a device (``/dev/zero``) would be
    read without end, a directory not at all."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        raise api.BadRequest(f"{kind} file not found: {path}") from None
    if stat.S_ISDIR(found.st_mode):
        raise api.BadRequest(f"{kind}_path {path} is a directory; give a JSON or YAML file")
    if not stat.S_ISREG(found.st_mode):
        raise api.BadRequest(
            f"{kind}_path {path} is not a regular file (a FIFO, device or socket); give a JSON or YAML file"
        )
    if found.st_size > MAX_FILE_BYTES:
        raise api.BadRequest(f"{kind} file {path} has {found.st_size:,} bytes; grade reads at most {MAX_FILE_BYTES:,}")
    return Path(path)


def _load(model: Any, inline: dict[str, Any] | None, path: str | None, kind: str, served: bool) -> Any:
    """``model`` (EvalConfig or EvalSet) from the inline document or the file given; None for neither."""
    if inline is not None and path is not None:
        raise api.BadRequest(f"give {kind} or {kind}_path, not both")
    if path is not None:
        if served:
            raise api.BadRequest(
                f"{kind}_path is refused over the network: this server reads no file of its own for a caller. "
                f"Send the {kind} document itself as {kind} (a JSON object of at most {MAX_INLINE_BYTES:,} bytes)"
            )
        return model.from_file(_regular_file(path, kind))
    if inline is None:
        return None
    size = len(json.dumps(inline)) if served else 0
    if size > MAX_INLINE_BYTES:
        raise api.BadRequest(f"the {kind} given has {size:,} bytes as JSON; at most {MAX_INLINE_BYTES:,} are accepted")
    return _from_document(model, inline, kind)


def _from_document(model: Any, document: dict[str, Any], kind: str) -> Any:
    """``document`` read as its file would be: in ADK's form or tracegrade's, every problem listed at its JSON
    path (EvalSetError / ConfigError), so that a document sent inline is taken, or refused, as the same file is."""
    from tracegrade.models.adk_files import adk_document
    from tracegrade.models.files import model_from_data

    source = f"given as {kind}"
    adk = adk_document(document, source, "evalset" if model is EvalSet else "config")
    return adk[1] if adk is not None else model_from_data(model, document, source)


def _refuse_judge_overrides(config: EvalConfig) -> None:
    """Refuse a config that sends judge calls elsewhere or with other credentials, or names a server file."""
    sections = [(f"criteria.{slot}", getattr(config.criteria, slot)) for slot in CRITERIA_SLOTS]
    sections.append(("user_simulator_config", config.user_simulator_config))
    named = [
        f"{where}.{field}" for where, section in sections for field in _JUDGE_OVERRIDES if getattr(section, field, None)
    ]
    named += [field for field in _SERVER_FILES if getattr(config, field) is not None]
    if named:
        raise api.BadRequest(
            f"{', '.join(named)} refused: over the network, judges call the endpoint with the credentials this "
            "server is configured with (its environment), and the server's judge cache and calibration files are "
            "its own; remove these fields (judge_model may still pick a model)"
        )


def _refuse_judging(config: EvalConfig, refusal: str, with_cases: bool) -> None:
    """Refuse a config whose grading would call LLM judges to a caller whose token may not (``refusal``).
    Without cases (``with_cases`` false), criteria that need an expected value are skipped, so they call none."""
    from tracegrade.evaluation.calibration import judged_criteria

    judged = [f"criteria.{slot}" for slot, c in judged_criteria(config) if with_cases or not c.requires_reference]
    if judged:
        raise api.BadRequest(f"{', '.join(judged)} grade with an LLM judge, and {refusal}; or leave them out")


def _check_selection(store: api.Store, selection: TraceSelection) -> None:
    """Refuse a bad reference-free selection with its own error, named by ``grade``'s arguments: a ``limit`` or
    ``where`` the selection refuses, too many traces for one call, a ``trace_ids`` naming traces the store does
    not hold."""
    over = _too_many(selection)
    if over is not None:
        raise api.BadRequest(
            f"{over}, and one grade call grades at most {GRADE_MAX_TRACES:,} traces: grade more with the command "
            "line (tracegrade grade --config CONFIG --where ... --limit N, which also records the run), or call grade "
            "on narrower selections (a where on start_time, for instance)"
        )
    try:
        selected_trace_ids(store, selection, _NAMES)
    except StoreError as exc:
        if selection.where is None or isinstance(exc, QueryCancelled):
            raise
        raise api.BadRequest(f"where {selection.where!r} is not a valid condition on the traces table: {exc}") from None
    if selection.trace_ids == []:
        raise api.BadRequest("trace_ids is empty: name at least one stored trace, or leave trace_ids out")
    if selection.trace_ids is not None:
        held = set(selected_trace_ids(store, TraceSelection(trace_ids=selection.trace_ids)))
        missing = [trace_id for trace_id in selection.trace_ids if trace_id not in held]
        if missing:
            raise api.BadRequest(f"trace_ids names traces the store does not hold: {', '.join(map(repr, missing))}")


def _too_many(selection: TraceSelection) -> str | None:
    """What in ``selection`` asks for more than GRADE_MAX_TRACES traces, or None."""
    if selection.limit is not None and selection.limit > GRADE_MAX_TRACES:
        return f"limit is {selection.limit:,}"
    if selection.trace_ids is not None and len(set(selection.trace_ids)) > GRADE_MAX_TRACES:
        return f"trace_ids names {len(set(selection.trace_ids)):,} traces"
    return None


def _selection(trace_ids: list[str] | None, where: str | None, limit: int | None) -> TraceSelection:
    """The traces a reference-free ``grade`` picks: the newest GRADE_DEFAULT_LIMIT without a limit, unless
    trace_ids names them (then every one named, bounded by the check of GRADE_MAX_TRACES)."""
    if limit is None and trace_ids is None:
        limit = GRADE_DEFAULT_LIMIT
    return TraceSelection(where=where, limit=limit, trace_ids=trace_ids)


def _refuse_selection_with_cases(trace_ids: list[str] | None, where: str | None, limit: int | None) -> None:
    """Refuse trace_ids / where / limit beside an eval set, as ``tracegrade grade`` refuses --where/--limit beside
    --evalset: an eval set's cases find their own traces, so a selection would be silently ignored."""
    given = [
        name for name, value in (("trace_ids", trace_ids), ("where", where), ("limit", limit)) if value is not None
    ]
    if given:
        verb, them = ("selects", "it") if len(given) == 1 else ("select", "them")
        raise api.BadRequest(
            f"{', '.join(given)} {verb} traces for grading without reference, and with eval_set each case is graded "
            f"against the traces that match it: leave {them} out, or leave out eval_set to grade the traces selected"
        )


def _require_reference_free(config: EvalConfig, default: bool) -> None:
    """Refuse grading without an eval set with a config none of whose criteria can grade without one, naming its
    slots as the caller wrote them (``default``: the caller gave no config)."""
    from tracegrade.criteria.registry import criterion_class

    slots = config.criteria.enabled_slots()
    if not slots or any(a.enabled for a in config.criteria.sql_assertions):
        return  # SQL assertions need no expectations; a config enabling nothing gets the grader's own error
    if any(not criterion_class(slot, cfg).requires_reference for slot, cfg in slots):
        return
    if default:
        needing = f"the default criteria ({', '.join(slot for slot, _ in slots)}) need"
    else:
        needing = ", ".join(f"config.criteria.{slot}" for slot, _ in slots) + (" needs" if len(slots) == 1 else " need")
    free = [s for s in CRITERIA_SLOTS if not criterion_class(s, CriterionConfig()).requires_reference]
    raise api.BadRequest(
        f"{needing} an eval case's expectations, and without eval_set the traces are graded without reference: "
        f"give config with a reference-free criterion ({', '.join([*free, 'sql_assertions'])}), or give eval_set"
    )


def _grade(
    store: api.Store,
    inputs: tuple[dict[str, Any] | None, str | None, dict[str, Any] | None, str | None],
    picked: tuple[list[str] | None, str | None, int | None],
    limits: SandboxLimits | None,
    judging_refused: str | None,
) -> dict[str, Any]:
    """Grade as the ``grade`` tool says, blocking (on a worker thread), in a sandbox of its own. ``picked``: the
    trace_ids, where and limit the caller gave."""
    from tracegrade.evaluation.offline import TraceGrader

    config, config_path, eval_set, eval_set_path = inputs
    served = limits is not None
    selection = _selection(*picked)
    if eval_set is None and eval_set_path is None:
        _check_selection(store, selection)
    else:
        _refuse_selection_with_cases(*picked)
    with own_sandbox(limits):  # the config's assertions are checked in it too
        # without a config, the judge-free criteria `tracegrade grade` uses: a caller with no judge (no key, or a
        # token without the judge scope) can still grade an eval set
        loaded: EvalConfig = _load(EvalConfig, config, config_path, "config", served) or judge_free_default()
        if served:
            _refuse_judge_overrides(loaded)
        cases: EvalSet | None = _load(EvalSet, eval_set, eval_set_path, "eval_set", served)
        if cases is None:
            _require_reference_free(loaded, default=config is None and config_path is None)
        if judging_refused is not None:
            _refuse_judging(loaded, judging_refused, with_cases=cases is not None)
        grader = TraceGrader(store, loaded)
        report = grader.grade_eval_set_sync(cases) if cases is not None else grader.grade_traces_sync(selection)
    return {
        "summary": report.summary.model_dump(mode="json", include=api.SUMMARY_KEYS),
        "cases": [api.case_summary(r) for r in report.results],
    }


def _unknown_arguments(tool: str, given: Iterable[str], accepted: list[str]) -> str | None:
    """What is wrong with the arguments ``given`` to ``tool``, which takes ``accepted``; None when nothing is."""
    unknown = [name for name in given if name not in accepted]
    if not unknown:
        return None
    named = ", ".join(f"{name!r}{did_you_mean(name, accepted)}" for name in unknown)
    takes = f"it takes {', '.join(accepted)}" if accepted else "it takes no arguments"
    return f"unknown argument{'s' if len(unknown) > 1 else ''} {named} for {tool}; {takes}"


def _is_integer(schema: dict[str, Any]) -> bool:
    """Does an argument's JSON schema (``int`` or ``int | None``) take an integer?"""
    return schema.get("type") == "integer" or any(s.get("type") == "integer" for s in schema.get("anyOf", ()))


def _not_integers(tool: str, arguments: dict[str, Any], properties: dict[str, Any]) -> str | None:
    """What is wrong with the integer arguments given to ``tool``; None when nothing is. The SDK's argument
    models are lax: they take ``true`` as 1, ``"5"`` and ``5.0`` as 5; a caller who sent those meant something
    else, so they are refused."""
    for name, value in arguments.items():
        schema = properties.get(name, {})
        if value is None or not _is_integer(schema) or (isinstance(value, int) and not isinstance(value, bool)):
            continue
        return f"{name} for {tool} must be a whole number (a JSON integer such as 20), not {json.dumps(value)}"
    return None


@contextmanager
def _process_logging_kept() -> Iterator[None]:
    """Keep the process's logging as it is while the SDK builds a server: MCPServer() calls ``logging.basicConfig``
    at INFO, which would give the root logger a handler of its own (every library's INFO lines, ours twice) in the
    receiver or on the stdio server's stderr. The SDK's own loggers log each stateless request's session
    ("Terminating session: None") and each failed tool call (which its caller receives) at INFO: they are kept to
    warnings and errors, unless the process's logging configuration set their level."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for added in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(added)
        root.setLevel(level)
        sdk = logging.getLogger("mcp")
        if sdk.level == logging.NOTSET:
            sdk.setLevel(logging.WARNING)


def _strict_server(middleware: Sequence[Any]) -> Any:
    """An MCPServer that refuses arguments a tool does not take (the SDK's argument models drop them) and integer
    arguments given as anything but integers; ``middleware`` wraps each request it answers (the SDK's)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    class StrictServer(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            tool = next((t for t in await self.list_tools() if t.name == name), None)
            if tool is not None:  # else the SDK says the tool is unknown
                properties = tool.input_schema.get("properties", {})
                problem = _unknown_arguments(name, arguments, list(properties))
                problem = problem or _not_integers(name, arguments, properties)
                if problem is not None:
                    raise ToolError(problem)
            return await super().call_tool(name, arguments, context)

    with _process_logging_kept():
        return StrictServer("tracegrade", instructions=_INSTRUCTIONS, middleware=middleware)


def build_server(
    store: api.Store,
    limits: SandboxLimits | None = None,
    judging_refused: Callable[[], str | None] | None = None,
    sql_timeout: float | None = None,
    middleware: Sequence[Any] = (),
) -> Any:
    """The MCP server over ``store`` (anything with ``query(sql, params)``). ``limits``: its callers come over
    the network, and their SQL assertions run within these limits (see the module docstring).
    ``judging_refused``: asked at each ``grade`` call, why its caller may not call the LLM judges (None: it may).
    ``sql_timeout``: seconds a ``run_sql`` query may run (None: the store's own limit, a receiver's for instance).
    ``middleware``: the SDK's request middleware, ``(ctx, call_next)`` (the receiver's ``/mcp`` takes query turns in
    it)."""
    import anyio
    from mcp.types import ToolAnnotations

    server = _strict_server(middleware)
    grading_turns = anyio.CapacityLimiter(GRADING_AT_ONCE)
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    def list_traces(
        text: str | None = None,
        status: str | None = None,
        service: str | None = None,
        convention: str | None = None,
        case: str | None = None,
        traffic: str | None = None,
        tool: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """Stored traces, newest first, and next_cursor for the next page. Filters combine: text searches the
        user query and final response; status is ok or error (the run's own outcome) or span_error (some span
        failed, a tool inside a run that recovered included); traffic is eval or production; tool keeps traces
        that called that tool; since/until take 15m, 2h, 1d or an ISO time."""
        with _tool_errors():
            given = {"text": text, "status": status, "service": service, "convention": convention, "case": case}
            given |= {"traffic": traffic, "tool": tool, "since": since, "until": until}
            filters = api.TraceFilters.from_mapping(given)
            return api.list_traces(store, filters, limit, cursor)

    @server.tool(annotations=read_only)
    def get_trajectory(trace_id: str, include_spans: bool = False) -> dict[str, Any]:
        """One trace's trajectory: user query, node visits, LLM calls (model, tokens, messages), tool calls
        (arguments, results, errors), final response, and the runs that graded it. A null field whose
        *_captured flag is false means the content was not recorded (not that it was empty)."""
        with _tool_errors():
            detail = api.trace_detail(store, trace_id)
            if not include_spans:
                detail.pop("spans")
            return detail

    @server.tool(annotations=read_only)
    def get_span(trace_id: str, span_id: str) -> dict[str, Any]:
        """One stored span as received (attributes, events, links, resource) and its log records."""
        with _tool_errors():
            return api.span_detail(store, trace_id, span_id)

    @server.tool(annotations=read_only)
    def run_sql(sql: str) -> dict[str, Any]:
        """Run one read-only SELECT over the store (sandboxed: no files, no writes); up to 1000 rows return."""
        with _tool_errors():
            return api.run_sql(store, sql, sql_timeout)

    @server.tool(annotations=read_only)
    def store_schema() -> dict[str, Any]:
        """The store's tables and views with their columns and types."""
        with _tool_errors():
            return {"tables": api.schema(store)}

    @server.tool(annotations=read_only)
    def list_runs(limit: int = 20) -> dict[str, Any]:
        """Recorded grading runs, newest first: pass rate and its 95% interval, judge cost, duration."""
        with _tool_errors():
            return {"runs": api.list_runs(store, limit)}

    @server.tool(annotations=read_only)
    def failing_cases(run_id: str) -> dict[str, Any]:
        """A run's failed and errored cases, each failing criterion with score, threshold and reason."""
        with _tool_errors():
            return api.failing_cases(store, run_id)

    @server.tool(annotations=read_only)
    def diff_runs(run_a: str, run_b: str) -> dict[str, Any]:
        """Two runs compared case by case: regressed/improved cases, per-criterion score changes and the first
        trajectory step where a case's runs diverge."""
        with _tool_errors():
            return api.diff_runs(store, run_a, run_b)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
    async def grade(
        config: dict[str, Any] | None = None,
        config_path: str | None = None,
        eval_set: dict[str, Any] | None = None,
        eval_set_path: str | None = None,
        trace_ids: list[str] | None = None,
        where: str | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """Grade stored traces with an EvalConfig (config: the config as an object) and return the results;
        nothing is recorded. With eval_set (an EvalSet as an object), grade its cases against their traces (without
        config: trajectory and rouge_match, which compare with the cases' expectations and need no LLM judge).
        Without eval_set, grade the traces picked by trace_ids / where (a SQL condition on the traces table) /
        limit (default: the newest 20, or every trace of trace_ids; at most 10,000 a call) without reference:
        config must then enable a reference-free criterion (contains_keywords, sql_assertions, tool_schema, budget,
        rubric_based, hallucination or safety); trace_ids, where and limit are refused beside eval_set. config_path
        and eval_set_path name files instead, on a local server only. LLM-judge criteria call the model configured
        (the one tool that may reach outside the store; on a server, only with a token that has the judge scope)."""
        refused = judging_refused() if judging_refused is not None else None
        inputs = (config, config_path, eval_set, eval_set_path)
        graded = functools.partial(_grade, store, inputs, (trace_ids, where, limit), limits, refused)
        with _tool_errors():
            result: dict[str, Any] = await anyio.to_thread.run_sync(graded, limiter=grading_turns)
            return result

    return server


@click.command("mcp")
@store_options
@friendly_errors
def command(store_path: Path, token: str | None) -> None:
    """Serve the store's read-only tools to a coding agent over MCP on stdin/stdout.

    Tools: list_traces, get_trajectory, get_span, run_sql, store_schema, list_runs, failing_cases, diff_runs
    and grade. While `tracegrade serve` holds the store, the tools read through it (pass its --token).
    Needs the mcp extra: pip install 'tracegrade[mcp]'.
    """
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        raise click.UsageError("tracegrade mcp needs the MCP SDK: pip install 'tracegrade[mcp]'") from None
    from tracegrade.cli.store_access import chosen_tenant, reading_store
    from tracegrade.store.tenancy import grading_for
    from tracegrade.ui.app import SQL_TIMEOUT

    # with --tenant, grade caches its judge replies as that tenant's, as `tracegrade grade --tenant` does
    with reading_store(store_path, token) as store, grading_for(chosen_tenant()):
        build_server(store, sql_timeout=SQL_TIMEOUT).run("stdio")  # run_sql stops where the UI's SQL page does
