"""HTML report: one self-contained page (inline CSS and a short inline script, nothing fetched).

Every piece of report text passes through :func:`_esc` (control characters made visible, then
``html.escape(quote=True)``); the script is a constant and reads nothing but escaped attributes; a
Content-Security-Policy meta tag forbids loading anything from elsewhere.

Runs of any size stay small and quick to open: each case is rendered once, by :meth:`HTMLReporter._case`;
the first page of cases is in the document, and all of them ride along gzip-compressed in one attribute,
from which the script pages, filters and searches (case HTML, one case much like the next, compresses well).

The page is built in pieces (:meth:`HTMLReporter.pieces`), a case at a time, and a file is written piece by piece:
a run of 10,000 cases otherwise holds every case's HTML, their JSON, its gzip and base64, the page and its UTF-8
bytes at once (figures: bench/RESULTS.md). The pieces join into the very text the page was built as in one go.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import struct
import time
import zlib
from collections.abc import Collection, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, TokenUsage
from tracegrade.reporters.base import FileReporter
from tracegrade.reporters.case_view import (
    STATUS_ICONS,
    STATUS_LABELS,
    case_display_name,
    case_outcome,
    case_score,
    case_warnings,
    criterion_status,
    criterion_warnings,
    expectation_note,
    llm_output_views,
    message_views,
    node_visit_names,
    partial_item_text,
    run_status,
    run_trials_text,
    run_warnings,
    samples_text,
    skipped_case_count,
    split_details,
    step_views,
    tool_call_views,
    trials_text,
    turn_views,
)
from tracegrade.reporters.text import (
    clean_text,
    format_cost,
    format_duration,
    format_score,
    format_timestamp,
    format_usage,
    shorten,
    to_json_text,
)

__all__ = ["HTMLReporter"]

VALUE_LIMIT = 20_000  # characters per value shown on the page (the JSON report keeps everything)
PAGE_SIZE = 50  # cases in the document at once: a page of any run size opens and paints quickly

_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

_SCRIPT = r"""
(function () {
  var list = document.getElementById('case-list');
  if (!list) { return; }
  var buttons = Array.prototype.slice.call(document.querySelectorAll('.filters button[data-filter]'));
  var search = document.getElementById('case-search');
  var pager = document.getElementById('case-pager');
  var size = parseInt(list.getAttribute('data-page-size'), 10);
  var filter = 'all', page = 0, cases = null, shown = [];
  function keep(c) {
    var query = search ? search.value.toLowerCase() : '';
    var status = filter === 'all' || c[0] === filter || (filter === 'warn' && c[1]);
    return status && (!query || c[2].indexOf(query) !== -1);
  }
  function render() {
    shown = cases.filter(keep);
    var pages = Math.max(1, Math.ceil(shown.length / size));
    page = Math.min(page, pages - 1);
    var first = page * size, slice = shown.slice(first, first + size);
    list.innerHTML = slice.map(function (c) { return c[3]; }).join('');
    pager.querySelector('.range').textContent = shown.length ?
      'cases ' + (first + 1) + '-' + (first + slice.length) + ' of ' + shown.length : 'no matching cases';
    pager.querySelector('[data-page=prev]').disabled = page === 0;
    pager.querySelector('[data-page=next]').disabled = page >= pages - 1;
  }
  function ready(data) {
    cases = data;
    list.setAttribute('data-ready', String(cases.length));
    var wanted = /filter=(\w+)/.exec(location.hash), at = /page=(\d+)/.exec(location.hash);  // a link to a page
    if (wanted) { filter = wanted[1]; }
    if (at) { page = Math.max(0, parseInt(at[1], 10) - 1); }
    buttons.forEach(function (x) { x.classList.toggle('active', x.getAttribute('data-filter') === filter); });
    buttons.forEach(function (b) {
      b.addEventListener('click', function () {
        filter = b.getAttribute('data-filter');
        page = 0;
        buttons.forEach(function (x) { x.classList.toggle('active', x === b); });
        render();
      });
    });
    if (search) { search.addEventListener('input', function () { page = 0; render(); }); }
    pager.addEventListener('click', function (e) {
      var step = e.target.getAttribute && e.target.getAttribute('data-page');
      if (step) { page += step === 'next' ? 1 : -1; render(); window.scrollTo(0, list.offsetTop - 80); }
    });
    render();
  }
  var toggle = document.getElementById('expand-all');
  if (toggle) {
    toggle.addEventListener('click', function () {
      var open = Array.prototype.slice.call(list.querySelectorAll('.case'));
      var state = !open.every(function (c) { return c.open; });
      open.forEach(function (c) { c.open = state; });
    });
  }
  // The cases travel gzip-compressed (base64) so that a run of any size stays a small page; the first page
  // is already in the document, so nothing waits for this.
  var packed = list.getAttribute('data-cases');
  if (!window.DecompressionStream) {
    pager.querySelector('.range').textContent = 'this browser cannot unpack the other cases';
    return;
  }
  var raw = atob(packed), bytes = new Uint8Array(raw.length);
  for (var i = 0; i < raw.length; i++) { bytes[i] = raw.charCodeAt(i); }
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  new Response(stream).text().then(function (text) { ready(JSON.parse(text)); });
})();
"""


_GZIP_LEVEL = 6


class _CasePacker:
    """The ``data-cases`` attribute, a case at a time: every case as ``[status, has warnings, search text, its
    HTML]`` in one JSON array, gzip-compressed, base64-encoded (attribute-safe).

    The text is what ``base64(gzip.compress(json.dumps(all cases), 6, mtime=0))`` gives, byte for byte: the
    header is the one :func:`gzip.compress` writes (its OS byte differs between Python versions), zlib's deflate
    waits for a full lookahead before it decides anything, so its output does not depend on how its input is split
    (tests/test_html_stream_pieces.py checks it against one ``gzip.compress``), and base64 of a byte string is
    base64 of its 3-byte-aligned parts.
    """

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)  # raw: header and trailer ours
        self._crc = 0
        self._size = 0
        self._pending = gzip.compress(b"", compresslevel=_GZIP_LEVEL, mtime=0)[:10]  # bytes not yet in base64
        self._opened = False

    def add(self, result: EvalCaseResult, html_text: str) -> str:
        """Take one case (``html_text``: its rendered HTML); returns the base64 text that is complete so far."""
        entry = [case_outcome(result), bool(case_warnings(result)), _search_text(result), html_text]
        text = ("," if self._opened else "[") + json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
        self._opened = True
        return self._encoded(self._compressed(text.encode("utf-8")))

    def close(self) -> str:
        """The rest of the attribute's text: the array closed, the compressed stream finished."""
        tail = self._compressed(b"]" if self._opened else b"[]") + self._deflate.flush()
        trailer = struct.pack("<LL", self._crc, self._size & 0xFFFFFFFF)
        return self._encoded(tail + trailer, final=True)

    def _compressed(self, data: bytes) -> bytes:
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        return self._deflate.compress(data)

    def _encoded(self, data: bytes, *, final: bool = False) -> str:
        data = self._pending + data
        cut = len(data) if final else len(data) - len(data) % 3  # base64 of a 3-byte group never changes
        self._pending = data[cut:]
        return base64.b64encode(data[:cut]).decode("ascii")


def _search_text(result: EvalCaseResult) -> str:
    """What the case filter matches: name and id, lower-cased, with control characters (and lone surrogates,
    which UTF-8 cannot encode) made visible as everywhere else on the page."""
    return clean_text(f"{case_display_name(result)} {result.eval_id}").lower()


def _stylesheet() -> str:
    return resources.files("tracegrade.reporters").joinpath("report.css").read_text(encoding="utf-8")


def _esc(value: Any, limit: int | None = VALUE_LIMIT) -> str:
    """Untrusted value -> safe HTML text (also safe inside a double- or single-quoted attribute)."""
    text = value if isinstance(value, str) else to_json_text(value)
    return html.escape(shorten(clean_text(text), limit), quote=True)


def _pre(value: Any, css: str = "") -> str:
    text = value if isinstance(value, str) else to_json_text(value, indent=2)
    cls = f' class="{css}"' if css else ""
    return f"<pre{cls}>{_esc(text)}</pre>"


def _badge(status: str) -> str:
    return f'<span class="badge {status}">{STATUS_ICONS[status]} {STATUS_LABELS[status]}</span>'


def _bar(fraction: float) -> str:
    pct = max(0.0, min(1.0, fraction)) * 100
    return f'<div class="bar" role="img" aria-label="{pct:.0f}%"><span style="width:{pct:.1f}%"></span></div>'


def _table(headers: list[str], rows: list[str], numeric: Collection[str] = ()) -> str:
    head = "".join(f"<th{' class=num' if h in numeric else ''}>{h}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _section(title: str, body: str, *, collapsed: bool = False) -> str:
    if collapsed:
        return f"<section><details><summary><h3 class='inline'>{title}</h3></summary>{body}</details></section>"
    return f"<section><h3>{title}</h3>{body}</section>"


def _traceback(traceback: str | None) -> str:
    """An agent's traceback, folded under its error: the error line already names the user's frame, the rest is
    there to open (as the console shows it with ``-v``)."""
    if not traceback:
        return ""
    body = _pre(traceback.rstrip(), "error-traceback")
    return f'<details class="traceback"><summary>Traceback</summary>{body}</details>'


def _usage_cell(usage: TokenUsage) -> str:
    return "-" if usage.is_zero() else _esc(format_usage(usage))


class HTMLReporter(FileReporter):
    """Renders the report as a single self-contained HTML page."""

    default_filename = "report.html"

    def __init__(
        self,
        include_details: bool = True,
        include_actual_response: bool = True,
        include_tool_call_details: bool = True,
        include_node_responses: bool = True,
        include_trajectory: bool = True,
    ) -> None:
        self.include_details = include_details
        self.include_actual_response = include_actual_response
        self.include_tool_call_details = include_tool_call_details
        self.include_node_responses = include_node_responses
        self.include_trajectory = include_trajectory

    def to_html(self, report: EvalReport) -> str:
        return "".join(self.pieces(report))

    def render(self, report: EvalReport) -> str:
        return self.to_html(report)

    def pieces(self, report: EvalReport) -> Iterator[str]:
        """``render(report)`` in consecutive pieces: the page down to the cases, then the cases a few at a time,
        then the rest."""
        name = _esc(report.display_name, 200)
        yield (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>Evaluation Report: {name}</title>\n<style>\n{_stylesheet()}</style>\n</head>\n"
            "<body>\n<main>\n"
        )
        yield "\n".join(
            [
                self._header(report),
                self._warnings(run_warnings(report)),
                self._summary(report),
                self._criteria(report),
                "",  # the cases follow, each section on its own line as before
            ]
        )
        yield from self._cases(report)
        # the clock is read once the cases are written, as when the page was one string
        yield (
            f"\n<footer>Generated by tracegrade · {_esc(format_timestamp(time.time()))}</footer>"
            f"\n</main>\n<script>{_SCRIPT}</script>\n</body>\n</html>\n"
        )

    @classmethod
    def quick_save(cls, report: EvalReport, path: str | Path) -> str:
        return cls().save(report, path)

    # --- page sections ----------------------------------------------------------------------------

    @staticmethod
    def _header(report: EvalReport) -> str:
        return (
            "<header><h1>Evaluation Report</h1>"
            f'<div class="set-name">{_esc(report.display_name, 500)}</div>'
            f'<div class="meta">Eval set <code>{_esc(report.eval_set_id, 500)}</code> · run at '
            f"{_esc(format_timestamp(report.timestamp))} · status <strong>{run_status(report)}</strong></div>"
            "</header>"
        )

    @staticmethod
    def _warnings(warnings: list[str]) -> str:
        if not warnings:
            return ""
        items = "".join(f"<li>{_esc(w)}</li>" for w in warnings)
        return (
            f'<section class="warnings" role="alert"><h2>⚠ Warnings ({len(warnings)})</h2>'
            "<p>Some results below are not trustworthy until these are fixed.</p>"
            f"<ul>{items}</ul></section>"
        )

    @staticmethod
    def _summary(report: EvalReport) -> str:
        s = report.summary
        judge = s.judge_token_usage
        skipped = skipped_case_count(report)
        cards = [
            ("", "Total cases", str(s.total_cases), ""),
            ("pass", "Passed", str(s.passed_cases), f"{skipped} with every criterion skipped" if skipped else ""),
            ("fail", "Failed", str(s.failed_cases), ""),
            ("error", "Errors", str(s.error_cases), ""),
            ("", "Pass rate", f"{s.pass_rate * 100:.1f}%", _bar(s.pass_rate)),
            *([("", "Trials", str(s.num_runs), _esc(run_trials_text(report)))] if s.pass_rate_ci else []),
            (
                "",
                "Duration",
                format_duration(s.total_duration_seconds),
                f"avg {format_duration(s.avg_duration_seconds)}",
            ),
            (
                "",
                "Tokens",
                f"{s.total_token_usage.total_tokens:,}",
                f"agent {s.agent_token_usage.total_tokens:,} · judge {judge.total_tokens:,}",
            ),
            ("", "Judge cost", format_cost(judge.cost_usd), f"{judge.calls:,} judge calls"),
        ]
        html_cards = "".join(
            f'<div class="card {css}"><div class="label">{label}</div><div class="value">{_esc(value)}</div>'
            f'<div class="sub">{sub}</div></div>'
            for css, label, value, sub in cards
        )
        return f'<section class="summary"><div class="cards">{html_cards}</div></section>'

    @staticmethod
    def _criteria(report: EvalReport) -> str:
        stats = report.summary.criterion_stats
        if not stats:
            return ""
        rows = [
            f"<tr><td><code>{_esc(name)}</code></td><td class=num>{st.passed}/{st.total}</td>"
            f"<td class=num>{st.failed}</td><td class=num>{st.skipped}</td><td class=num>{st.errors}</td>"
            f"<td>{_bar(st.pass_rate)} {st.pass_rate * 100:.1f}%</td><td class=num>{format_score(st.avg_score)}</td>"
            f"<td class=num>{st.token_usage.total_tokens:,}</td>"
            f"<td class=num>{format_cost(st.token_usage.cost_usd)}</td></tr>"
            for name, st in stats.items()
        ]
        headers = [
            "Criterion",
            "Passed",
            "Failed",
            "Skipped",
            "Errors",
            "Pass rate",
            "Avg score",
            "Judge tokens",
            "Judge cost",
        ]
        return (
            "<section><h2>Criteria</h2>"
            + _table(headers, rows, set(headers) - {"Criterion", "Pass rate"})
            + "</section>"
        )

    def _cases(self, report: EvalReport) -> Iterator[str]:
        """The cases section in pieces: its head, the packed cases as each case is rendered, the first page."""
        if not report.results:
            yield "<section><h2>Cases</h2><p class=muted>No cases.</p></section>"
            return
        filters = "".join(
            f'<button type="button" data-filter="{key}"{" class=active" if key == "all" else ""}>{label}</button>'
            for key, label in (
                ("all", "All"),
                ("pass", "Passed"),
                ("fail", "Failed"),
                ("error", "Errors"),
                ("skipped", "Skipped"),
                ("xfail", "Expected failures"),
                ("xpass", "Unexpected passes"),
                ("warn", "Warnings"),
            )
        )
        bar = (
            f'<div class="filters">{filters}<input id="case-search" type="search" '
            'placeholder="Filter by case name or id" aria-label="Filter cases">'
            '<button type="button" id="expand-all">Expand / collapse all</button></div>'
        )
        total = len(report.results)
        pager = (
            '<div class="pager" id="case-pager"><button type="button" data-page="prev" disabled>‹ Previous</button>'
            f'<span class="range">cases 1-{min(PAGE_SIZE, total)} of {total}</span>'
            f'<button type="button" data-page="next"{"" if total > PAGE_SIZE else " disabled"}>Next ›</button>'
            "</div>"
        )
        yield (
            f"<section><h2>Cases ({total})</h2>{bar}{pager}"
            f'<div class="case-list" id="case-list" data-page-size="{PAGE_SIZE}" data-cases="'
        )
        packer = _CasePacker()
        first_page: list[str] = []  # shown in the document, after the attribute that holds every case
        for result in report.results:
            html_text = self._case(result)
            if len(first_page) < PAGE_SIZE:
                first_page.append(html_text)
            packed = packer.add(result, html_text)
            if packed:
                yield packed
        yield f'{packer.close()}">'
        yield from first_page  # one at a time: the first page is never copied into one string
        yield "</div></section>"

    # --- one case ---------------------------------------------------------------------------------

    def _case(self, result: EvalCaseResult) -> str:
        status = case_outcome(result)
        warnings = case_warnings(result)
        search = _search_text(result)
        summary = (
            f"{_badge(status)}"
            f'<span class="name">{_esc(case_display_name(result), 300)}</span>'
            + (f'<span class="muted">{_esc(result.eval_id, 200)}</span>' if result.name else "")
            + (
                f'<span class="badge warn">⚠ {len(warnings)} warning{"s" if len(warnings) != 1 else ""}</span>'
                if warnings
                else ""
            )
            + f'<span class="right">score {format_score(case_score(result))} · '
            f"{format_duration(result.duration_seconds)} · {result.token_usage.total_tokens:,} tokens</span>"
        )
        note = expectation_note(result)
        parts = [f'<div class="warn-inline">{STATUS_LABELS[status]}: {_esc(note)}</div>'] if note else []
        if result.error is not None:
            parts.append(_section("Error", _pre(result.error, "error-message") + _traceback(result.error_traceback)))
        parts += [f'<div class="warn-inline">⚠ {_esc(w)}</div>' for w in warnings]
        if result.criterion_results:
            parts.append(_section("Criteria", self._criteria_table(result.criterion_results)))
        if self.include_actual_response:
            parts.append(_section("Agent response", _pre(result.actual_response or "(empty)")))
        if self.include_trajectory:
            parts.append(self._trajectory(result))
        if self.include_tool_call_details:
            parts.append(self._tool_calls(result))
        visits = node_visit_names(result.node_visits)
        if visits:
            chips = " → ".join(f"<code>{_esc(v, 200)}</code>" for v in visits)
            parts.append(_section(f"Node visits ({len(visits)})", f'<div class="visits">{chips}</div>'))
        if self.include_node_responses:
            parts.append(self._llm_outputs(result))
        parts.append(self._turns(result))
        parts.append(self._messages(result))
        parts.append(self._tokens(result))
        if result.metadata:
            parts.append(_section("Metadata", _pre(result.metadata), collapsed=True))
        warn_attr = " data-warn" if warnings else ""
        open_attr = " open" if status != "pass" or warnings else ""
        return (
            f'<details class="case {status}" data-status="{status}" data-search="{_esc(search, 500)}"'
            f"{warn_attr}{open_attr}><summary>{summary}</summary>"
            f'<div class="case-body">{"".join(parts)}</div></details>'
        )

    def _criteria_table(self, results: list[CriterionResult]) -> str:
        rows = []
        for c in results:
            status = criterion_status(c)
            reason, partial, rest = split_details(c.details)
            score = "skipped" if status == "skipped" else f"{format_score(c.score)} / {c.threshold}"
            if c.trial_stats is not None:
                score += f" ({_esc(trials_text(c.trial_stats))})"
            if samples_text(c):
                score += f'<div class="samples">{_esc(samples_text(c))}</div>'
            notes = "".join(f'<div class="warn-inline">⚠ {_esc(w)}</div>' for w in criterion_warnings(c))
            if c.error is not None:
                notes += _pre(c.error, "error-message")
            rows.append(
                f'<tr class="criterion {status}"><td>{_badge(status)}</td><td><code>{_esc(c.criterion)}</code></td>'
                f"<td class=num>{score}</td><td>{_esc(reason or '')}{notes}</td>"
                f"<td class=num>{_usage_cell(c.token_usage)}</td></tr>"
            )
            if self.include_details and (partial or rest):
                detail = self._partial_credit(partial) + (_pre(rest) if rest else "")
                if status in ("fail", "error"):
                    rows.append(f"<tr><td></td><td colspan=4>{detail}</td></tr>")
                else:
                    rows.append(
                        f"<tr><td></td><td colspan=4><details><summary>details</summary>{detail}</details></td></tr>"
                    )
        return _table(
            ["Status", "Criterion", "Score / threshold", "Reason", "Judge usage"],
            rows,
            {"Score / threshold", "Judge usage"},
        )

    @staticmethod
    def _partial_credit(partial: dict[str, list[Any]]) -> str:
        blocks = []
        for key, items in partial.items():
            entries = "".join(f"<li>{_esc(partial_item_text(item))}</li>" for item in items)
            entries = entries or "<li class=muted>none</li>"
            blocks.append(f'<div class="{key}"><h4>{key.capitalize()} ({len(items)})</h4><ul>{entries}</ul></div>')
        return f'<div class="partial">{"".join(blocks)}</div>' if blocks else ""

    @staticmethod
    def _trajectory(result: EvalCaseResult) -> str:
        steps = step_views(result.actual_trajectory)
        if not steps:
            return ""
        items = []
        for step in steps:
            kind = step.kind if step.kind in ("node", "tool", "conditional", "message") else "step"
            label = "routing" if kind == "conditional" else kind
            extra = _pre(step.args) if step.args else ""
            if step.metadata:
                extra += f'<div class="muted">{_esc(to_json_text(step.metadata), 2000)}</div>'
            items.append(
                f'<li class="step-{kind}"><span class="step-kind">{label}</span>'
                f"<code>{_esc(step.name, 500)}</code>{extra}</li>"
            )
        return _section(f"Trajectory ({len(steps)} steps)", f'<ol class="trajectory">{"".join(items)}</ol>')

    @staticmethod
    def _tool_calls(result: EvalCaseResult) -> str:
        calls = tool_call_views(result.actual_tool_calls)
        if not calls:
            return ""
        rows = []
        for call in calls:
            args = _pre(call.args) if call.args_captured else "<span class=muted>not captured</span>"
            if call.error:
                outcome = _pre(call.error, "error-message")
            elif not call.result_captured:
                outcome = "<span class=muted>not captured</span>"
            else:
                outcome = _pre(call.result) if call.result is not None else ""
            duration = "" if call.duration_seconds is None else _esc(format_duration(float(call.duration_seconds)))
            rows.append(
                f"<tr><td><code>{_esc(call.name, 300)}</code></td><td>{_esc(call.call_id or '', 200)}</td>"
                f"<td>{args}</td><td>{outcome}</td><td class=num>{duration}</td></tr>"
            )
        return _section(
            f"Tool calls ({len(calls)})",
            _table(["Tool", "Call ID", "Arguments", "Result", "Duration"], rows, {"Duration"}),
        )

    @staticmethod
    def _llm_outputs(result: EvalCaseResult) -> str:
        outputs = llm_output_views(result)
        if not outputs:
            return ""
        rows = [
            f"<tr><td><code>{_esc(o.node, 300)}</code>{' <span class=badge>final</span>' if o.is_final else ''}</td>"
            f"<td>{_esc(o.model or '', 200)}</td><td>{_pre(o.text) if o.text else ''}</td>"
            f"<td>{_esc(', '.join(o.tool_names))}</td>"
            f"<td class=num>{_usage_cell(o.token_usage) if o.token_usage else '-'}</td></tr>"
            for o in outputs
        ]
        return _section(
            f"LLM output per node ({len(outputs)})",
            _table(["Node", "Model", "Output", "Tool calls", "Tokens"], rows, {"Tokens"}),
            collapsed=True,
        )

    @staticmethod
    def _turns(result: EvalCaseResult) -> str:
        turns = turn_views(result.turn_results)
        if not turns:
            return ""
        rows = [
            f"<tr><td class=num>{t.index}</td><td>{_pre(t.user)}</td><td>{_pre(t.agent)}</td>"
            f"<td>{_esc(', '.join(t.tool_names))}</td><td>{_esc(' → '.join(t.nodes))}</td></tr>"
            for t in turns
        ]
        return _section(f"Turns ({len(turns)})", _table(["Turn", "User", "Agent", "Tools", "Nodes"], rows, {"Turn"}))

    @staticmethod
    def _messages(result: EvalCaseResult) -> str:
        messages = message_views(result.messages)
        if not messages:
            return ""
        rows = [
            f"<tr><td><code>{_esc(role or '?', 100)}</code></td><td>{_pre(text)}</td></tr>" for role, text in messages
        ]
        return _section(f"Messages ({len(messages)})", _table(["Role", "Content"], rows), collapsed=True)

    @staticmethod
    def _tokens(result: EvalCaseResult) -> str:
        if result.token_usage.is_zero():
            return ""
        judge_rows = [
            f"<tr><td>judge · <code>{_esc(c.criterion)}</code></td><td>{_usage_cell(c.token_usage)}</td></tr>"
            for c in result.criterion_results
            if not c.token_usage.is_zero()
        ]
        rows = [
            f"<tr><td>agent</td><td>{_usage_cell(result.agent_token_usage)}</td></tr>",
            *judge_rows,
            f"<tr><td><strong>total</strong></td><td>{_usage_cell(result.token_usage)}</td></tr>",
        ]
        return _section("Token usage", _table(["Source", "Usage"], rows))
