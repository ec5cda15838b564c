"""What a judge model's calls cost: the criterion's configured price, else litellm's cost map.

A budget's ``max_judge_cost_usd`` adds up what the judges' calls cost. A judge model without a price would
count $0 and the cap could never trip, so :func:`judge_cost_cap_problems` refuses that combination where
configs are checked (``tracegrade validate``, every grading path at run start), saying how to give a price
(``judge_input_cost_per_mtok`` and ``judge_output_cost_per_mtok`` on the slot, or ``litellm.register_model``)
or to drop the cap. Without a cap an unpriced judge still grades, its $0 noted in each result.
"""

from __future__ import annotations

from tracegrade.judges.llm import load_litellm
from tracegrade.judges.providers import resolve_model
from tracegrade.models.config import SLOT_OPTIONS, CriteriaConfig, CriterionConfig

__all__ = ["configured_price", "cost_map_prices", "judge_cost_cap_problems", "price_problems"]

_PER_MTOK = 1_000_000
_PRICE_FIELDS = ("judge_input_cost_per_mtok", "judge_output_cost_per_mtok")


def configured_price(cfg: CriterionConfig) -> tuple[float, float] | None:
    """USD per input and per output token from the criterion's config, or None when it gives no price."""
    if cfg.judge_input_cost_per_mtok is None or cfg.judge_output_cost_per_mtok is None:
        return None
    return cfg.judge_input_cost_per_mtok / _PER_MTOK, cfg.judge_output_cost_per_mtok / _PER_MTOK


def price_problems(cfg: CriterionConfig) -> list[str]:
    """A price given by half: one of the two per-million-token prices without the other."""
    given = [name for name in _PRICE_FIELDS if getattr(cfg, name) is not None]
    if len(given) != 1:
        return []
    missing = next(name for name in _PRICE_FIELDS if name not in given)
    return [f"{given[0]} is set without {missing}; give both (USD per million tokens; 0 for free)"]


def cost_map_prices(litellm_model: str) -> bool:
    """Whether litellm's cost map prices ``litellm_model`` (the lookup every judge call's cost goes through)."""
    try:
        load_litellm().cost_per_token(model=litellm_model, prompt_tokens=1, completion_tokens=1)
    except Exception:  # litellm raises (ModelNotMappedError, or others by provider) for a model it cannot price
        return False
    return True


def judge_cost_cap_problems(criteria: CriteriaConfig, where: str = "$.criteria") -> list[tuple[str, str]]:
    """``(JSON path, problem)`` for each enabled judge slot whose model has no price while the enabled budget
    caps judge cost (nothing, and no litellm import, without such a cap)."""
    budget = criteria.budget
    if budget is None or not budget.enabled or budget.max_judge_cost_usd is None:
        return []
    problems = []
    for slot, cfg in criteria.enabled_slots():
        if "judge_model" not in SLOT_OPTIONS[slot] or configured_price(cfg) is not None:
            continue
        try:
            litellm_model = resolve_model(cfg.judge_model, cfg.use_vertex_ai).litellm_model
        except ValueError:  # no provider: the slot reports "No LLM provider available" when it grades
            continue
        if not cost_map_prices(litellm_model):
            problems.append(
                (
                    f"{where}.{slot}.judge_model",
                    f"judge model {cfg.judge_model!r} has no price in litellm's cost map, so its calls would count "
                    f"$0 and budget.max_judge_cost_usd ({budget.max_judge_cost_usd:g}) could never trip: give its "
                    "price in USD per million tokens with judge_input_cost_per_mtok and judge_output_cost_per_mtok "
                    "on this slot (or register it with litellm.register_model before the run), or drop "
                    "max_judge_cost_usd",
                )
            )
    return problems
