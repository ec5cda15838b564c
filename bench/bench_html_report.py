"""HTML report benchmark: size, render time and first paint in headless Chromium for a large run.

Builds a realistic report (tests/support/large_reports.py: one graded agent trace per case, 5% failing),
renders it with ``HTMLReporter`` and opens it in Debian's headless Chromium (``apt-get install chromium``)
``--runs`` times. Two figures per open, both taken inside the page by a small observer appended to a copy
of the file: first contentful paint (``performance`` paint entry) and the moment the script has unpacked
every case (``data-ready`` set), both in ms since navigation start.

    python bench/bench_html_report.py                 # 20,000 cases, 5 opens
    python bench/bench_html_report.py --cases 2000 --runs 3
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.chromium import CHROMIUM_FLAGS  # noqa: E402
from tests.support.large_reports import large_report  # noqa: E402

from tracegrade.reporters import HTMLReporter  # noqa: E402

# Appended to the benchmark's copy only: records paint and unpack times where --dump-dom can read them.
PROBE = """<script>
new PerformanceObserver(function (l) { l.getEntries().forEach(function (e) {
  if (e.name === 'first-contentful-paint') { document.body.setAttribute('data-fcp', e.startTime.toFixed(1)); }
}); }).observe({type: 'paint', buffered: true});
new MutationObserver(function () {
  var list = document.getElementById('case-list');
  if (list && list.hasAttribute('data-ready') && !document.body.hasAttribute('data-unpacked')) {
    document.body.setAttribute('data-unpacked', performance.now().toFixed(1));
  }
}).observe(document.documentElement, {subtree: true, attributes: true});
</script>"""


def open_once(chromium: str, page: Path) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=20000", "--dump-dom",
             page.as_uri()],
            capture_output=True, text=True, timeout=180, check=True,
        ).stdout  # fmt: skip
    fcp = re.search(r'data-fcp="([\d.]+)"', dom)
    unpacked = re.search(r'data-unpacked="([\d.]+)"', dom)
    if not fcp or not unpacked:
        raise SystemExit("the page did not report its paint and unpack times")
    return float(fcp.group(1)), float(unpacked.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    report = large_report(args.cases)
    started = time.perf_counter()
    page_html = HTMLReporter().to_html(report)
    render_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(page_html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
        opens = [open_once(chromium, page) for _ in range(args.runs)]
    fcps, unpacks = [o[0] for o in opens], [o[1] for o in opens]
    size_mb = len(page_html.encode("utf-8")) / 1e6
    print(f"cases: {args.cases:,}; page: {size_mb:.2f} MB; rendered in {render_s:.1f} s")
    print(f"first contentful paint: median {statistics.median(fcps):.0f} ms (range {min(fcps):.0f}-{max(fcps):.0f})")
    print(
        f"every case unpacked: median {statistics.median(unpacks):.0f} ms (range {min(unpacks):.0f}-{max(unpacks):.0f})"
    )


if __name__ == "__main__":
    main()
