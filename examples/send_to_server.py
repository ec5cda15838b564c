"""Run the LangGraph example's eval set while exporting every span over OTLP to ``tracegrade serve``.

    python examples/send_to_server.py --endpoint http://127.0.0.1:4318

The run is graded live (printed below) and, because each case turn runs under a root span stamped with
``tracegrade.case.id``, the same traces can be re-graded later from the store with
``tracegrade grade --store … --evalset examples/langgraph_weather/eval_set.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor

HERE = Path(__file__).resolve().parent / "langgraph_weather"
sys.path.insert(0, str(HERE))

from agent import build_graph  # noqa: E402

from tracegrade import AgentEvaluator, EvalConfig, create_eval_app  # noqa: E402


async def main(endpoint: str, token: str | None) -> int:
    app, collector = create_eval_app(build_graph())
    headers = {"Authorization": f"Bearer {token}"} if token else None
    exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces", headers=headers)
    collector.tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    config = EvalConfig.from_file(HERE / "config.json")
    config.reporter.enabled = False
    report = await AgentEvaluator(app, collector, config=config).evaluate(HERE / "eval_set.json")
    collector.tracer_provider.shutdown()  # flushes the exporter
    print(report.format_summary())
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default="http://127.0.0.1:4318", help="OTLP/HTTP base URL of tracegrade serve")
    parser.add_argument("--token", default=None, help="bearer token, if the server requires one")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.endpoint, args.token)))
