#!/usr/bin/env bash
# Offline validation of collector/ and deploy/, in seconds; called from .ci/run. Fails on any problem.
#   deploy/check.sh [all|python|compose|k8s|systemd|alerts]     (default: all)
# Needs python with pyyaml and kubernetes-validate (the test extra); installs Debian's docker-compose and
# prometheus (for promtool) when missing and it can; skips systemd-analyze where systemd is not installed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

check_python() {
  python "$root/collector/check.py" --root "$root"
  python "$here/check_files.py" --root "$root"
}

check_compose() {
  if ! command -v docker-compose >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
    else
      echo "check.sh: docker-compose missing (apt-get install docker-compose)" >&2
      return 1
    fi
  fi
  # placeholders for the variables compose.yaml requires
  TRACEGRADE_TOKEN=check TRACEGRADE_CATALOG_PASSWORD=check docker-compose -f "$here/compose.yaml" config -q
}

check_alerts() {
  if ! command -v promtool >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    else
      echo "check.sh: promtool missing (apt-get install prometheus)" >&2
      return 1
    fi
  fi
  promtool check rules "$here/prometheus/tracegrade-alerts.yaml"
  # the unit tests name their rules file relative to themselves
  (cd "$here/prometheus" && promtool test rules tracegrade-alerts.test.yaml)
}

check_k8s() {
  local manifests=()
  if command -v kubectl >/dev/null; then
    kubectl kustomize "$here/k8s" >"$work/rendered.yaml"
    manifests=("$work/rendered.yaml")
  else
    # without kubectl: the files kustomization.yaml lists (check_files.py made sure they all exist)
    mapfile -t manifests < <(python -c 'import sys, yaml; d = sys.argv[1]; [print(f"{d}/{r}") for r in yaml.safe_load(open(f"{d}/kustomization.yaml"))["resources"]]' "$here/k8s")
  fi
  kubernetes-validate --strict --quiet "${manifests[@]}"
}

check_systemd() {
  if ! command -v systemd-analyze >/dev/null; then
    echo "check.sh: systemd-analyze not installed; units not verified" >&2
    return 0
  fi
  # verify insists that ExecStart's binary exists: point it at a stub, change nothing else
  printf '#!/bin/sh\n' >"$work/tracegrade" && chmod +x "$work/tracegrade"
  mkdir -p "$work/units"
  for unit in "$here"/systemd/*.service "$here"/systemd/*.timer; do
    sed "s#/opt/tracegrade/bin/tracegrade#$work/tracegrade#g" "$unit" >"$work/units/$(basename "$unit")"
  done
  local output
  # unknown keys and sections are only warnings to verify: any output at all fails the check
  output="$(cd "$work/units" && systemd-analyze verify ./*.service ./*.timer 2>&1)" || { echo "$output" >&2; return 1; }
  if [ -n "$output" ]; then
    echo "$output" >&2
    return 1
  fi
}

case "${1:-all}" in
  python) check_python ;;
  compose) check_compose ;;
  k8s) check_k8s ;;
  systemd) check_systemd ;;
  alerts) check_alerts ;;
  all) check_python && check_compose && check_k8s && check_systemd && check_alerts && echo "deploy/check.sh: collector/ and deploy/ OK" ;;
  *) echo "usage: $0 [all|python|compose|k8s|systemd|alerts]" >&2; exit 2 ;;
esac
