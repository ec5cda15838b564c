"""An agent that raises, seen from ``tracegrade run``: a simulated-user case keeps the agent's traceback
(``error_traceback``) as a scripted case does, and the HTML report shows that traceback folded under the error,
escaped. A real ``tracegrade run`` process; the simulated user is scripted on the local LLM server over HTTP."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.grading_cli import write_config
from tests.support.judges_setup import JUDGE_MODEL, fresh_server, scripted_server  # noqa: F401
from tests.support.llm_server import LLMServer, Reply
from tests.support.simulated_users import SIM_MARKER, scripted_user
from tracegrade.evaluation.simulator import ConversationScenario, UserSimulator
from tracegrade.models import EvalCase, EvalSet, Invocation
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig, UserSimulatorConfig

# where the agent fails: a helper of the user's, raising with text that HTML must escape
HELPERS = textwrap.dedent(
    """
    ORDERS = {"42": "ships tomorrow"}

    def status(order):
        if order not in ORDERS:
            raise LookupError(f"no order <{order}> & no refund")
        return ORDERS[order]
    """
)

AGENT = textwrap.dedent(
    """
    import re
    from tracegrade import trace_node
    from helpers import status

    @trace_node("agent")
    def agent(text: str) -> str:
        order = re.findall(r"[0-9]+", text)[-1]
        return f"Order {order} {status(order)}."
    """
)

RAISE_LINE = HELPERS.splitlines().index('        raise LookupError(f"no order <{order}> & no refund")') + 1
MESSAGE = "LookupError: no order <7> & no refund"


def _project(tmp_path: Path, server: LLMServer) -> Path:
    (tmp_path / "helpers.py").write_text(HELPERS, encoding="utf-8")
    (tmp_path / "order_agent.py").write_text(AGENT, encoding="utf-8")
    scenario = ConversationScenario(description="a customer asks about orders", starting_prompt="Order 42?")
    cases = [
        EvalCase.simulated("simulated", scenario, expected_response="ships"),
        EvalCase(eval_id="scripted", conversation=[Invocation.simple("Order 7?", "ships")]),
    ]
    EvalSet(eval_set_id="orders", eval_cases=cases).to_file(tmp_path / "cases.json")
    user = UserSimulatorConfig(model=JUDGE_MODEL, api_base=server.base_url, api_key="test-key", api_style="chat")
    config = EvalConfig(
        criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["ships"])),
        user_simulator_config=user,
    )
    write_config(tmp_path / "config.json", config)
    return tmp_path


def _tracegrade_run(project: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tracegrade.cli.main", "run", "order_agent.py", "--evalset", "cases.json"]
    command += ["--config", "config.json", "--out", "out", "--format", "json,html"]
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)


def _frames(traceback: str) -> list[str]:
    return [Path(f).name for f in re.findall(r'File "([^"]+)", line \d+', traceback)]


def test_a_simulated_case_whose_agent_raises_keeps_the_traceback_and_the_html_shows_it(
    tmp_path: Path, server: LLMServer
) -> None:
    server.responder = scripted_user(["And order 7?"], Reply.score(1.0))
    project = _project(tmp_path, server)
    run = _tracegrade_run(project)
    assert run.returncode == 1, run.stderr
    assert any(SIM_MARKER in r.prompt for r in server.requests)  # the simulated user did speak

    (json_file,) = (project / "out").glob("*.json")
    results = {r["eval_id"]: r for r in json.loads(json_file.read_text(encoding="utf-8"))["results"]}
    for eval_id, turn in (("simulated", 1), ("scripted", 0)):
        result = results[eval_id]
        assert result["error"] == f"Agent error on turn {turn}: {MESSAGE} (at helpers.py:{RAISE_LINE}, in status)"
        traceback = result["error_traceback"]
        # from the agent's entry point to the helper that raised; none of tracegrade's frames (turn, trace_node)
        assert traceback is not None, eval_id
        assert _frames(traceback) == ["order_agent.py", "helpers.py"], traceback
        assert traceback.rstrip().endswith(MESSAGE)
    simulation = results["simulated"]["metadata"]["simulation"]
    assert (simulation["stopped_by"], simulation["error"]) == ("error", results["simulated"]["error"])
    assert "error_traceback" not in simulation  # the case has it; the outcome in the metadata is not repeated

    page = next((project / "out").glob("*.html")).read_text(encoding="utf-8")
    for eval_id in ("simulated", "scripted"):
        traceback = results[eval_id]["error_traceback"].rstrip()
        folded = (
            '<details class="traceback"><summary>Traceback</summary>'
            f'<pre class="error-traceback">{html.escape(traceback, quote=True)}</pre></details>'
        )
        error = f'<pre class="error-message">{html.escape(results[eval_id]["error"], quote=True)}</pre>'
        assert error + folded in page, eval_id  # right under its error, closed until opened
    assert "no order <7>" not in page and "no order &lt;7&gt; &amp; no refund" in page


async def test_user_simulator_run_keeps_the_agent_traceback(server: LLMServer) -> None:
    server.responder = scripted_user(["And order 7?"], Reply.score(1.0))

    def lookup(order: str) -> str:
        raise LookupError(f"no order {order}")

    def agent(text: str) -> str:
        return lookup(re.findall(r"[0-9]+", text)[-1])

    user = UserSimulatorConfig(model=JUDGE_MODEL, api_base=server.base_url, api_key="test-key", api_style="chat")
    scenario = ConversationScenario(description="orders", starting_prompt="Order 7?")
    result = await UserSimulator(config=user).run(agent, scenario)
    assert result.stopped_by == "error" and result.error is not None
    assert result.error.startswith("Agent error on turn 0: LookupError: no order 7 (at ")
    assert result.error_traceback is not None
    assert _frames(result.error_traceback) == [Path(__file__).name] * 2
    assert "error_traceback" not in result.outcome()
