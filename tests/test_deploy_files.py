"""deploy/: the Python-side checks (deploy/check_files.py) and, where installed, the real validators
(kubernetes-validate, docker-compose, kubectl kustomize, systemd-analyze) pass on the tree and fail on a
mutated copy of it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tracegrade.ingest.tokens import Grant, TokenTable

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of collector/ and deploy/ to break."""
    for part in ("collector", "deploy"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("wheels", "__pycache__"))
    return tmp_path


def run(args: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)


def check_files(root: Path) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, str(root / "deploy" / "check_files.py"), "--root", str(root)])


def manifests(root: Path) -> list[dict]:
    kustomization = yaml.safe_load((root / "deploy/k8s/kustomization.yaml").read_text())
    return [
        doc
        for name in kustomization["resources"]
        for doc in yaml.safe_load_all((root / "deploy/k8s" / name).read_text())
        if doc
    ]


def test_the_deploy_files_pass_the_python_checks() -> None:
    result = check_files(ROOT)
    assert result.returncode == 0, result.stderr


BREAKAGES = [
    (
        "deploy/k8s/kustomization.yaml",
        "  - maintain-cronjob.yaml\n",
        "  - maintain-cron.yaml\n",
        "deploy/k8s/maintain-cron.yaml: listed in kustomization.yaml but missing",
    ),
    (
        "collector/fanout-loadbalancing.yaml",
        "- receiver-2:4317",
        "- receiver-9:4317",
        "ConfigMap otel-collector-config key fanout-loadbalancing.yaml differs from collector/",
    ),
    ("deploy/rules.yaml", "settle_seconds: 5", "settle_seconds: 6", "ConfigMap tracegrade-worker-rules key rules.yaml"),
    ("deploy/compose.yaml", "\nservices:\n", "\nname: tracegrade\nservices:\n", "top-level `name:`"),
    (
        "deploy/compose.yaml",
        "../collector/agent-to-tracegrade.yaml:",
        "../collector/agent.yaml:",
        "mounts ../collector/agent.yaml, which does not exist",
    ),
    ("deploy/compose.yaml", "profiles: [single]", "profiles: [one]", "no service in profile(s) ['single']"),
    ("deploy/Dockerfile", "USER tracegrade:tracegrade", "USER root", "the last USER must be a non-root user"),
    ("deploy/Dockerfile", "/healthz", "/health", "needs a HEALTHCHECK on /healthz"),
    ("deploy/Dockerfile", "--no-index ", "", "wheels only"),
    ("deploy/Dockerfile", "ARG BASE_IMAGE=python", "ARG BASE=python", "must start with `ARG BASE_IMAGE=...`"),
    (
        "deploy/k8s/worker-deployment.yaml",
        'prometheus.io/port: "9464"',
        'prometheus.io/port: "9090"',
        "tracegrade-worker: --metrics-address listens on 9464, but the prometheus.io/port annotation is 9090",
    ),
    (
        "deploy/k8s/worker-deployment.yaml",
        '"0.0.0.0:9464"]',
        '"0.0.0.0:9465"]',
        "--metrics-address listens on 9465, but its port named metrics is 9464",
    ),
    (
        "deploy/compose.yaml",
        '"127.0.0.1:19464:9464"',
        '"127.0.0.1:19464:9465"',
        "service worker serves metrics on 9464, which it does not publish",
    ),
]


@pytest.mark.parametrize(("path", "text", "replacement", "message"), BREAKAGES, ids=lambda v: str(v)[:40])
def test_a_broken_file_fails_the_python_checks(
    tree: Path, path: str, text: str, replacement: str, message: str
) -> None:
    target = tree / path
    original = target.read_text()
    assert text in original, f"the mutation no longer applies to {path}"
    target.write_text(original.replace(text, replacement))
    result = check_files(tree)
    assert result.returncode == 1
    assert message in result.stderr, result.stderr


def test_a_missing_systemd_unit_fails_the_python_checks(tree: Path) -> None:
    (tree / "deploy/systemd/tracegrade-maintain.timer").unlink()
    result = check_files(tree)
    assert result.returncode == 1 and "tracegrade-maintain.timer: missing" in result.stderr


def test_the_k8s_manifests_validate_strictly_and_a_misspelt_field_does_not() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    documents = manifests(ROOT)
    assert {"StatefulSet", "Deployment", "CronJob", "NetworkPolicy", "Secret", "ConfigMap", "Service"} <= {
        d["kind"] for d in documents
    }
    version = kubernetes_validate.latest_version()
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)
    statefulset = next(d for d in documents if d["kind"] == "StatefulSet")
    statefulset["spec"]["template"]["spec"]["terminationGracePeriodSecond"] = 75
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(statefulset, version, strict=True)


def test_receivers_get_a_journal_volume_each_and_otlp_only_from_the_collector() -> None:
    documents = {(d["kind"], d["metadata"]["name"]): d for d in manifests(ROOT)}
    statefulset = documents["StatefulSet", "tracegrade-receiver"]
    assert [t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"]] == ["journal"]
    assert documents["Service", "tracegrade-receiver"]["spec"]["clusterIP"] == "None"
    policy = documents["NetworkPolicy", "tracegrade-receiver-ingress"]["spec"]
    assert policy["podSelector"]["matchLabels"] == statefulset["spec"]["selector"]["matchLabels"]
    (rule,) = policy["ingress"]
    (source,) = rule["from"]
    collector = documents["Deployment", "otel-collector"]["spec"]["template"]["metadata"]["labels"]
    assert source["podSelector"]["matchLabels"].items() <= collector.items()


def test_the_k8s_tokens_file_loads_and_the_collector_sends_a_token_that_may_only_ingest(tmp_path: Path) -> None:
    documents = {(d["kind"], d["metadata"]["name"]): d for d in manifests(ROOT)}
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(documents["Secret", "tracegrade-tenants"]["stringData"]["tokens.yaml"], encoding="utf-8")
    collector_token = documents["Secret", "tracegrade-tokens"]["stringData"]["TRACEGRADE_TOKEN"]
    assert TokenTable.from_file(tokens).grant_of(collector_token) == Grant("default", frozenset({"ingest"}))
    # the workers grade what the Collector sends: the example rules name its tenant
    rules = yaml.safe_load((ROOT / "deploy" / "rules.yaml").read_text(encoding="utf-8"))["rules"]
    assert {rule["tenant"] for rule in rules} == {"default"}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_kustomize_renders_and_fails_on_a_missing_resource(tree: Path) -> None:
    assert run(["kubectl", "kustomize", str(DEPLOY / "k8s")]).returncode == 0
    (tree / "deploy/k8s/worker-deployment.yaml").unlink()
    assert run(["kubectl", "kustomize", str(tree / "deploy/k8s")]).returncode != 0


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="Debian's docker-compose not installed")
def test_docker_compose_config_accepts_the_file_and_refuses_a_broken_one(tree: Path) -> None:
    env = {**os.environ, "TRACEGRADE_TOKEN": "t", "TRACEGRADE_CATALOG_PASSWORD": "p"}
    assert run(["docker-compose", "-f", str(DEPLOY / "compose.yaml"), "config", "-q"], env=env).returncode == 0
    compose = tree / "deploy/compose.yaml"
    compose.write_text(
        compose.read_text().replace("    restart: unless-stopped\n    profiles: [lake]", "    restrat: no", 1)
    )
    assert run(["docker-compose", "-f", str(compose), "config", "-q"], env=env).returncode != 0


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_passes_the_units_and_reports_a_misspelt_key(tree: Path) -> None:
    script = DEPLOY / "check.sh"
    assert run(["bash", str(script), "systemd"]).returncode == 0
    unit = tree / "deploy/systemd/tracegrade-worker.service"
    unit.write_text(unit.read_text().replace("Restart=on-failure", "Restrat=on-failure"))
    result = run(["bash", str(tree / "deploy/check.sh"), "systemd"])
    assert result.returncode != 0 and "Restrat" in result.stdout + result.stderr
