"""Structural checks of the Collector configurations, without the otelcol binary (none installs here).

Run from anywhere: ``python collector/check.py [--root REPO]``; prints each problem and exits 1 if any.
For each config (and each overlay merged onto its base, as ``--config A --config B`` does):
every pipeline names only components the file defines, and every component type (the part of an id
before ``/``) is in the pinned release's list (components-<version>.txt); extensions that components
use (authenticators, queue storage) are defined and enabled; every pipeline has a receiver and an
exporter; traces and logs pipelines exist; a loadbalancing exporter routes by ``traceID``; every endpoint
names a service that deploy/ defines (compose services for hostnames, k8s Services for the k8s resolver),
on a port that service serves. ``otelcol-contrib validate`` remains the full check (collector/README.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

__all__ = ["PINNED_VERSION", "check_collector", "load_components", "merged_config"]

PINNED_VERSION = "v0.130.0"
KINDS = ("receivers", "processors", "exporters", "extensions", "connectors")
PIPELINE_KINDS = ("receivers", "processors", "exporters")
SIGNALS = {"traces", "logs", "metrics"}
REQUIRED_SIGNALS = {"traces", "logs"}  # content often arrives as logs
# overlay -> the config it is loaded on top of
OVERLAYS = {"fanout-k8s.yaml": "fanout-loadbalancing.yaml"}
TRACEGRADE_GRPC_PORT = 4317


def load_components(path: Path) -> dict[str, set[str]]:
    """The pinned component list: kind -> type names (lines ``<kind> <type> <module>``, # comments)."""
    components: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 3 or fields[0] not in components:
            raise ValueError(f"{path.name}:{number}: expected '<kind> <type> <module>' with a kind of {KINDS}")
        components[fields[0]].add(fields[1])
    return components


def _merge(base: Any, overlay: Any) -> Any:
    """The Collector's merge of config files: maps merge key by key, anything else is replaced."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        return {key: _merge(base.get(key), overlay[key]) if key in base else overlay[key] for key in overlay} | {
            key: value for key, value in base.items() if key not in overlay
        }
    return overlay


def merged_config(collector_dir: Path, name: str) -> dict[str, Any]:
    """Config ``name`` as the Collector would load it (an overlay merged onto its base)."""
    document = yaml.safe_load((collector_dir / name).read_text(encoding="utf-8")) or {}
    if name in OVERLAYS:
        return _merge(merged_config(collector_dir, OVERLAYS[name]), document)
    return document


def _deploy_files(root: Path) -> ModuleType:
    """deploy/check_files.py, which reads the compose services and k8s Services."""
    spec = importlib.util.spec_from_file_location("deploy_check_files", root / "deploy" / "check_files.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _walk(value: Any, key: str) -> list[Any]:
    """Every value stored under ``key`` anywhere inside ``value``."""
    found = []
    if isinstance(value, dict):
        for name, item in value.items():
            if name == key:
                found.append(item)
            found += _walk(item, key)
    elif isinstance(value, list):
        for item in value:
            found += _walk(item, key)
    return found


def _host_port(endpoint: str) -> tuple[str, int | None]:
    host, _, port = endpoint.rpartition(":") if ":" in endpoint else (endpoint, "", "")
    return host, int(port) if port.isdigit() else None


def _check_pipelines(config: dict[str, Any], components: dict[str, set[str]]) -> list[str]:
    problems = []
    defined = {kind: set(config.get(kind) or {}) for kind in KINDS}
    for kind in KINDS:
        for component_id in sorted(defined[kind]):
            if component_id.split("/", 1)[0] not in components[kind]:
                problems.append(f"{kind} {component_id!r}: type not in otelcol-contrib {PINNED_VERSION}'s list")
    service = config.get("service") or {}
    for extension in service.get("extensions") or []:
        if extension not in defined["extensions"]:
            problems.append(f"service.extensions names {extension!r}, which is not defined under extensions")
    pipelines = service.get("pipelines") or {}
    for pipeline_id, pipeline in pipelines.items():
        if pipeline_id.split("/", 1)[0] not in SIGNALS:
            problems.append(f"pipeline {pipeline_id!r}: not a traces, logs or metrics pipeline")
        for kind in PIPELINE_KINDS:
            for component_id in pipeline.get(kind) or []:
                # a connector is both an exporter of one pipeline and a receiver of another
                if component_id not in defined[kind] and component_id not in defined["connectors"]:
                    problems.append(
                        f"pipeline {pipeline_id!r} names {kind[:-1]} {component_id!r}, which is not defined"
                    )
        for kind in ("receivers", "exporters"):
            if not pipeline.get(kind):
                problems.append(f"pipeline {pipeline_id!r}: no {kind}")
    if missing := REQUIRED_SIGNALS - {pipeline_id.split("/", 1)[0] for pipeline_id in pipelines}:
        problems.append(f"no {' or '.join(sorted(missing))} pipeline")
    enabled = set(service.get("extensions") or [])
    for kind in ("receivers", "processors", "exporters"):
        for component_id, settings in (config.get(kind) or {}).items():
            for extension in _walk(settings, "authenticator") + _walk(settings, "storage"):
                if extension not in enabled:
                    problems.append(f"{kind} {component_id!r} uses extension {extension!r}, not in service.extensions")
    return problems


def _check_routing(config: dict[str, Any]) -> list[str]:
    problems = []
    exporters = config.get("exporters") or {}
    for pipeline_id, pipeline in ((config.get("service") or {}).get("pipelines") or {}).items():
        for exporter_id in pipeline.get("exporters") or []:
            if exporter_id.split("/", 1)[0] == "loadbalancing":
                key = (exporters.get(exporter_id) or {}).get("routing_key")
                if pipeline_id.split("/", 1)[0] in REQUIRED_SIGNALS and key != "traceID":
                    problems.append(
                        f"exporter {exporter_id!r} in pipeline {pipeline_id!r}: routing_key is {key!r}, must be "
                        "'traceID' (a trace's spans and logs on one receiver)"
                    )
    return problems


def _check_endpoints(config: dict[str, Any], compose: set[str], k8s: dict[str, dict[str, Any]]) -> list[str]:
    problems = []
    for exporter_id, settings in (config.get("exporters") or {}).items():
        settings = settings or {}
        endpoints = [settings["endpoint"]] if "endpoint" in settings else []
        resolver = settings.get("resolver") or {}
        endpoints += (resolver.get("static") or {}).get("hostnames") or []
        for endpoint in endpoints:
            host, port = _host_port(endpoint)
            if host not in compose:
                problems.append(
                    f"exporter {exporter_id!r}: endpoint {endpoint!r} is not a service of deploy/compose.yaml"
                )
            elif port != TRACEGRADE_GRPC_PORT:
                problems.append(f"exporter {exporter_id!r}: endpoint {endpoint!r} is not tracegrade's OTLP/gRPC port")
        if "k8s" in resolver:
            name, _, namespace = resolver["k8s"].get("service", "").partition(".")
            namespace = namespace.split(".", 1)[0]
            service = k8s.get(name)
            if service is None or (namespace and namespace != service["namespace"]):
                target = resolver["k8s"].get("service")
                problems.append(f"exporter {exporter_id!r}: k8s service {target!r} is not a k8s Service in deploy/k8s")
            elif not service["headless"]:
                problems.append(f"exporter {exporter_id!r}: k8s Service {name!r} must be headless (clusterIP: None)")
            elif missing := set(resolver["k8s"].get("ports") or [TRACEGRADE_GRPC_PORT]) - service["ports"]:
                problems.append(f"exporter {exporter_id!r}: k8s Service {name!r} has no port {sorted(missing)}")
    return problems


def check_collector(root: Path) -> list[str]:
    """Every problem found in ``root``/collector, one line each, prefixed with the file (empty: all good)."""
    collector_dir = root / "collector"
    try:
        components = load_components(collector_dir / f"components-{PINNED_VERSION}.txt")
        deploy = _deploy_files(root)
        compose = set(deploy.compose_services(root))
        k8s = deploy.k8s_services(root)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        return [f"collector: cannot read the component list or deploy/: {exc}"]
    problems = []
    names = sorted(path.name for path in collector_dir.glob("*.yaml"))
    if not names:
        return [f"{collector_dir}: no configs"]
    for name in names:
        try:
            config = merged_config(collector_dir, name)
        except (OSError, yaml.YAMLError) as exc:
            problems.append(f"collector/{name}: cannot read: {exc}")
            continue
        label = f"collector/{name}" + (f" (over {OVERLAYS[name]})" if name in OVERLAYS else "")
        found = _check_pipelines(config, components) + _check_routing(config) + _check_endpoints(config, compose, k8s)
        problems += [f"{label}: {problem}" for problem in found]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="repository root")
    problems = check_collector(parser.parse_args(argv).root)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
