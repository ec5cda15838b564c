#!/usr/bin/env bash
# Smoke test of the image, fully offline once the packages are there (several minutes; not in .ci/run):
# wheels built on the host, a Debian base image from debootstrap, a private Docker daemon started here
# (--bridge=none --iptables=false: no bridge network is ever created), `docker build --network none`,
# the container run with --network host on loopback ports, spans sent by the OpenTelemetry OTLP exporter,
# graded by the in-process worker (deploy/rules.yaml), queried through the server. Everything it started
# is stopped and removed at the end. Run as root from a venv with tracegrade's test extra installed.
#   deploy/smoke.sh            (SMOKE_KEEP=1 keeps the work directory for a look afterwards)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
work="$(mktemp -d /tmp/tracegrade-smoke.XXXXXX)"
export DOCKER_HOST="unix://$work/docker.sock"
grpc_port=$((20000 + RANDOM % 20000))
http_port=$((grpc_port + 1))
token="smoke-$RANDOM$RANDOM"
image="tracegrade:smoke"
step() { printf '\n== %s (%ss)\n' "$*" "$SECONDS"; }

cleanup() {
  docker rm -f tracegrade-smoke >/dev/null 2>&1 || true
  if [ -f "$work/dockerd.pid" ]; then
    kill "$(cat "$work/dockerd.pid")" 2>/dev/null || true
    for _ in $(seq 30); do [ -f "$work/dockerd.pid" ] || break; sleep 1; done
  fi
  if [ -z "${SMOKE_KEEP:-}" ]; then
    umount "$work/root/overlay2"/*/merged 2>/dev/null || true
    umount "$work/exec/netns"/* 2>/dev/null || true  # the daemon's network namespace mount outlives it
    rm -rf "$work" || true
  fi
}
trap cleanup EXIT

for tool in dockerd debootstrap docker; do
  command -v "$tool" >/dev/null || { echo "smoke.sh: needs $tool (apt-get install docker.io debootstrap)" >&2; exit 1; }
done

step "wheels on the host"
mkdir -p "$work/context/wheels"
# TRACEGRADE_COMPILE=0 by default: the mypyc compile of the mapper alone ran over 10 minutes on a loaded
# 2-core machine; the image then runs the mapper as pure Python. TRACEGRADE_COMPILE=1 builds it compiled.
# [lake]: the image installs tracegrade[lake] (the lake workloads need its extensions and psycopg)
TRACEGRADE_COMPILE="${TRACEGRADE_COMPILE:-0}" pip wheel -q --wheel-dir "$work/context/wheels" "$root[lake]"
cp "$here/Dockerfile" "$work/context/"
python_minor="$(python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"

step "base image: debootstrap bookworm (python3 $python_minor expected)"
debootstrap --variant=minbase --include=python3,python3-venv bookworm "$work/rootfs" http://deb.debian.org/debian \
  >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
base_minor="$(chroot "$work/rootfs" python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
[ "$base_minor" = "$python_minor" ] || { echo "smoke.sh: host python $python_minor, base image $base_minor" >&2; exit 1; }

step "private docker daemon (no bridge, no iptables)"
dockerd --bridge=none --iptables=false --ip6tables=false --data-root "$work/root" --exec-root "$work/exec" \
  --pidfile "$work/dockerd.pid" --host "$DOCKER_HOST" >"$work/dockerd.log" 2>&1 &
for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
docker info >/dev/null || { tail -20 "$work/dockerd.log" >&2; exit 1; }
tar -C "$work/rootfs" -c . | docker import - tracegrade-base:bookworm >/dev/null

step "docker build --network none"
docker build -q --network none --build-arg BASE_IMAGE=tracegrade-base:bookworm -t "$image" "$work/context"
docker run --rm --network none "$image" --version
docker image inspect "$image" --format 'user={{.Config.User}} volumes={{json .Config.Volumes}} healthcheck={{json .Config.Healthcheck.Test}}'

step "run: tracegrade serve on 127.0.0.1:$grpc_port/$http_port, grading online with deploy/rules.yaml"
mkdir -p "$work/data" && chown 10001:10001 "$work/data"
# The traffic sent below is the example's eval run, whose traces rules skip unless include_eval_runs is set.
python - "$here/rules.yaml" "$work/rules.yaml" <<'PY'
import sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
for rule in rules["rules"]:
    rule["include_eval_runs"] = True
yaml.safe_dump(rules, open(sys.argv[2], "w"))
PY
docker run -d --name tracegrade-smoke --network host \
  -e TRACEGRADE_HOST=127.0.0.1 -e TRACEGRADE_GRPC_PORT="$grpc_port" -e TRACEGRADE_HTTP_PORT="$http_port" \
  -e TRACEGRADE_TOKEN="$token" -v "$work/data:/data" -v "$work/rules.yaml:/etc/tracegrade/rules.yaml:ro" \
  "$image" serve --worker-rules /etc/tracegrade/rules.yaml >/dev/null
for _ in $(seq 60); do
  [ "$(docker inspect -f '{{.State.Health.Status}}' tracegrade-smoke)" = healthy ] && break
  docker inspect -f '{{.State.Running}}' tracegrade-smoke | grep -q true || { docker logs tracegrade-smoke >&2; exit 1; }
  sleep 2
done
docker inspect -f 'health={{.State.Health.Status}}' tracegrade-smoke

step "send spans (OpenTelemetry OTLP/HTTP exporter, the LangGraph example's eval set)"
python "$root/examples/send_to_server.py" --endpoint "http://127.0.0.1:$http_port" --token "$token" | tail -5

step "graded online and queried through the server"
in_container() { docker exec -e TRACEGRADE_TOKEN="$token" tracegrade-smoke tracegrade "$@"; }
graded=0
for _ in $(seq 60); do
  graded="$(in_container sql "SELECT count(*) FROM grading_jobs WHERE status = 'done'" --format csv | tail -1)"
  [ "$graded" -gt 0 ] 2>/dev/null && break
  sleep 2
done
[ "$graded" -gt 0 ] 2>/dev/null || { echo "smoke.sh: no trace graded online after 120 s" >&2; docker logs tracegrade-smoke >&2; exit 1; }
in_container sql "SELECT count(*) AS spans, count(DISTINCT trace_id) AS traces FROM spans"
in_container sql "SELECT status, count(*) AS jobs FROM grading_jobs GROUP BY status"
in_container runs | head -8
in_container traces | head -8
step "smoke test passed"
