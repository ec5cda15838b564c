"""Judge prompts from template files, with every piece of agent/user/trace text fenced as data.

Templates (``templates/*.txt``) use ``$name`` placeholders. Values passed as ``data`` are wrapped in
``<<<NAME_{nonce}>>> … <<<END_NAME_{nonce}>>>`` with a random nonce per prompt, after any fence-like
marker inside them has been removed, so text in a trace cannot close its fence and pose as
instructions. ``params`` are trusted values (the eval author's rubric text, for instance).
The cache key uses the prompt rendered with a fixed nonce, so a cached verdict survives the nonce.
"""

from __future__ import annotations

import re
import secrets
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources

__all__ = ["RenderedPrompt", "render_prompt", "strip_fence_markers"]

# the whitespace before a marker's name is taken whole ((?!\s)): a space may also begin the name, and with both
# open to it the engine tried every split of a run of spaces (quadratic: "<<<" and 10k spaces took 0.3 s)
_MARKER = re.compile(r"<<<\s*(?!\s)/?[A-Za-z0-9_ -]*>>>")
_ANGLE_RUNS = re.compile(r"<{3,}|>{3,}")
_CACHE_NONCE = "NONCE"


@dataclass(frozen=True)
class RenderedPrompt:
    """The prompt sent to the judge and its nonce-free twin used for the cache key."""

    text: str
    cache_text: str
    nonce: str


@cache
def _template(name: str) -> string.Template:
    text = resources.files("tracegrade.judges").joinpath("templates", f"{name}.txt").read_text("utf-8")
    return string.Template(text)


def strip_fence_markers(text: str) -> str:
    """Remove anything that looks like a data-fence marker (and any run of three angle brackets)."""
    without_markers = _MARKER.sub("", text)
    return _ANGLE_RUNS.sub(lambda m: m.group(0)[0] * 2, without_markers)


def _fence(name: str, value: str, nonce: str) -> str:
    tag = f"{name.upper()}_{nonce}"
    return f"<<<{tag}>>>\n{strip_fence_markers(value)}\n<<<END_{tag}>>>"


def _render(name: str, data: dict[str, str], params: dict[str, str], nonce: str) -> str:
    values = {key: strip_fence_markers(value) for key, value in params.items()}
    values.update({key: _fence(key, value, nonce) for key, value in data.items()})
    values["data_rules"] = _template("data_rules").substitute(nonce=nonce)
    return _template(name).substitute(values)


def render_prompt(name: str, data: dict[str, str], params: dict[str, str] | None = None) -> RenderedPrompt:
    """Render template ``name``; ``data`` values are fenced as data, ``params`` inserted as they are."""
    nonce = secrets.token_hex(8)
    params = params or {}
    return RenderedPrompt(
        text=_render(name, data, params, nonce),
        cache_text=_render(name, data, params, _CACHE_NONCE),
        nonce=nonce,
    )
