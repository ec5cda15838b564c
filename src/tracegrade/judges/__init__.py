"""The judge layer: LLM calls through litellm with one concurrency limit, retries, a cache and usage.

``JudgeRuntime`` (one per run) and the ``judge_runtime`` scope are the entry points; criteria render a
prompt (``render_prompt``), call ``current_judge_runtime().complete`` and parse the reply
(``extract_json_object`` / ``ScoreReader``). Importing this package does not import litellm.
"""

from tracegrade.judges.cache import DEFAULT_CACHE_PATH, JudgeCache, open_judge_cache
from tracegrade.judges.client import JudgeCallError, JudgeReply, JudgeRequest, ProviderUnavailable, RetryPolicy
from tracegrade.judges.parsing import ClampedScore, ScoreReader, UnreadableReply, extract_json_object
from tracegrade.judges.prompts import RenderedPrompt, render_prompt
from tracegrade.judges.providers import ResolvedModel, provider_problem, resolve_model
from tracegrade.judges.runtime import JudgeRuntime, current_judge_runtime, judge_runtime

__all__ = [
    "DEFAULT_CACHE_PATH",
    "ClampedScore",
    "JudgeCache",
    "JudgeCallError",
    "JudgeReply",
    "JudgeRequest",
    "JudgeRuntime",
    "ProviderUnavailable",
    "RenderedPrompt",
    "ResolvedModel",
    "RetryPolicy",
    "ScoreReader",
    "UnreadableReply",
    "current_judge_runtime",
    "extract_json_object",
    "judge_runtime",
    "open_judge_cache",
    "provider_problem",
    "render_prompt",
    "resolve_model",
]
