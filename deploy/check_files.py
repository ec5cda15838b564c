"""Offline checks of deploy/ that need only Python and PyYAML: what the CLI validators cannot see.

Run from anywhere: ``python deploy/check_files.py [--root REPO]``; prints each problem and exits 1 if any.
It also provides the readers of the deploy files that ``collector/check.py`` matches endpoints against.
Checked: every resource kustomization.yaml lists exists; the k8s ConfigMaps hold exactly the files they copy
(kustomize cannot read outside deploy/k8s/); compose has no top-level ``name:``, has the profiles ``single``
and ``lake``, and mounts only files that exist; compose runs, and deploy/README.md builds, the image tag k8s/
deploys; the Dockerfile keeps its promises (ARG base image, wheels only and with the ``lake`` extra, non-root,
HEALTHCHECK on /healthz, a volume); the systemd units are all there, and those under ProtectSystem=strict set
HOME to a writable state directory; the worker's ``--metrics-address`` port is the one k8s exposes, annotates for
scraping and probes, and the one compose publishes and health-checks.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from pathlib import Path
from typing import Any

import yaml

__all__ = ["check_deploy", "compose_services", "k8s_documents", "k8s_services", "kustomization_resources"]

# ConfigMap (name, key) -> the repository file it must hold verbatim
CONFIGMAP_SOURCES = {
    ("otel-collector-config", "fanout-loadbalancing.yaml"): "collector/fanout-loadbalancing.yaml",
    ("otel-collector-config", "fanout-k8s.yaml"): "collector/fanout-k8s.yaml",
    ("tracegrade-worker-rules", "rules.yaml"): "deploy/rules.yaml",
}
SYSTEMD_UNITS = (
    "tracegrade-receiver@.service",
    "tracegrade-worker.service",
    "tracegrade-maintain.service",
    "tracegrade-maintain.timer",
)
COMPOSE_PROFILES = {"single", "lake"}


def _load_yaml(path: Path) -> Any:
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def compose_services(root: Path) -> dict[str, dict[str, Any]]:
    """deploy/compose.yaml's services by name."""
    return _load_yaml(root / "deploy" / "compose.yaml").get("services") or {}


def kustomization_resources(root: Path) -> tuple[dict[str, Any], list[Path]]:
    """deploy/k8s/kustomization.yaml and the resource files it lists (which may not exist)."""
    k8s = root / "deploy" / "k8s"
    kustomization = _load_yaml(k8s / "kustomization.yaml")
    return kustomization, [k8s / name for name in kustomization.get("resources") or []]


def k8s_documents(root: Path) -> list[dict[str, Any]]:
    """Every manifest the kustomization lists (existing files only), with its namespace filled in."""
    kustomization, files = kustomization_resources(root)
    namespace = kustomization.get("namespace", "default")
    documents = []
    for path in files:
        if not path.is_file():
            continue
        with path.open(encoding="utf-8") as handle:
            for document in yaml.safe_load_all(handle):
                if document:
                    document.setdefault("metadata", {}).setdefault("namespace", namespace)
                    documents.append(document)
    return documents


def k8s_services(root: Path) -> dict[str, dict[str, Any]]:
    """The kustomization's Services by name: namespace, headless or not, ports."""
    return {
        doc["metadata"]["name"]: {
            "namespace": doc["metadata"]["namespace"],
            "headless": doc.get("spec", {}).get("clusterIP") == "None",
            "ports": {port["port"] for port in doc.get("spec", {}).get("ports", [])},
        }
        for doc in k8s_documents(root)
        if doc.get("kind") == "Service"
    }


def _check_kustomization(root: Path) -> list[str]:
    _, files = kustomization_resources(root)
    return [
        f"{path.relative_to(root)}: listed in kustomization.yaml but missing" for path in files if not path.is_file()
    ]


def _check_configmaps(root: Path) -> list[str]:
    problems = []
    maps = {
        doc["metadata"]["name"]: doc.get("data") or {} for doc in k8s_documents(root) if doc.get("kind") == "ConfigMap"
    }
    for (name, key), source in CONFIGMAP_SOURCES.items():
        held = maps.get(name, {}).get(key)
        if held is None:
            problems.append(f"deploy/k8s: ConfigMap {name} has no key {key} (a copy of {source})")
        elif held != (root / source).read_text(encoding="utf-8"):
            problems.append(f"deploy/k8s: ConfigMap {name} key {key} differs from {source}; copy the file in again")
    return problems


def _check_compose(root: Path) -> list[str]:
    document = _load_yaml(root / "deploy" / "compose.yaml")
    problems = []
    if "name" in document:
        problems.append("deploy/compose.yaml: top-level `name:` (Debian's docker-compose 1.29 refuses it)")
    profiles = {profile for service in compose_services(root).values() for profile in service.get("profiles", [])}
    if missing := COMPOSE_PROFILES - profiles:
        problems.append(f"deploy/compose.yaml: no service in profile(s) {sorted(missing)}")
    for name, service in compose_services(root).items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith((".", "/")) and not (root / "deploy" / source).exists():
                problems.append(f"deploy/compose.yaml: service {name} mounts {source}, which does not exist")
    return problems


def _check_image_tags(root: Path) -> list[str]:
    """The image deploy/README.md builds is the one compose.yaml runs by default and kustomize deploys: a tag
    built nowhere would be pulled from Docker Hub (someone else's image, or none)."""
    kustomization, _ = kustomization_resources(root)
    tags = {image["name"]: image.get("newTag", "latest") for image in kustomization.get("images") or []}
    expected = f"tracegrade:{tags.get('tracegrade', 'latest')}"
    problems = []
    for name, service in compose_services(root).items():
        image = str(service.get("image", ""))
        default = re.sub(r"^\$\{[A-Z_]+:-(.*)\}$", r"\1", image)
        if default.split(":")[0] == "tracegrade" and default != expected:
            problems.append(f"deploy/compose.yaml: service {name} runs {default}, but k8s/ deploys {expected}")
    built = re.findall(r"docker build .*?-t (\S+)", (root / "deploy" / "README.md").read_text(encoding="utf-8"))
    problems += [f"deploy/README.md: builds {tag}, but k8s/ deploys {expected}" for tag in built if tag != expected]
    return problems


def _check_dockerfile(root: Path) -> list[str]:
    text = (root / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    instructions = [line.split(None, 1) for line in re.sub(r"\\\n", " ", text).splitlines() if line.strip()]
    instructions = [
        (parts[0].upper(), parts[1] if len(parts) > 1 else "") for parts in instructions if parts[0][0] != "#"
    ]
    problems = []
    if not instructions or instructions[0][0] != "ARG" or "BASE_IMAGE" not in instructions[0][1]:
        problems.append("deploy/Dockerfile: must start with `ARG BASE_IMAGE=...` (the base image is a build argument)")
    if sum(1 for op, _ in instructions if op == "FROM") < 2:
        problems.append("deploy/Dockerfile: must be multi-stage (install stage, then the runtime stage)")
    installs = [arg for op, arg in instructions if op == "RUN" and "--no-index" in arg and "--find-links" in arg]
    if not installs:
        problems.append("deploy/Dockerfile: must install with `pip install --no-index --find-links` (wheels only)")
    elif not any("tracegrade[lake]" in arg for arg in installs):
        # without the extra, every `--store ducklake:...` workload of compose.yaml and k8s/ exits at start
        problems.append(
            "deploy/Dockerfile: must install 'tracegrade[lake]' (the DuckLake extensions and psycopg that the "
            "lake workloads of compose.yaml and k8s/ load), not plain tracegrade"
        )
    users = [arg.strip() for op, arg in instructions if op == "USER"]
    if not users or users[-1].split(":")[0] in {"root", "0"}:
        problems.append("deploy/Dockerfile: the last USER must be a non-root user")
    if not any(op == "HEALTHCHECK" and "/healthz" in arg for op, arg in instructions):
        problems.append("deploy/Dockerfile: needs a HEALTHCHECK on /healthz")
    if not any(op == "VOLUME" for op, _ in instructions):
        problems.append("deploy/Dockerfile: needs a VOLUME for the store and its journal")
    return problems


def _unit_settings(path: Path) -> dict[str, list[str]]:
    """A unit file's ``Key=value`` lines by key (every value of a repeated key), comments left out."""
    settings: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and line[0] not in "#;[" and "=" in line:
            key, value = line.split("=", 1)
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def _check_unit_home(path: Path) -> list[str]:
    """Under ProtectSystem=strict only the unit's StateDirectory= is writable, not the user's home
    (/var/lib/tracegrade), where DuckDB installs a lake's extensions (~/.duckdb): HOME must be a state directory."""
    settings = _unit_settings(path)
    if settings.get("ProtectSystem", [""])[-1] != "strict":
        return []
    homes = [value.split("=", 1)[1] for value in settings.get("Environment", []) if value.startswith("HOME=")]
    writable = {f"%S/{name}" for value in settings.get("StateDirectory", []) for name in value.split()}
    home = homes[-1].replace("/var/lib/", "%S/") if homes else None
    if home is not None and any(home == w or home.startswith(w + "/") for w in writable):
        return []
    state = sorted(writable)[0] if writable else "%S/tracegrade/NAME"
    return [
        f"deploy/systemd/{path.name}: HOME is {homes[-1] if homes else 'the user home /var/lib/tracegrade'}, "
        f"read-only under ProtectSystem=strict, and a lake store installs DuckDB extensions under $HOME/.duckdb; "
        f"add Environment=HOME={state} (a StateDirectory=)"
    ]


def _metrics_port(args: list[Any]) -> int | None:
    """The port of ``--metrics-address HOST:PORT`` in a command line, if it has one."""
    words = [str(arg) for arg in args]
    for flag, value in itertools.pairwise(words):
        if flag == "--metrics-address" and value.rpartition(":")[2].isdigit():
            return int(value.rpartition(":")[2])
    return None


def _check_worker_metrics(root: Path) -> list[str]:
    """Prometheus scrapes the worker at the port its annotations name, and the kubelet and compose ask its
    /healthz there: each must be the port --metrics-address listens on, or scrapes and probes find nothing."""
    problems = []
    for doc in k8s_documents(root):
        template = doc.get("spec", {}).get("template", {})
        for container in template.get("spec", {}).get("containers", []):
            port = _metrics_port(container.get("args", []))
            if port is None:
                continue
            where = f"deploy/k8s: {doc['kind']} {doc['metadata']['name']}"
            named = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
            annotated = (template.get("metadata", {}).get("annotations") or {}).get("prometheus.io/port")
            probe = container.get("livenessProbe", {}).get("httpGet", {}).get("port")
            seen = {
                "its port named metrics": named.get("metrics"),
                "the prometheus.io/port annotation": int(annotated) if annotated else None,
                "its livenessProbe": named.get(probe, probe),
            }
            problems += [
                f"{where}: --metrics-address listens on {port}, but {what} is {found}"
                for what, found in seen.items()
                if found != port
            ]
    for name, service in compose_services(root).items():
        port = _metrics_port(service.get("command") or [])
        if port is None:
            continue
        published = {int(str(mapping).rsplit(":", 1)[1]) for mapping in service.get("ports", [])}
        if port not in published:
            problems.append(f"deploy/compose.yaml: service {name} serves metrics on {port}, which it does not publish")
        check = " ".join(str(word) for word in (service.get("healthcheck") or {}).get("test", []))
        if f":{port}/healthz" not in check:
            problems.append(f"deploy/compose.yaml: service {name}'s healthcheck does not ask :{port}/healthz")
    return problems


def _check_systemd(root: Path) -> list[str]:
    unit_dir = root / "deploy" / "systemd"
    problems = [f"deploy/systemd/{unit}: missing" for unit in SYSTEMD_UNITS if not (unit_dir / unit).is_file()]
    for unit in sorted(unit_dir.glob("*.service")):
        problems += _check_unit_home(unit)
    return problems


def check_deploy(root: Path) -> list[str]:
    """Every problem found in ``root``/deploy, as one line each (empty: all good)."""
    problems = []
    checks = (
        _check_kustomization,
        _check_configmaps,
        _check_compose,
        _check_image_tags,
        _check_dockerfile,
        _check_worker_metrics,
    )
    for check in (*checks, _check_systemd):
        try:
            problems += check(root)
        except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
            problems.append(f"{check.__name__.lstrip('_')}: cannot read the files: {exc}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1], help="repository root")
    problems = check_deploy(parser.parse_args(argv).root)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
