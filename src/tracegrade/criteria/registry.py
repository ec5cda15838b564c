"""The criterion registry: name -> class, with a decorator for user criteria and slot-to-instance building."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tracegrade.criteria.base import BaseCriterion
from tracegrade.errors import NotFoundError
from tracegrade.models.config import CriteriaConfig, CriterionConfig

__all__ = ["CRITERIA_REGISTRY", "build_criteria", "criterion_class", "register_criterion"]

CRITERIA_REGISTRY: dict[str, type[BaseCriterion]] = {}

C = TypeVar("C", bound=type[BaseCriterion])


def register_criterion(*names: str) -> Callable[[C], C]:
    """Class decorator: register a criterion under its ``name`` and any extra aliases.

    >>> @register_criterion()
    ... class MaxLength(SyncCriterion):
    ...     name = "max_length"
    """

    def wrap(cls: C) -> C:
        for key in (cls.name, *names):
            CRITERIA_REGISTRY[key] = cls
        return cls

    return wrap


def build_criteria(criteria: CriteriaConfig) -> list[BaseCriterion]:
    """One criterion instance per enabled slot, in slot order (the order results appear in), then one per
    enabled SQL assertion. A slot with ``scoring="adk"`` gets its ADK-compatible class where there is one."""
    from tracegrade.criteria.sql_assertion import SqlAssertionCriterion

    built = [criterion_class(slot, cfg)(config=cfg) for slot, cfg in criteria.enabled_slots()]
    built += [SqlAssertionCriterion.from_config(a) for a in criteria.sql_assertions if a.enabled]
    return built


def criterion_class(slot: str, config: CriterionConfig) -> type[BaseCriterion]:
    """The class that grades slot ``slot`` set up as ``config``: with ``scoring="adk"``, the ADK-compatible
    class where there is one."""
    import tracegrade.criteria  # noqa: F401  (registers the built-in criteria)
    from tracegrade.criteria.adk_scoring import ADK_CRITERIA

    cls = ADK_CRITERIA.get(slot) if config.scoring == "adk" else None  # ADK's numbers for this slot
    cls = cls or CRITERIA_REGISTRY.get(slot)
    if cls is None:
        raise NotFoundError(f"no criterion class is registered for slot {slot!r}")
    return cls
