"""deploy/: every tracegrade command line in compose.yaml, the k8s manifests and the systemd units (with the
env example files' arguments and variables) is one the CLI accepts; the image installs the lake extra the lake
workloads need; units under ProtectSystem=strict get a writable HOME; and `tracegrade serve` runs with exactly
the settings of systemd/receiver.env.example."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from importlib.metadata import requires
from pathlib import Path

import yaml
from click.testing import CliRunner
from packaging.requirements import Requirement

from tracegrade.cli.main import cli as main_cli

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = "from tracegrade.cli.main import main; main()"
IMAGE_ENV = {"TRACEGRADE_STORE": "/data/traces.duckdb", "TRACEGRADE_HOST": "0.0.0.0"}  # deploy/Dockerfile's ENV


def env_file(path: Path) -> dict[str, str]:
    """A systemd EnvironmentFile's assignments (comments and blank lines left out)."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if line.strip() and line[0] != "#")
    return {key: value for key, value in pairs}


def compose_commands(root: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    services = yaml.safe_load((root / "deploy/compose.yaml").read_text())["services"]
    found = {}
    for name, service in services.items():
        if "tracegrade" in str(service.get("image", "")) and service.get("command"):
            environment = service.get("environment") or {}
            env = IMAGE_ENV | {k: re.sub(r"\$\{[^}]*\}", "x", str(v)) for k, v in environment.items()}
            found[f"compose {name}"] = ([str(arg) for arg in service["command"]], env)
    return found


def k8s_commands(root: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    k8s = root / "deploy/k8s"
    found = {}
    for resource in yaml.safe_load((k8s / "kustomization.yaml").read_text())["resources"]:
        for doc in yaml.safe_load_all((k8s / resource).read_text()):
            spec = (doc or {}).get("spec", {})
            pod = spec.get("jobTemplate", {}).get("spec", spec).get("template", {}).get("spec", {})
            for container in pod.get("containers", []):
                if container["image"].split(":")[0] == "tracegrade":
                    env = IMAGE_ENV | {e["name"]: str(e.get("value", "x")) for e in container.get("env", [])}
                    found[f"k8s {doc['metadata']['name']}"] = (container["args"], env)
    return found


def systemd_commands(root: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    units = root / "deploy/systemd"
    env_files = {
        "tracegrade-receiver@.service": "receiver.env.example",
        "tracegrade-worker.service": "worker.env.example",
        "tracegrade-maintain.service": "worker.env.example",
    }
    found = {}
    for unit, example in env_files.items():
        env = env_file(units / example)
        exec_start = next(line for line in (units / unit).read_text().splitlines() if line.startswith("ExecStart="))
        words = shlex.split(exec_start.split("=", 1)[1])
        assert words[0] == "/opt/tracegrade/bin/tracegrade", exec_start
        # systemd splits an unquoted $VAR at whitespace, as the shell would
        args = [part for word in words[1:] for part in (env.get(word[1:], "").split() if word[0] == "$" else [word])]
        found[f"systemd {unit}"] = (args, env)
    return found


def all_commands(root: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    return compose_commands(root) | k8s_commands(root) | systemd_commands(root)


def refused_commands(root: Path) -> list[str]:
    """Each command line (with its TRACEGRADE_* variables) the CLI refuses: `--help` after it still fails on an
    unknown option, a missing option value or an unknown TRACEGRADE_* variable. In-process (click's runner),
    with only the deploy file's TRACEGRADE_* variables set."""
    problems = []
    cleared: dict[str, str | None] = {k: None for k in os.environ if k.startswith("TRACEGRADE_")}
    for where, (args, env) in all_commands(root).items():
        tracegrade_env = {k: v for k, v in env.items() if k.startswith("TRACEGRADE_")}
        result = CliRunner().invoke(main_cli, [*args, "--help"], env=cleared | tracegrade_env)
        if result.exit_code != 0:
            problems.append(f"{where}: tracegrade {shlex.join(args)}: {result.output.strip()}")
    return problems


def test_every_deploy_command_line_is_one_the_cli_accepts() -> None:
    commands = all_commands(ROOT)
    # every place a command is written: compose's six, k8s' four workloads, three units
    assert len([w for w in commands if w.startswith("compose")]) == 6, commands
    assert len([w for w in commands if w.startswith("k8s")]) == 4, commands
    assert len([w for w in commands if w.startswith("systemd")]) == 3, commands
    assert refused_commands(ROOT) == []


def test_a_misspelt_flag_or_variable_in_a_deploy_file_is_refused(tmp_path: Path) -> None:
    for part in ("collector", "deploy"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("wheels", "__pycache__"))
    statefulset = tmp_path / "deploy/k8s/receiver-statefulset.yaml"
    statefulset.write_text(statefulset.read_text().replace('"--no-build-trajectories"', '"--no-build-trajectory"'))
    env = tmp_path / "deploy/systemd/worker.env.example"
    env.write_text(env.read_text().replace("TRACEGRADE_STORE=", "TRACEGRADE_STOR="))
    problems = refused_commands(tmp_path)
    assert any(p.startswith("k8s tracegrade-receiver:") and "--no-build-trajectory" in p for p in problems), problems
    assert any(p.startswith("systemd tracegrade-worker.service:") and "TRACEGRADE_STOR" in p for p in problems)
    assert len(problems) == 3, problems  # the worker's env file is the maintain unit's too


def test_the_image_installs_what_a_lake_store_loads() -> None:
    """The k8s workloads and the compose `lake` profile open `ducklake:` stores, which need the extension
    packages and psycopg that only tracegrade's `lake` extra brings: the Dockerfile must install it."""
    dockerfile = (ROOT / "deploy/Dockerfile").read_text()
    spec = re.search(r"--find-links \S+ '?(tracegrade[^\s']*)'?", dockerfile)
    assert spec, "deploy/Dockerfile: no `pip install --find-links DIR tracegrade...` line"
    extras = Requirement(spec.group(1)).extras
    installed = {
        Requirement(line).name
        for line in requires("tracegrade") or []
        if Requirement(line).marker is None
        or any(Requirement(line).marker.evaluate({"extra": extra}) for extra in extras)
    }
    assert {"duckdb-extension-ducklake", "duckdb-extension-postgres", "psycopg"} <= installed, spec.group(1)
    assert any("ducklake:postgres:" in str(args) + str(env) for args, env in compose_commands(ROOT).values())


def _checked_copy(tmp_path: Path) -> list[str]:
    """A copy of collector/ and deploy/ under ``tmp_path`` that deploy/check_files.py passes, and the command
    that checks it again once a test has broken a file."""
    for part in ("collector", "deploy"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("wheels", "__pycache__"))
    check = [sys.executable, str(ROOT / "deploy/check_files.py"), "--root", str(tmp_path)]
    assert subprocess.run(check, capture_output=True, text=True).returncode == 0
    return check


def test_units_under_protect_system_strict_give_duckdb_a_writable_home(tmp_path: Path) -> None:
    check = _checked_copy(tmp_path)
    unit = tmp_path / "deploy/systemd/tracegrade-maintain.service"
    unit.write_text(re.sub(r"(?m)^Environment=HOME=.*\n", "", unit.read_text()))
    result = subprocess.run(check, capture_output=True, text=True)
    assert result.returncode == 1
    assert "tracegrade-maintain.service: HOME is the user home /var/lib/tracegrade" in result.stderr
    assert "Environment=HOME=%S/tracegrade/maintain" in result.stderr


def test_serve_runs_with_exactly_the_receiver_env_example(tmp_path: Path) -> None:
    """receiver.env.example's settings as the unit passes them (variables, SERVE_ARGS split), with only the
    placeholders and host-specific values replaced: paths into tmp_path, free ports, loopback."""
    env = env_file(ROOT / "deploy/systemd/receiver.env.example")
    assert set(env) == {
        "TRACEGRADE_STORE",
        "TRACEGRADE_HOST",
        "TRACEGRADE_GRPC_PORT",
        "TRACEGRADE_HTTP_PORT",
        "TRACEGRADE_TOKEN",
        "SERVE_ARGS",
    }, "a setting was added to receiver.env.example: replace its placeholder here too"
    env["TRACEGRADE_STORE"] = env["TRACEGRADE_STORE"].replace("/var/lib/tracegrade/NAME", str(tmp_path))
    env |= {"TRACEGRADE_HOST": "127.0.0.1", "TRACEGRADE_GRPC_PORT": "0", "TRACEGRADE_HTTP_PORT": "0"}
    # the rules file the unit reads is deploy/rules.yaml installed as /etc/tracegrade/rules.yaml
    args = env.pop("SERVE_ARGS").replace("/etc/tracegrade/rules.yaml", str(ROOT / "deploy/rules.yaml")).split()
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, "serve", *args], env=base | env, stdout=out, stderr=subprocess.STDOUT
        )
    sidecar = Path(env["TRACEGRADE_STORE"] + ".server.json")
    try:
        deadline = time.monotonic() + 90
        while not sidecar.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert process.poll() is None, log.read_text()
        assert sidecar.exists(), log.read_text()
        http_url = yaml.safe_load(sidecar.read_text())["http_url"]
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(http_url + "/readyz", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        with urllib.request.urlopen(http_url + "/readyz", timeout=2) as response:
            assert response.status == 200
    finally:
        process.terminate()
        assert process.wait(60) == 0, log.read_text()


def test_compose_runs_the_image_tag_the_readme_builds_and_k8s_deploys(tmp_path: Path) -> None:
    """compose.yaml's default image was tracegrade:latest while deploy/README.md builds tracegrade:0.1.0:
    `docker compose up` would then pull a tracegrade:latest from Docker Hub instead of the image just built."""
    check = _checked_copy(tmp_path)
    compose = tmp_path / "deploy/compose.yaml"
    compose.write_text(re.sub(r"tracegrade:0\.1\.0\}", "tracegrade:latest}", compose.read_text()))
    result = subprocess.run(check, capture_output=True, text=True)
    assert result.returncode == 1
    assert "service receiver-1 runs tracegrade:latest, but k8s/ deploys tracegrade:0.1.0" in result.stderr
