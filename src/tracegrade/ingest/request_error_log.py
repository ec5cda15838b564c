"""The log of aiohttp's request handling: a request refused because the client got HTTP wrong is one line.

aiohttp answers a request its parser cannot read (a bad ``Content-Length``, both ``Content-Length`` and
``Transfer-Encoding``, data after ``Connection: close``…) with 400 and logs the parser's exception with its
traceback at ERROR, through Python's last-resort handler: any client could fill the receiver's log with
tracebacks of its own mistakes. Such a refusal is logged here as one WARNING line of tracegrade's log saying what
was wrong; any other error keeps its traceback.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

__all__ = ["request_error_log"]


class _RequestErrorLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        error = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if isinstance(error, HttpProcessingError):
            # the parser's message goes on to quote the request's bytes: its first line says what was wrong
            said = (error.message or type(error).__name__).strip().splitlines()[0].rstrip(":")
            self.warning(f"{msg}: %d %s (a malformed request, refused)", *args, error.code, said, **kwargs)
        else:
            super().exception(msg, *args, exc_info=exc_info, **kwargs)


def request_error_log() -> logging.LoggerAdapter:  # type: ignore[type-arg]
    """The logger to give an aiohttp ``AppRunner`` (its ``logger`` option) in place of ``aiohttp.server``: under
    ``tracegrade``, so ``serve`` writes its lines with their time and level."""
    return _RequestErrorLog(logging.getLogger(__name__), {})
