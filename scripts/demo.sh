#!/usr/bin/env bash
# The whole loop on the embedded default (a DuckDB file, no API keys, nothing leaves this machine):
# install, start the OTLP receiver on a DuckDB file, run an example agent exporting OTLP to it,
# list and show its traces, query them with SQL, grade them offline, stop the receiver.
set -euo pipefail
cd "$(dirname "$0")/.."
export LITELLM_LOCAL_MODEL_COST_MAP=True

if [ ! -x .venv/bin/tracegrade ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[langgraph,pydantic-ai]' opentelemetry-exporter-otlp-proto-http -c constraints.txt
fi
. .venv/bin/activate

work=$(mktemp -d -t tracegrade-demo-XXXX)
store="$work/traces.duckdb"
http_port=${DEMO_HTTP_PORT:-4318}
grpc_port=${DEMO_GRPC_PORT:-4317}

echo "== 1. tracegrade serve --store $store (OTLP/gRPC :$grpc_port, OTLP/HTTP :$http_port)"
tracegrade serve --store "$store" --grpc-port "$grpc_port" --http-port "$http_port" >"$work/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
python - "$http_port" <<'PY'
import sys, time, urllib.request
for _ in range(200):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/readyz", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("the receiver did not become ready; see its log")
PY

echo "== 2. run the LangGraph example agent, exporting its spans over OTLP/HTTP"
python examples/send_to_server.py --endpoint "http://127.0.0.1:$http_port"
sleep 2   # trajectories are rebuilt about a second after a trace's last span

echo "== 3. tracegrade traces"
tracegrade traces --store "$store" --limit 10

first=$(tracegrade sql --store "$store" --format csv "SELECT trace_id FROM traces ORDER BY start_time LIMIT 1" | tail -n 1)
echo "== 4. tracegrade show $first"
tracegrade show --store "$store" "$first"

echo "== 5. tracegrade sql: tool calls per case"
tracegrade sql --store "$store" \
  "SELECT t.case_id, c.name AS tool, c.arguments, c.result FROM tool_calls c JOIN traces t USING (trace_id) ORDER BY t.start_time, c.seq"

echo "== 6. tracegrade grade: the same eval set, graded offline from the store"
tracegrade grade --store "$store" --evalset examples/langgraph_weather/eval_set.json \
  --config examples/langgraph_weather/config.json --out "$work/reports" --format console,json,html,junit || true

kill -TERM $server; wait $server || true
trap - EXIT
echo "== done: store and reports in $work"
