"""Judge-model resolution: any litellm model string, Google models routed to AI Studio or Vertex AI.

``resolve_model`` turns the configured ``judge_model`` into the string litellm is called with;
``provider_problem`` says, before any call is made, why no provider can serve it (unknown provider,
missing credentials) — the criteria then report "No LLM provider available" instead of failing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tracegrade.errors import InvalidValueError
from tracegrade.judges.llm import load_litellm

__all__ = ["ResolvedModel", "provider_problem", "resolve_model", "vertex_ai_enabled"]

_GOOGLE_PREFIXES = ("gemini", "google", "vertex_ai")
_GOOGLE_NAME_STARTS = ("gemini-", "imagen-", "veo-", "chirp")
# Vertex AI finds its project in any of these (or in application-default credentials).
_VERTEX_PROJECT_VARS = ("VERTEXAI_PROJECT", "VERTEX_PROJECT", "GOOGLE_CLOUD_PROJECT", "GOOGLE_APPLICATION_CREDENTIALS")


@dataclass(frozen=True)
class ResolvedModel:
    """The configured judge model and the litellm model string (``provider/name``) that serves it."""

    configured: str
    litellm_model: str
    provider: str


def vertex_ai_enabled(use_vertex_ai: bool | None = None) -> bool:
    """An explicit setting wins; otherwise ``GOOGLE_GENAI_USE_VERTEXAI=true`` turns Vertex AI on."""
    if use_vertex_ai is not None:
        return use_vertex_ai
    return os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").strip().lower() in ("true", "1")


def _google_route(model: str, use_vertex_ai: bool | None) -> str | None:
    """``gemini/<name>`` or ``vertex_ai/<name>`` for a Google model, else None."""
    prefix, _, rest = model.partition("/")
    if rest and prefix.lower() in _GOOGLE_PREFIXES:
        if prefix.lower() == "vertex_ai":
            return model
        name = rest
    elif not rest and model.lower().startswith(_GOOGLE_NAME_STARTS):
        name = model
    else:
        return None
    return f"{'vertex_ai' if vertex_ai_enabled(use_vertex_ai) else 'gemini'}/{name}"


def resolve_model(judge_model: str, use_vertex_ai: bool | None = None) -> ResolvedModel:
    """Resolve ``judge_model``; raises ``ValueError`` when litellm knows no provider for it."""
    model = judge_model.strip()
    if not model:
        raise InvalidValueError("judge_model is empty; set it to a litellm model string such as 'openai/gpt-4o-mini'")
    litellm_model = _google_route(model, use_vertex_ai) or model
    litellm = load_litellm()
    try:
        _, provider, _, _ = litellm.get_llm_provider(litellm_model)
    except Exception as exc:
        raise InvalidValueError(
            f"litellm knows no provider for judge_model {judge_model!r}; prefix it with a provider "
            f"(for example 'openai/{model}' for an OpenAI-compatible endpoint)"
        ) from exc
    return ResolvedModel(configured=judge_model, litellm_model=litellm_model, provider=provider)


def provider_problem(
    judge_model: str, api_key: str | None = None, api_base: str | None = None, use_vertex_ai: bool | None = None
) -> str | None:
    """Why no provider can serve ``judge_model`` with these settings, or None when one can."""
    try:
        resolved = resolve_model(judge_model, use_vertex_ai)
    except ValueError as exc:
        return str(exc)
    if api_key:
        return None
    if resolved.provider == "vertex_ai":
        if any(os.environ.get(v) for v in _VERTEX_PROJECT_VARS):
            return None
        return f"no Vertex AI project for {resolved.litellm_model}: set VERTEXAI_PROJECT (or GOOGLE_CLOUD_PROJECT)"
    env = load_litellm().validate_environment(model=resolved.litellm_model, api_base=api_base)
    missing = env.get("missing_keys") or []
    if missing:
        return f"missing credentials for {resolved.litellm_model}: set {', '.join(missing)} or the criterion's api_key"
    return None
