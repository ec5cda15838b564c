"""A reply streamed as server-sent events although the call asked for no stream, joined into one reply.

Some gateways and proxies stream every completion whatever the request says. litellm, having asked for a
plain reply, cannot read the ``data:`` events and reports a malformed body; ``assembled`` joins the events
into the reply they stream (the chat completion's text, finish reason and usage; the responses API's final
``response.completed`` object) so the judge's verdict is read all the same. A stream that ends before its
last event is not assembled: the call fails as a malformed reply, quoting the start of the body.
"""

from __future__ import annotations

import json
from typing import Any

from tracegrade.judges.llm import load_litellm

__all__ = ["assembled", "looks_streamed"]

# the events that end a responses API stream with the whole response in them
_FINAL_RESPONSE_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def looks_streamed(body: str) -> bool:
    """Whether ``body`` is a server-sent event stream (its first line a ``data:`` or ``event:`` field)."""
    return body.lstrip().startswith(("data:", "event:"))


def _events(body: str) -> list[dict[str, Any]]:
    """The JSON objects of the stream's ``data:`` lines (``[DONE]`` and anything unreadable skipped)."""
    events = []
    for line in body.splitlines():
        if not line.startswith("data:"):
            continue
        data = line.removeprefix("data:").strip()
        if data == "[DONE]":
            continue
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def assembled(body: str, api: str) -> Any | None:
    """The reply the stream in ``body`` carries, as litellm's object for ``api`` (``chat`` or ``responses``),
    or None when ``body`` is no complete stream of that API."""
    if not looks_streamed(body):
        return None
    events = _events(body)
    return _chat_reply(events) if api == "chat" else _responses_reply(events)


def _chat_reply(chunks: list[dict[str, Any]]) -> Any | None:
    text: list[str] = []
    finish_reason = None
    usage = None
    for chunk in chunks:
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text.append(str(delta.get("content") or ""))
            finish_reason = choice.get("finish_reason") or finish_reason
    if finish_reason is None:  # the stream stopped before its last chunk: the reply may be cut anywhere
        return None
    first = chunks[0]
    reply = {
        "id": str(first.get("id", "streamed")),
        "created": int(first.get("created") or 0),
        "model": str(first.get("model", "")),
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "".join(text)}, "finish_reason": finish_reason}
        ],
    }
    if usage is not None:
        reply["usage"] = usage
    return load_litellm().ModelResponse(**reply)


def _responses_reply(events: list[dict[str, Any]]) -> Any | None:
    final = next((e for e in reversed(events) if e.get("type") in _FINAL_RESPONSE_EVENTS), None)
    response = final.get("response") if final is not None else None
    if not isinstance(response, dict):
        return None
    from litellm.types.llms.openai import ResponsesAPIResponse

    return ResponsesAPIResponse(**response)
