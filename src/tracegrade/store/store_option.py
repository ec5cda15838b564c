"""The option the user named the store with, for the store's errors to name it: ``--store`` on the command line,
``--tracegrade-store`` in a pytest session (which opens its store inside :func:`store_named_by`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["point_at_a_store", "store_named_by", "store_option"]

_OPTION: ContextVar[str] = ContextVar("tracegrade_store_option", default="--store")


def store_option() -> str:
    """The option that named the store being opened here (``--store`` unless :func:`store_named_by` says else)."""
    return _OPTION.get()


def point_at_a_store() -> str:
    """What to do about a file that is no tracegrade store: point the option that named it elsewhere."""
    return f"point {store_option()} at a tracegrade store or at a new file"


@contextmanager
def store_named_by(option: str) -> Iterator[None]:
    """Within the block, the store's errors name ``option`` as the one that points at the store."""
    token = _OPTION.set(option)
    try:
        yield
    finally:
        _OPTION.reset(token)
