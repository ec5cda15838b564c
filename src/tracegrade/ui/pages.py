"""The UI's pages as server-rendered HTML, from the data ``ui.api`` returns.

Every value from the store passes through ``_e`` (``html.escape``). Pages carry no inline script: the
one script, ``static/ui.js``, adds polling, lazy raw-span loading and the SQL box. A run's cases are the
HTML report's own case component (``HTMLReporter``), so a case looks the same in a report and here.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

from tracegrade.models.results import EvalReport
from tracegrade.reporters.html import HTMLReporter
from tracegrade.reporters.text import format_cost, format_duration
from tracegrade.ui.api import TraceFilters

__all__ = [
    "diff_page",
    "error_page",
    "login_page",
    "run_page",
    "runs_page",
    "sql_page",
    "trace_page",
    "trace_rows",
    "traces_page",
]

_NAV = (
    ("traces", "Traces", "/ui/"),
    ("runs", "Runs", "/ui/runs"),
    ("diff", "Diff", "/ui/diff"),
    ("sql", "SQL", "/ui/sql"),
)
_NOT_CAPTURED = '<span class="nc" title="the instrumentation did not record this content">content not captured</span>'
_PREVIEW = 120
_NAME_PREVIEW = 300  # a span's name in the waterfall (a name can be as long as any attribute value)
# a value shown in full on a page (a query, a response, a tool's arguments or result, a message) is cut here: a
# trace whose tools returned megabytes would otherwise make a page of megabytes; the API keeps the whole value
_PRE_LIMIT = 20_000


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _pre(value: Any) -> str:
    text = _json(value)
    if len(text) <= _PRE_LIMIT:
        return f"<pre>{_e(text)}</pre>"
    rest = len(text) - _PRE_LIMIT
    return (
        f'<pre>{_e(text[:_PRE_LIMIT])}<span class="cut">… {rest:,} more characters not shown here '
        "(the raw span and /ui/api/ have the whole value)</span></pre>"
    )


def _ms(value: Any) -> str:
    return "" if value is None else f"{float(value):,.1f} ms"


def _score(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}"


def _status(status: str | None) -> str:
    css = {"ERROR": "fail", "OK": "pass", "pass": "pass", "fail": "fail", "error": "error"}.get(status or "", "skip")
    return f'<span class="badge {css}">{_e(status or "UNSET")}</span>'


_NAV_END = "</nav>"
_SIGN_OUT = '<form method="post" action="/ui/logout" class="sign-out"><button type=submit>Sign out</button></form>'


def with_sign_out(page: str) -> str:
    """``page`` with a sign-out button at the end of its navigation bar (for a browser that signed in)."""
    return page.replace(_NAV_END, _SIGN_OUT + _NAV_END, 1)


def _layout(title: str, active: str, body: str, *, extra_css: str = "") -> str:
    nav = "".join(
        f'<a href="{href}"{" class=active" if key == active else ""}>{label}</a>' for key, label, href in _NAV
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{_e(title)} · tracegrade</title><link rel="icon" href="data:,">'
        '<link rel="stylesheet" href="/ui/static/report.css"><link rel="stylesheet" href="/ui/static/ui.css">'
        f"{extra_css}</head><body>"
        f'<nav class="top"><span class="brand">tracegrade</span>{nav}{_NAV_END}<main>{body}</main>'
        '<script src="/ui/static/ui.js"></script></body></html>'
    )


def _table(headers: Sequence[str], rows: str, *, css: str = "", body_id: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    tbody = f' id="{body_id}"' if body_id else ""
    table = f'<table class="grid {css}"><thead><tr>{head}</tr></thead><tbody{tbody}>{rows}</tbody></table>'
    return f'<div class="table-scroll">{table}</div>'  # a narrow screen scrolls the table, not the page


def _text_cell(value: Any, captured: bool = True) -> str:
    if value is None and not captured:
        return _NOT_CAPTURED
    text = "" if value is None else str(value)
    return _e(_clip(text, _PREVIEW))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- traces -------------------------------------------------------------------------------------------


def trace_rows(traces: list[dict[str, Any]], *, filtered: bool, next_cursor: str | None = None) -> str:
    """The table rows of a page of traces (also what the page's polling swaps in). The last row carries the
    next page's cursor, if there is one: the polling page points its "Older ›" link there."""
    if not traces:
        empty = (
            "No traces match these filters."
            if filtered
            else "No traces yet: send spans to <code>tracegrade serve</code> over OTLP, or load OTLP files with "
            "<code>tracegrade import</code>."
        )
        return f'<tr><td colspan="8" class="muted">{empty}</td></tr>'
    rows = []
    for n, t in enumerate(traces, start=1):
        link = f"/ui/traces/{quote(t['trace_id'])}"
        case = f'<span class="chip">{_e(t["case_id"])}</span>' if t.get("case_id") else ""
        following = f' data-next="{_e(next_cursor)}"' if next_cursor and n == len(traces) else ""
        trace_id = _e(t["trace_id"])
        rows.append(
            f'<tr data-trace="{trace_id}"{following}><td class="nowrap">'
            f'<a class="mono" href="{link}" title="{trace_id}">{_e(t["trace_id"][:16])}</a></td>'
            f"<td class=nowrap>{_e((t.get('start_time') or '')[:19].replace('T', ' '))}</td>"
            f'<td class="num">{_ms(t.get("duration_ms"))}</td><td>{_status(t.get("status"))}{_failed_spans(t)}</td>'
            f"<td class=text>{_e(t.get('service_name'))}<div class=muted>{_e(t.get('root_name'))}</div></td>"
            f'<td class="num">{t.get("tool_calls") or 0} / {t.get("llm_calls") or 0}</td>'
            f"<td class=text>{case}<div class=muted>{_e(t.get('convention'))}</div></td>"
            f'<td class="text wide">{_text_cell(t.get("user_query"), t.get("content_captured", True))}'
            f'<div class="muted">{_text_cell(t.get("final_response"), t.get("response_captured", True))}</div>'
            "</td></tr>"
        )
    return "".join(rows)


def _failed_spans(trace: dict[str, Any]) -> str:
    """How many spans failed, under the status of a run that did not fail itself (a tool that failed, say)."""
    failed = trace.get("error_spans") or 0
    if not failed or trace.get("status") == "ERROR":
        return ""
    return f'<div class="muted nowrap">{failed} span{"s" if failed > 1 else ""} failed</div>'


def _select(name: str, current: str | None, options: Sequence[tuple[str, str]]) -> str:
    items = "".join(
        f'<option value="{_e(value)}"{" selected" if value == (current or "") else ""}>{_e(label)}</option>'
        for value, label in options
    )
    return f'<select name="{name}" aria-label="{name}">{items}</select>'  # applied by the form's button (or Enter)


def _filter_form(filters: TraceFilters, facets: dict[str, list[str]]) -> str:
    def pick(name: str, values: list[str], everything: str) -> str:
        return _select(name, getattr(filters, name), [("", everything), *((v, v) for v in values)])

    return (
        '<form class="filters" method="get" action="/ui/" id="trace-filters">'
        f'<input type="search" name="text" value="{_e(filters.text)}" placeholder="Search query and response">'
        f'<input name="since" value="{_e(filters.since)}" placeholder="since (1h, 2026-01-31T12:00)" size="14">'
        f'<input name="until" value="{_e(filters.until)}" placeholder="until" size="10">'
        + _select(
            "status",
            filters.status,
            [("", "any status"), ("ok", "run ok"), ("error", "run failed"), ("span_error", "a span failed")],
        )
        + pick("service", facets["services"], "any service")
        + pick("convention", facets["conventions"], "any convention")
        + _select(
            "traffic", filters.traffic, [("", "all traffic"), ("eval", "eval cases"), ("production", "production")]
        )
        + f'<input name="case" value="{_e(filters.case)}" placeholder="case id" size="10">'
        + pick("tool", facets["tools"], "any tool")
        + '<button type="submit">Filter</button><a href="/ui/">Clear</a></form>'
    )


def traces_page(
    page: dict[str, Any], filters: TraceFilters, facets: dict[str, list[str]], query: dict[str, str]
) -> str:
    live = not query.get("cursor")  # only the newest page updates itself; a later page stays put
    following = ""
    if page["next_cursor"] or live:  # the live page's refresh moves the link to its last row (or shows it)
        older = _e(urlencode({**query, "cursor": page["next_cursor"] or ""}))
        hidden = "" if page["next_cursor"] else " hidden"
        following = f'<a class="button" data-older href="/ui/?{older}"{hidden}>Older ›</a>'
    newest = (
        f'<a class="button" href="/ui/?{_e(urlencode({k: v for k, v in query.items() if k != "cursor"}))}">‹ Newest</a>'
    )
    status = (
        '<span id="live" class="muted" data-live>live · refreshes every 5 s</span>'
        if live
        else '<span class="muted">older traces (not refreshing)</span>'
    )
    table = _table(
        [
            "trace",
            "started (UTC)",
            "duration",
            "status",
            "service / root",
            "tools / LLM",
            "case / convention",
            "query / response",
        ],
        trace_rows(page["traces"], filtered=filters.active(), next_cursor=page["next_cursor"]),
        body_id="trace-rows",
    )
    pager = f'<div class="pager">{"" if live else newest}{status}{following}</div>'
    bottom = f'<div class="pager">{"" if live else newest}{following}</div>'  # the live status once, above
    return _layout("Traces", "traces", f"<h1>Traces</h1>{_filter_form(filters, facets)}{pager}{table}{bottom}")


# --- one trace ----------------------------------------------------------------------------------------


def _span_tree(spans: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Spans in depth-first order with their depth; a span whose parent is missing counts as a root."""
    ids = {s["span_id"] for s in spans}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for s in spans:
        parent = s["parent_span_id"] if s["parent_span_id"] in ids else None
        children.setdefault(parent, []).append(s)
    ordered: list[tuple[int, dict[str, Any]]] = []
    stack = [(0, s) for s in reversed(children.get(None, []))]
    seen: set[str] = set()
    while stack:
        depth, span = stack.pop()
        if span["span_id"] in seen:  # a cycle of parent ids in broken data: show each span once
            continue
        seen.add(span["span_id"])
        ordered.append((depth, span))
        stack += [(depth + 1, c) for c in reversed(children.get(span["span_id"], []))]
    return ordered


def _waterfall(spans: list[dict[str, Any]], log_counts: dict[str, int]) -> str:
    if not spans:
        return "<p class=muted>No spans stored for this trace.</p>"
    start = min(s["start_ns"] for s in spans)
    width = max(max(s["end_ns"] for s in spans) - start, 1)
    rows = []
    for depth, s in _span_tree(spans):
        x = 1000 * (s["start_ns"] - start) / width
        w = max(1000 * max(s["end_ns"] - s["start_ns"], 0) / width, 2)
        css = "bar err" if s["status_code"] == "ERROR" else "bar"
        logs = log_counts.get(s["span_id"], 0)
        chip = f" <span class=chip>{logs} log{'s' if logs != 1 else ''}</span>" if logs else ""
        name = _e(_clip(s["name"], _NAME_PREVIEW))
        rows.append(
            f'<tr><td class="wf-name depth-{min(depth, 12)}">'
            f'<button type="button" class="link" data-span="{_e(s["span_id"])}">'
            f"{name}</button>{chip}</td>"
            f'<td class="num">{_ms(s["duration_ms"])}</td><td class="wf-bar"><svg viewBox="0 0 1000 10" '
            f'preserveAspectRatio="none" role="img" aria-label="{name}">'
            f'<rect class="{css}" x="{x:.1f}" y="1" width="{w:.1f}" height="8"/></svg></td></tr>'
        )
    return _table(["span", "duration", "timeline"], "".join(rows), css="waterfall")


def _raw_button(span_id: str | None) -> str:
    if not span_id:
        return ""
    return f'<button type="button" class="link raw" data-span="{_e(span_id)}">raw span</button>'


def _message_list(messages: list[dict[str, Any]]) -> str:
    if not messages:
        return ""
    items = "".join(
        f'<li><span class="role">{_e(m.get("role", ""))}</span>{_pre(m.get("content", m))}</li>' for m in messages
    )
    return f'<ol class="messages">{items}</ol>'


def _nodes(execution: dict[str, Any]) -> str:
    visits = execution.get("visits") or []
    if not visits:
        return "<p class=muted>No node visits.</p>"
    items = []
    for i, v in enumerate(visits, start=1):
        parent = f' <span class="muted">in {_e(v["parent_name"])}</span>' if v.get("parent_name") else ""
        group = (
            f' <span class="chip">parallel {v["parallel_group"]}</span>' if v.get("parallel_group") is not None else ""
        )
        took = (v.get("end_ns", 0) - v.get("start_ns", 0)) / 1e6 if v.get("end_ns") else None
        items.append(
            f'<li class="{"err" if v.get("status") == "ERROR" else ""}">{i}. <strong>{_e(v["name"])}</strong>'
            f"{parent}{group} <span class=muted>{_ms(took)}</span> {_raw_button(v.get('span_id'))}</li>"
        )
    return f'<ul class="tree">{"".join(items)}</ul>'


def _llm_calls(execution: dict[str, Any]) -> str:
    calls = execution.get("llm_calls") or []
    if not calls:
        return "<p class=muted>No LLM calls.</p>"
    items = []
    for i, c in enumerate(calls, start=1):
        usage = c.get("token_usage") or {}
        cost = f" · {format_cost(usage['cost_usd'])}" if usage.get("cost_usd") else ""
        took = (c["end_ns"] - c["start_ns"]) / 1e6 if c.get("end_ns") else None
        head = (
            f"{i}. <strong>{_e(c.get('model') or 'unknown model')}</strong> <span class=muted>{_e(c.get('provider'))}"
            f"{' · node ' + _e(c['node']) if c.get('node') else ''} · {usage.get('input_tokens', 0)} in / "
            f"{usage.get('output_tokens', 0)} out tokens{cost} · {_ms(took)}</span>"
            + (" <span class='badge fail'>error</span>" if c.get("error") else "")
        )
        if not c.get("content_captured", True):
            body = f"<p>{_NOT_CAPTURED}</p>"
        else:
            requested = ", ".join(t.get("name", "?") for t in c.get("tool_call_requests") or [])
            body = (
                (
                    f"<h4>Input messages</h4>{_message_list(c.get('input_messages') or [])}"
                    if c.get("input_messages")
                    else ""
                )
                + (f"<h4>Output</h4>{_pre(c['output_text'])}" if c.get("output_text") else "")
                + (f"<p>requested tools: <code>{_e(requested)}</code></p>" if requested else "")
            )
        if c.get("error"):
            body += f'<pre class="error-message">{_e(c["error"])}</pre>'
        finish = f"<p class=muted>finish reason: {_e(c['finish_reason'])}</p>" if c.get("finish_reason") else ""
        items.append(
            f'<details class="step llm"><summary>{head}</summary>{body}{finish}'
            f"{_raw_button(c.get('span_id'))}</details>"
        )
    return "".join(items)


def _tool_calls(execution: dict[str, Any]) -> str:
    calls = execution.get("tool_calls") or []
    if not calls:
        return "<p class=muted>No tool calls.</p>"
    items = []
    for i, c in enumerate(calls, start=1):
        error = c.get("error")
        took = c.get("duration_seconds")
        head = (
            f"{i}. <strong>{_e(c['name'])}</strong>"
            + (f" <span class=muted>id {_e(c['call_id'])}</span>" if c.get("call_id") else "")
            + (f" <span class=muted>{_ms(took * 1000)}</span>" if took is not None else "")
            + (" <span class='badge fail'>error</span>" if error else "")
        )
        args = _pre(c.get("args")) if c.get("args_captured", True) else _NOT_CAPTURED
        if error:
            result = f'<pre class="error-message">{_e(error)}</pre>'
        elif c.get("result_captured", True):
            result = _pre(c.get("result"))
        else:
            result = _NOT_CAPTURED
        items.append(
            f'<details class="step tool{" err" if error else ""}" data-tool="{_e(c["name"])}"><summary>{head}</summary>'
            f"<h4>Arguments</h4>{args}<h4>{'Error' if error else 'Result'}</h4>{result}"
            f"{_raw_button(c.get('span_id'))}</details>"
        )
    return "".join(items)


def _runs_of_trace(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "<p class=muted>No recorded grading run includes this trace.</p>"
    rows = "".join(
        f'<tr><td><a href="/ui/runs/{quote(r["run_id"])}">{_e(r["run_id"])}</a></td><td>{_e(r["kind"])}</td>'
        f"<td>{_e(r['eval_id'])}</td><td>{_status('error' if r['error'] else 'pass' if r['passed'] else 'fail')}</td>"
        f'<td class="num">{_score(r["mean_score"])}</td></tr>'
        for r in runs
    )
    return _table(["run", "kind", "case", "result", "score"], rows)


def trace_page(detail: dict[str, Any]) -> str:
    trace, execution = detail["trace"] or {}, detail["execution"]
    trace_id = detail["trace_id"]
    meta = " · ".join(
        _e(x)
        for x in (
            trace.get("service_name"),
            trace.get("root_name"),
            (trace.get("start_time") or "")[:23].replace("T", " "),
            _ms(trace.get("duration_ms")),
            f"{trace.get('span_count', len(detail['spans']))} spans",
            trace.get("convention") and f"convention {trace['convention']}",
            trace.get("case_id") and f"case {trace['case_id']}",
        )
        if x
    )
    parts = [
        f"<header><h1>Trace <code>{_e(trace_id)}</code></h1>"
        f'<div class="meta">{_status(trace.get("status"))} {meta}</div></header>'
    ]
    if execution is None:
        parts.append(
            "<p class=muted>No trajectory yet: the server maps a trace shortly after its last span arrives.</p>"
        )
    else:
        if execution.get("error"):
            parts.append(f'<pre class="error-message">{_e(execution["error"])}</pre>')
        if trace.get("dropped_attributes"):
            parts.append(
                f'<div class="warn-inline">⚠ the SDK dropped {trace["dropped_attributes"]} attributes: '
                "content may be missing</div>"
            )
        for issue in execution.get("mapping_issues") or []:
            parts.append(f'<div class="warn-inline">⚠ {_e(issue)}</div>')
        query = _pre(execution["user_query"]) if execution.get("user_query") is not None else _NOT_CAPTURED
        response = _pre(execution.get("actual_response")) if execution.get("response_captured", True) else _NOT_CAPTURED
        parts += [
            f'<section class="io"><div><h3>User query</h3>{query}</div>'
            f"<div><h3>Final response</h3>{response}</div></section>",
            '<div class="columns"><section class="trajectory">',
            f"<h2>Nodes</h2>{_nodes(execution)}",
            f"<h2>Tool calls ({len(execution.get('tool_calls') or [])})</h2>{_tool_calls(execution)}",
            f"<h2>LLM calls ({len(execution.get('llm_calls') or [])})</h2>{_llm_calls(execution)}",
            "</section>",
        ]
    if execution is None:
        parts.append('<div class="columns"><section class="trajectory"></section>')
    parts += [
        f'<section class="timing"><h2>Spans and timing</h2>{_waterfall(detail["spans"], detail["log_counts"])}',
        f'<div id="raw-panel" class="raw-panel" data-trace="{_e(trace_id)}" hidden><h3>Raw span <button type="button" '
        'class="link" data-close>close</button></h3><pre id="raw-span"></pre>'
        '<h3>Logs</h3><pre id="raw-logs"></pre></div>',
        "</section></div>",
        f"<h2>Graded in runs</h2>{_runs_of_trace(detail['runs'])}",
    ]
    return _layout(f"Trace {trace_id[:12]}", "traces", "".join(parts))


# --- runs ---------------------------------------------------------------------------------------------


def _rate_text(run: dict[str, Any]) -> str:
    """``71% [36%–92%]``: the pass rate and its 95% interval."""
    rate, interval = run.get("pass_rate"), run.get("pass_rate_interval")
    if rate is None:
        return ""
    return f"{rate:.0%}" + (f" [{interval[0]:.0%}–{interval[1]:.0%}]" if interval else "")


def _rate(run: dict[str, Any]) -> str:
    rate, _, interval = _rate_text(run).partition(" ")
    return _e(rate) + (f' <span class="muted">{_e(interval)}</span>' if interval else "")


def runs_page(runs: list[dict[str, Any]]) -> str:
    if not runs:
        body = "<p class=muted>No grading runs recorded yet (run <code>tracegrade grade</code>).</p>"
    else:
        rows = "".join(
            f'<tr><td class=nowrap><a href="/ui/runs/{quote(r["run_id"])}">{_e(r["run_id"])}</a></td>'
            f"<td class=nowrap>{_e((r.get('created_at') or '')[:19].replace('T', ' '))}</td><td>{_e(r['kind'])}</td>"
            f"<td class=text>{_e(r.get('eval_set_name') or r.get('eval_set_id'))}</td>"
            f'<td class="num">{r["passed_cases"]}/{r["total_cases"]}</td><td class="num">{_rate(r)}</td>'
            f'<td class="num">{format_cost(r["cost_usd"] or 0.0)}</td>'
            f'<td class="num">{format_duration(r["duration_s"] or 0.0)}</td></tr>'
            for r in runs
        )
        body = _table(
            ["run", "recorded (UTC)", "kind", "eval set", "passed", "pass rate [95% CI]", "judge cost", "duration"],
            rows,
        )
    return _layout("Runs", "runs", f"<h1>Runs</h1>{body}")


def run_page(run: dict[str, Any], report: EvalReport) -> str:
    cases = HTMLReporter()._case  # the report's own case component: one rendering of a case, not two
    s = report.summary
    header = (
        f'<header><h1>Run <code>{_e(run["run_id"])}</code></h1><div class="meta">{_e(report.display_name)} · '
        f"{_e(run.get('kind'))} · {s.passed_cases}/{s.total_cases} passed ({_rate(run)}) · "
        f"{format_duration(s.total_duration_seconds)} · {format_cost(run.get('cost_usd') or 0.0)} judge cost · "
        f'<a href="/ui/diff?b={quote(run["run_id"])}">compare…</a></div></header>'
    )
    listed = "".join(cases(r) for r in report.results) or "<p class=muted>No cases.</p>"
    return _layout(
        f"Run {run['run_id']}",
        "runs",
        f'{header}<h2>Cases (failing first)</h2><div class="case-list" id="case-list">{listed}</div>',
    )


def _run_select(name: str, current: str | None, runs: list[dict[str, Any]]) -> str:
    options = [("", "choose a run")] + [
        (r["run_id"], f"{r['run_id']} · {r.get('eval_set_name') or r.get('eval_set_id')} · {_rate_text(r)}")
        for r in runs
    ]
    return _select(name, current, options)


def _case_status(status: str | None) -> str:
    return _status(status) if status else "–"  # the case is missing from that run


def _delta(a: float | None, b: float | None) -> str:
    return "" if a is None or b is None else f" ({b - a:+.2f})"


def _criterion_change(change: dict[str, Any]) -> str:
    """A criterion's scores in runs A and B, or, where it errored (no verdict), its error there."""
    errors = [(run, change.get(f"error_{run.lower()}")) for run in ("A", "B")]
    if any(error for _, error in errors):
        return "; ".join(f"errored in {run}: {_e(error)}" for run, error in errors if error)
    a, b = change["score_a"], change["score_b"]
    return f"{_score(a)} → {_score(b)}{_delta(a, b)}"


def diff_page(
    runs: list[dict[str, Any]], a: str | None, b: str | None, diff: dict[str, Any] | None, error: str | None = None
) -> str:
    """Two runs compared, under the pickers; ``error`` (an unknown run id…) is shown under them instead, so that
    the user can pick again."""
    form = (
        '<form class="filters" method="get" action="/ui/diff" id="diff-form">'
        f"A {_run_select('a', a, runs)} B {_run_select('b', b, runs)}<button type=submit>Compare</button></form>"
    )
    if error is not None:
        problem = f'<pre class="error-message">{_e(error)}</pre><p class=muted>Pick two runs to compare.</p>'
        return _layout("Diff", "diff", f"<h1>Diff</h1>{form}{problem}")
    if diff is None:
        return _layout("Diff", "diff", f"<h1>Diff</h1>{form}<p class=muted>Pick two runs to compare.</p>")
    summary = " · ".join(f"{n} {k}" for k, n in diff["summary"].items() if n)
    rates = diff["pass_rate"]
    order = {"regressed": 0, "improved": 1, "errored": 2, "changed": 3, "added": 4, "removed": 5, "unchanged": 6}
    rows = []
    for c in sorted(diff["cases"], key=lambda c: order.get(c["kind"], 9)):
        criteria = "".join(
            f'<li class="{x["kind"]}">{_e(x["criterion"])}: {_criterion_change(x)}</li>' for x in c["criteria"]
        )
        where = c.get("diverges_at")
        diverges = (
            f"<div>diverges at {_e(where['kind'])} {where['step'] + 1}: <code>{_e(where['a'])}</code> → "
            f"<code>{_e(where['b'])}</code></div>"
            if where
            else ""
        )
        changes = "".join(f"<div class=muted>{_e(t)}</div>" for t in c["trajectory_changes"])
        rows.append(
            f'<tr class="diff-{c["kind"]}" data-kind="{c["kind"]}"><td class=text>{_e(c["name"] or c["eval_id"])}'
            f'<div class=muted>{_e(c["eval_id"])}</div></td><td><span class="chip {c["kind"]}">{c["kind"]}</span></td>'
            f"<td class=nowrap>{_case_status(c['status_a'])} → {_case_status(c['status_b'])}</td>"
            f'<td class=text><ul class="deltas">{criteria}</ul></td><td class=text>{diverges}{changes}</td></tr>'
        )
    body = f'<p class="meta">pass rate {rates["a"]:.0%} → {rates["b"]:.0%} · {_e(summary)}</p>' + _table(
        ["case", "change", "status A → B", "criteria A → B", "trajectory"], "".join(rows), css="diff"
    )
    return _layout("Diff", "diff", f"<h1>Diff</h1>{form}{body}")


# --- SQL, login, errors -------------------------------------------------------------------------------


def sql_page(tables: dict[str, list[dict[str, str]]], sql: str) -> str:
    def columns(cols: list[dict[str, str]]) -> str:
        return "".join(f"<li>{_e(c['name'])} <span class=muted>{_e(c['type'])}</span></li>" for c in cols)

    schema = "".join(
        f'<details><summary><button type="button" class="link" data-table="{_e(t)}">{_e(t)}</button></summary>'
        f"<ul>{columns(cols)}</ul></details>"
        for t, cols in tables.items()
    )
    example = sql or "SELECT trace_id, start_time, status, user_query FROM traces ORDER BY start_time DESC LIMIT 20"
    body = (
        '<h1>SQL</h1><div class="sql-layout"><div><form id="sql-form" method="get" action="/ui/sql">'
        f'<textarea name="q" id="sql-text" rows="8" spellcheck="false">{_e(example)}</textarea>'
        '<div><button type="submit">Run (Ctrl+Enter)</button> <span class="muted">one read-only SELECT; '
        'the store refuses anything else</span></div></form><div id="sql-status" class="muted"></div>'
        f'<div id="sql-result"></div></div><aside class="schema"><h3>Schema</h3>{schema}</aside></div>'
    )
    return _layout("SQL", "sql", body)


def login_page(error: str | None, next_url: str, token: str = "") -> str:
    """The sign-in form (``token`` filled in: a link's token, for the user to confirm)."""
    problem = f'<div class="warn-inline">{_e(error)}</div>' if error else ""
    body = (
        f"<h1>Sign in</h1>{problem}<p>This tracegrade server shows its traces and grading runs to those who have "
        "its access token. Paste the token you were given for it: whoever runs the server chose it when starting "
        "the server, and can give it to you (or a sign-in link, which has it in, and signs you in when opened).</p>"
        "<p class=muted>Once signed in, this browser stays signed in to this server's pages, with a cookie that "
        "holds no copy of the token, until you sign out or the token is changed.</p>"
        '<form method="post" action="/ui/login" class="login">'
        f'<input type="hidden" name="next" value="{_e(next_url)}">'
        f'<input type="password" name="token" value="{_e(token)}" autocomplete="current-password" placeholder="token" '
        'aria-label="token" required autofocus><button type=submit>Sign in</button></form>'
    )
    return _layout("Sign in", "", body)


def error_page(status: int, message: str) -> str:
    return _layout(f"Error {status}", "", f'<h1>Error {status}</h1><pre class="error-message">{_e(message)}</pre>')
