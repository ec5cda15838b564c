"""Keeping judge credentials out of what a failed judge call reports.

A provider may echo the key it was sent ("Incorrect API key provided: sk-…", a proxy quoting the request) and
litellm puts the provider's reply into its exception text, which would reach results, reports, JUnit files,
stored runs and logs. ``judge_secrets`` gathers what must never appear (the criterion's ``api_key``, the
credentials in its ``api_base`` URL, and the values of credential-like environment variables litellm may have
read); ``redact`` replaces each occurrence with ``<redacted>``.
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, urlsplit

from tracegrade.models.config import REDACTED
from tracegrade.store.lake_location import redacted

__all__ = ["endpoint_label", "judge_secrets", "redact"]

# Environment variables whose values are credentials (OPENAI_API_KEY, AZURE_AD_TOKEN, AWS_SECRET_ACCESS_KEY, ...).
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
# Shorter values are too likely to be ordinary words or flags ("true", "1") to be replaced wherever they occur.
_MIN_ENV_SECRET = 8
_MIN_GIVEN_SECRET = 4
_QUERY_SECRET_NAMES = re.compile(r"key|token|secret|password|sig", re.IGNORECASE)


def _with_scheme(api_base: str) -> str:
    """``api_base`` with a scheme: without one, URL parsers read ``user:password@host`` as a scheme and a path,
    and the password would go unseen (such an api_base fails the call, and the error quotes it)."""
    return api_base if "://" in api_base else f"http://{api_base}"


def _url_secrets(api_base: str | None) -> list[str]:
    if not api_base:
        return []
    try:
        parts = urlsplit(_with_scheme(api_base))
        found = [parts.password or ""]
        found += [value for name, value in parse_qsl(parts.query) if _QUERY_SECRET_NAMES.search(name)]
    except ValueError:  # an unparsable URL still fails the call; its text is masked by endpoint_label
        return []
    return found


def judge_secrets(api_key: str | None, api_base: str | None) -> tuple[str, ...]:
    """Every credential a judge call to ``api_base`` with ``api_key`` may have used, longest first."""
    given = [api_key or "", *_url_secrets(api_base)]
    values = {v for v in given if len(v) >= _MIN_GIVEN_SECRET}
    values |= {v for n, v in os.environ.items() if _SECRET_NAME.search(n) and len(v) >= _MIN_ENV_SECRET}
    return tuple(sorted(values, key=len, reverse=True))  # longest first: a key containing another goes whole


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every one of ``secrets`` replaced by ``<redacted>``."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def endpoint_label(provider: str, api_base: str | None) -> str:
    """How an error names the endpoint: its URL without credentials, or the provider's configured endpoint."""
    if not api_base:
        return f"the {provider} endpoint from the environment"
    if "://" not in api_base:
        return redacted(_with_scheme(api_base)).removeprefix("http://")
    return redacted(api_base)  # as configs and reports show it
