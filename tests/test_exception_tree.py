"""Every exception class tracegrade defines descends from TracegradeError, so one ``except`` catches them all.

The classes are found by importing every tracegrade module, not from a hand-kept list, so a new error class
outside the tree fails here the day it is added.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil

import pytest

import tracegrade
from tracegrade.errors import (
    EventLoopError,
    InvalidStateError,
    InvalidValueError,
    MissingFileError,
    NotFoundError,
    TracegradeError,
)

# Classes that must stay outside the tree, each with the reason. Keep it short: only a class that truly cannot
# descend (one a third-party library or Python itself requires to be its own exact subclass) belongs here.
ALLOWED_OUTSIDE: dict[str, str] = {
    "tracegrade.errors.RunInterrupted": "a KeyboardInterrupt, so an `except Exception` never swallows Ctrl-C",
    "tracegrade.evaluation.evaluator._Interrupted": "a CancelledError, so asyncio treats the stopped run as cancelled",
}


def _tracegrade_modules() -> list[str]:
    names = [tracegrade.__name__]
    for info in pkgutil.walk_packages(tracegrade.__path__, prefix="tracegrade."):
        if not info.name.endswith("__main__"):  # running it would start the CLI
            names.append(info.name)
    return names


def _all_subclasses(cls: type) -> set[type]:
    found: set[type] = set()
    todo = [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def _tracegrade_exception_classes() -> dict[str, type]:
    for name in _tracegrade_modules():
        importlib.import_module(name)
    return {
        f"{cls.__module__}.{cls.__qualname__}": cls
        for cls in _all_subclasses(BaseException)
        if cls.__module__ == "tracegrade" or cls.__module__.startswith("tracegrade.")
    }


def test_every_tracegrade_exception_descends_from_tracegrade_error() -> None:
    classes = _tracegrade_exception_classes()
    # the walk must have found the known ones, or it proves nothing
    for known in (
        "tracegrade.ingest.intake.ExportRefused",
        "tracegrade.ingest.intake.Overloaded",
        "tracegrade.judges.client.JudgeCallError",
        "tracegrade.judges.client.ProviderUnavailable",
        "tracegrade.store.writer.QueueFull",
    ):
        assert known in classes
    outside = sorted(
        name for name, cls in classes.items() if not issubclass(cls, TracegradeError) and name not in ALLOWED_OUTSIDE
    )
    assert outside == [], f"exception classes outside TracegradeError: {outside}"


def test_export_refusals_keep_their_status_codes() -> None:
    import grpc

    from tracegrade.ingest.intake import ExportRefused, Overloaded, Unauthenticated

    assert issubclass(ExportRefused, TracegradeError)
    refused = Overloaded("queue full", retry_after=2.0)
    assert (refused.http_status, refused.grpc_code, refused.retry_after) == (
        503,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        2.0,
    )
    assert (Unauthenticated.http_status, Unauthenticated.grpc_code) == (401, grpc.StatusCode.UNAUTHENTICATED)


def test_judge_errors_are_still_runtime_errors() -> None:
    from tracegrade.judges.client import JudgeCallError, ProviderUnavailable

    for cls in (JudgeCallError, ProviderUnavailable):
        assert issubclass(cls, TracegradeError) and issubclass(cls, RuntimeError)


def test_evaluate_sync_inside_an_event_loop_is_a_tracegrade_error_and_a_runtime_error() -> None:
    from tracegrade import AgentEvaluator, EvalSet

    async def inside_a_loop() -> None:
        AgentEvaluator(lambda text: text).evaluate_sync(EvalSet(eval_set_id="empty", eval_cases=[]))

    with pytest.raises(EventLoopError, match="await evaluate") as caught:
        asyncio.run(inside_a_loop())
    # code written against the old RuntimeError keeps catching it
    assert isinstance(caught.value, RuntimeError) and isinstance(caught.value, InvalidStateError)


def test_compatible_bases_for_code_that_caught_the_builtin_errors() -> None:
    assert issubclass(InvalidValueError, ValueError)
    assert issubclass(MissingFileError, FileNotFoundError)
    assert issubclass(NotFoundError, KeyError)
    # a KeyError's str() is the repr of its argument; a NotFoundError reads as written
    assert str(NotFoundError("no grading run 'abc' in the store")) == "no grading run 'abc' in the store"


def test_a_missing_eval_set_file_is_a_missing_file_error(tmp_path) -> None:
    from tracegrade import AgentEvaluator

    with pytest.raises(MissingFileError, match="not found"):
        AgentEvaluator(lambda text: text).evaluate_sync(str(tmp_path / "absent.json"))
