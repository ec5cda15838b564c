"""Bounds that keep decoding of hostile OTLP input cheap and finite.

What each limit does when a payload exceeds it:

- ``max_attribute_value_bytes``: a longer string (or ``bytesValue``, counted as its base64 text) is cut
  to that many UTF-8 bytes and the marker ``…[truncated N bytes]`` is appended; the attribute itself is
  kept, so ``dropped_attributes_count`` does not change. Attribute keys (kvlist keys too), span names, event
  names and status messages are cut the same way (two keys cut to the same text keep the later value).
- ``max_attributes_per_span``: applies to every attribute list (span, event, link, resource, scope, log
  record); entries past the limit are dropped and added to that list's own dropped count
  (``dropped_attributes_count``; a resource's and a scope's are ``resource_dropped_attributes_count`` and
  ``scope_dropped_attributes_count`` of each of their records). Schema URLs are cut as string values are.
- ``max_collection_items``: an array or kvlist value longer than this is cut and ends with the marker
  string ``<N more items dropped>`` (arrays) or the key ``<truncated>`` (kvlists).
- ``max_nesting_depth``: an array or kvlist nested deeper than this becomes the string
  ``<nested too deeply>``. (Protobuf input nested deeper than the protobuf runtime's own limit of 100
  levels, or JSON deeper than Python's parser allows, is refused as a whole with a DecodeError.)
- ``max_events_per_span`` / ``max_links_per_span``: extra events/links are dropped and counted in
  ``dropped_events_count`` / ``dropped_links_count``.
- ``max_spans_per_request`` / ``max_log_records_per_request``: a request holding more is refused with a
  DecodeError telling the sender to use smaller batches.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_LIMITS", "TOO_DEEP", "DecodeLimits", "clip_text"]

TOO_DEEP = "<nested too deeply>"


@dataclass(frozen=True, slots=True)
class DecodeLimits:
    max_attribute_value_bytes: int = 1024 * 1024
    max_attributes_per_span: int = 1024
    max_collection_items: int = 10_000
    max_nesting_depth: int = 16
    max_events_per_span: int = 1024
    max_links_per_span: int = 1024
    max_spans_per_request: int = 100_000
    max_log_records_per_request: int = 100_000

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"DecodeLimits.{name} must be a positive integer, got {value!r}")

    @property
    def quick_text_chars(self) -> int:
        """Strings up to this many characters can never exceed the byte limit (4 bytes per character)."""
        return self.max_attribute_value_bytes // 4


DEFAULT_LIMITS = DecodeLimits()


def clip_text(text: str, max_bytes: int) -> str:
    """Return ``text`` unchanged if its UTF-8 form fits ``max_bytes``, else cut it and mark the cut."""
    if len(text) <= max_bytes // 4:
        return text
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    kept = raw[:max_bytes].decode("utf-8", "ignore")
    return f"{kept}…[truncated {len(raw) - max_bytes} bytes]"
