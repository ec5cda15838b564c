"""Writes the ADK eval files in this directory with google-adk's own pydantic models.

Run it with a Python that has google-adk installed (not tracegrade's venv, google-adk is no dependency):
``/tmp/adkvenv2/bin/python tests/data/adk/make_files.py``. The files it writes are committed; the tests read
them without google-adk.
"""

from __future__ import annotations

import json
from pathlib import Path

from google.adk.evaluation.eval_case import (
    EvalCase,
    IntermediateData,
    Invocation,
    InvocationEvent,
    InvocationEvents,
    SessionInput,
)
from google.adk.evaluation.eval_config import EvalConfig
from google.adk.evaluation.eval_metrics import (
    HallucinationsCriterion,
    JudgeModelOptions,
    LlmAsAJudgeCriterion,
    RubricsBasedCriterion,
    ToolTrajectoryCriterion,
)
from google.adk.evaluation.eval_rubrics import Rubric, RubricContent
from google.adk.evaluation.eval_set import EvalSet
from google.genai import types

HERE = Path(__file__).parent


def text(role: str, value: str) -> types.Content:
    return types.Content(role=role, parts=[types.Part(text=value)])


def call(name: str, call_id: str | None = None, **args: object) -> types.FunctionCall:
    return types.FunctionCall(name=name, args=args, id=call_id)


def eval_set() -> EvalSet:
    weather = EvalCase(
        eval_id="weather_bergen",
        conversation=[
            Invocation(
                invocation_id="inv-1",
                user_content=text("user", "What is the weather in Bergen?"),
                final_response=text("model", "It is raining in Bergen, 12 degrees."),
                intermediate_data=IntermediateData(
                    tool_uses=[call("get_weather", "c1", city="Bergen", units="metric")],
                    tool_responses=[types.FunctionResponse(id="c1", name="get_weather", response={"rain": True})],
                ),
            )
        ],
        session_input=SessionInput(app_name="weather_app", user_id="u1", state={"home": "Oslo"}),
    )
    trip = EvalCase(
        eval_id="trip_two_turns",
        conversation=[
            Invocation(
                user_content=text("user", "Book a flight to Tromsø"),
                final_response=text("model", "Booked flight SK123 to Tromsø."),
                intermediate_data=IntermediateData(
                    tool_uses=[call("search_flights", to="TOS"), call("book", flight="SK123", seats=1)],
                    intermediate_responses=[("planner", [types.Part(text="Looking for flights")])],
                ),
            ),
            Invocation(
                user_content=text("user", "And a hotel?"),
                final_response=text("model", "Hotel booked."),
                intermediate_data=IntermediateData(tool_uses=[call("book_hotel", city="Tromsø", nights=2)]),
            ),
        ],
        session_input=SessionInput(app_name="travel", user_id="u2", session_id="s-fixed"),
    )
    events = EvalCase(
        eval_id="events_form",
        conversation=[
            Invocation(
                user_content=text("user", "Roll a die"),
                final_response=text("model", "You rolled 4."),
                intermediate_data=InvocationEvents(
                    invocation_events=[
                        InvocationEvent(
                            author="dice_agent",
                            content=types.Content(
                                role="model", parts=[types.Part(function_call=call("roll_die", "r1", sides=6))]
                            ),
                        ),
                        InvocationEvent(
                            author="dice_agent",
                            content=types.Content(
                                role="user",
                                parts=[
                                    types.Part(
                                        function_response=types.FunctionResponse(
                                            id="r1", name="roll_die", response={"result": 4}
                                        )
                                    )
                                ],
                            ),
                        ),
                    ]
                ),
            )
        ],
    )
    no_tools = EvalCase(
        eval_id="greeting",
        conversation=[
            Invocation(
                user_content=text("user", "Hello"),
                final_response=text("model", "Hi! How can I help?"),
                intermediate_data=IntermediateData(tool_uses=[]),
            )
        ],
    )
    return EvalSet(
        eval_set_id="adk_demo",
        name="ADK demo",
        description="written by google-adk",
        eval_cases=[weather, trip, events, no_tools],
    )


def configs() -> dict[str, EvalConfig]:
    judge = JudgeModelOptions(judge_model="gemini-2.5-flash", num_samples=2)
    return {
        "test_config.json": EvalConfig(criteria={"tool_trajectory_avg_score": 1.0, "response_match_score": 0.8}),
        "full.test_config.json": EvalConfig(
            criteria={
                "tool_trajectory_avg_score": ToolTrajectoryCriterion(
                    threshold=1.0, match_type=ToolTrajectoryCriterion.MatchType.IN_ORDER, ignore_args=True
                ),
                "response_match_score": 0.5,
                "final_response_match_v2": LlmAsAJudgeCriterion(threshold=0.6, judge_model_options=judge),
                "rubric_based_final_response_quality_v1": RubricsBasedCriterion(
                    threshold=0.7,
                    judge_model_options=judge,
                    rubrics=[
                        Rubric(rubric_id="polite", rubric_content=RubricContent(text_property="The reply is polite."))
                    ],
                ),
                "hallucinations_v1": HallucinationsCriterion(threshold=0.9, judge_model_options=judge),
                "safety_v1": 0.8,
            }
        ),
    }


def old_format() -> list[dict[str, object]]:
    return [
        {"query": "What can you do?", "expected_tool_use": [], "reference": "I can roll dice and check primes."},
        {
            "query": "Roll a 17 sided die twice",
            "expected_tool_use": [
                {"tool_name": "roll_die", "tool_input": {"sides": 17}},
                {"tool_name": "roll_die", "tool_input": {"sides": 17}},
            ],
            "reference": "I rolled 13 and 4.",
        },
    ]


def paris() -> EvalSet:
    """The case of the ADK 2.13 trace in /work/shared/fixtures/otlp/google_adk_2.13.0_v2_span_only.otlp.json."""
    turn = Invocation(
        user_content=text("user", "What's the weather in Paris?"),
        final_response=text("model", "It is sunny in Paris."),
        intermediate_data=IntermediateData(tool_uses=[call("get_weather", city="Paris")]),
    )
    return EvalSet(eval_set_id="paris", eval_cases=[EvalCase(eval_id="paris_weather", conversation=[turn])])


def main() -> None:
    (HERE / "paris.evalset.json").write_text(paris().model_dump_json(indent=2) + "\n")
    built = eval_set()
    (HERE / "demo.evalset.json").write_text(built.model_dump_json(indent=2) + "\n")
    camel = {
        **built.model_dump(mode="json"),
        "eval_cases": [c.model_dump(mode="json", by_alias=True) for c in built.eval_cases],
    }
    (HERE / "demo_camel.evalset.json").write_text(json.dumps(camel, indent=2) + "\n")
    for name, config in configs().items():
        (HERE / name).write_text(config.model_dump_json(indent=2, exclude_none=True) + "\n")
    (HERE / "dice.test.json").write_text(json.dumps(old_format(), indent=2) + "\n")
    # ADK's own migration of the older format, to check tracegrade reads the list as ADK does
    from google.adk.evaluation.local_eval_sets_manager import convert_eval_set_to_pydantic_schema

    migrated = convert_eval_set_to_pydantic_schema(
        "dice", [{"name": "dice", "data": old_format(), "initial_session": {}}]
    )
    (HERE / "dice_migrated.evalset.json").write_text(migrated.model_dump_json(indent=2) + "\n")


if __name__ == "__main__":
    main()
