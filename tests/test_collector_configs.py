"""collector/: the configs parse, name only defined and pinned components, route by trace id, and point at
deploy/'s services; collector/check.py catches each kind of breakage in a mutated copy of the tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR = ROOT / "collector"
CONFIGS = ("agent-to-tracegrade.yaml", "fanout-loadbalancing.yaml", "tail-sampling.yaml")


def run_checker(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "collector" / "check.py"), "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def load(name: str) -> dict:
    return yaml.safe_load((COLLECTOR / name).read_text())


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of collector/ and deploy/ to break."""
    for part in ("collector", "deploy"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("wheels", "__pycache__"))
    return tmp_path


def test_the_configs_pass_the_checker() -> None:
    result = run_checker(ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_the_issue_s_three_configs_exist_with_traces_and_logs() -> None:
    for name in CONFIGS:
        pipelines = load(name)["service"]["pipelines"]
        assert {"traces", "logs"} <= set(pipelines), name
        assert all(p["processors"][0] == "memory_limiter" for p in pipelines.values()), name


def test_the_agent_config_queues_on_disk_and_retries_forever_with_the_token_from_the_environment() -> None:
    config = load("agent-to-tracegrade.yaml")
    exporter = config["exporters"]["otlp/tracegrade"]
    assert exporter["sending_queue"]["storage"] == "file_storage"
    assert exporter["retry_on_failure"]["max_elapsed_time"] == "0s"
    assert exporter["auth"]["authenticator"] == "bearertokenauth"
    assert config["extensions"]["bearertokenauth"]["token"] == "${env:TRACEGRADE_TOKEN}"


def test_fanout_routes_traces_and_logs_by_trace_id_with_a_static_and_a_k8s_resolver() -> None:
    exporters = load("fanout-loadbalancing.yaml")["exporters"]
    assert exporters["loadbalancing/static"]["resolver"].keys() == {"static"}
    assert exporters["loadbalancing/k8s"]["resolver"].keys() == {"k8s"}
    assert {e["routing_key"] for e in exporters.values()} == {"traceID"}
    check = _checker_module()
    merged = check.merged_config(COLLECTOR, "fanout-k8s.yaml")
    assert {p["exporters"][0] for p in merged["service"]["pipelines"].values()} == {"loadbalancing/k8s"}
    assert merged["service"]["pipelines"]["traces"]["receivers"] == ["otlp"]  # the base's, kept by the merge


def test_tail_sampling_keeps_errors_and_eval_runs_and_samples_the_rest() -> None:
    policies = {p["type"]: p for p in load("tail-sampling.yaml")["processors"]["tail_sampling"]["policies"]}
    assert policies["status_code"]["status_code"]["status_codes"] == ["ERROR"]
    assert any("tracegrade.run.id" in c for c in policies["ottl_condition"]["ottl_condition"]["span"])
    assert 0 < policies["probabilistic"]["probabilistic"]["sampling_percentage"] < 100


def test_the_component_list_names_the_pinned_release_and_every_type_used() -> None:
    check = _checker_module()
    components = check.load_components(COLLECTOR / f"components-{check.PINNED_VERSION}.txt")
    assert "loadbalancing" in components["exporters"] and "file_storage" in components["extensions"]
    assert check.PINNED_VERSION in (COLLECTOR / "README.md").read_text()


def _checker_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("collector_check", COLLECTOR / "check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BREAKAGES = [
    # (file, text, replacement, what the checker must say)
    ("collector/agent-to-tracegrade.yaml", "memory_limiter", "memory_limitter", "'memory_limitter': type not in"),
    (
        "collector/agent-to-tracegrade.yaml",
        "exporters: [otlp/tracegrade]",
        "exporters: [otlp/tracegrad]",
        "names exporter 'otlp/tracegrad', which is not defined",
    ),
    (
        "collector/agent-to-tracegrade.yaml",
        "endpoint: tracegrade:4317",
        "endpoint: tracegrade-server:4317",
        "'tracegrade-server:4317' is not a service of deploy/compose.yaml",
    ),
    (
        "collector/tail-sampling.yaml",
        "endpoint: tracegrade:4317",
        "endpoint: tracegrade:4318",
        "is not tracegrade's OTLP/gRPC port",
    ),
    (
        "collector/fanout-loadbalancing.yaml",
        "- receiver-2:4317",
        "- receiver-3:4317",
        "'receiver-3:4317' is not a service",
    ),
    (
        "collector/fanout-loadbalancing.yaml",
        "service: tracegrade-receiver.tracegrade",
        "service: tracegrade-receivers.tracegrade",
        "is not a k8s Service in deploy/k8s",
    ),
    (
        "collector/fanout-loadbalancing.yaml",
        "    routing_key: traceID\n    # The queue",
        "    routing_key: service\n    # The queue",
        "routing_key is 'service', must be 'traceID'",
    ),
    (
        "collector/fanout-loadbalancing.yaml",
        "  extensions: [health_check, file_storage, bearertokenauth]",
        "  extensions: [health_check, bearertokenauth]",
        "uses extension 'file_storage', not in service.extensions",
    ),
    (
        "collector/fanout-k8s.yaml",
        "exporters: [loadbalancing/k8s]\n    logs",
        "exporters: [loadbalancing/kube]\n    logs",
        "(over fanout-loadbalancing.yaml): pipeline 'traces' names exporter 'loadbalancing/kube'",
    ),
    ("deploy/compose.yaml", "  receiver-2:\n", "  receiver-b:\n", "'receiver-2:4317' is not a service"),
    ("deploy/k8s/receiver-service.yaml", "  clusterIP: None\n", "", "must be headless"),
    (
        "collector/components-v0.130.0.txt",
        "processors tail_sampling",
        "processors tailsampling",
        "'tail_sampling': type not in",
    ),
]


@pytest.mark.parametrize(("path", "text", "replacement", "message"), BREAKAGES, ids=lambda v: str(v)[:40])
def test_a_broken_file_fails_the_checker(tree: Path, path: str, text: str, replacement: str, message: str) -> None:
    target = tree / path
    original = target.read_text()
    assert text in original, f"the mutation no longer applies to {path}"
    target.write_text(original.replace(text, replacement))
    result = run_checker(tree)
    assert result.returncode == 1
    assert message in result.stderr, result.stderr
