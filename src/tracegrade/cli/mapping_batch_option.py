"""``--mapping-batch-bytes``: the span bytes a command maps into trajectories at once, as `serve` takes it.

The size is read by the parser ``tracegrade serve`` uses (``parse_byte_size``), from the same environment variable,
with the same default and floor, so a store is mapped alike whichever process builds its trajectories.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from tracegrade.ingest.settings import ENV_VARS, ServeSettings, parse_byte_size
from tracegrade.store.mapping_batches import DEFAULT_MAPPING_BATCH_BYTES, MIN_MAPPING_BATCH_BYTES

__all__ = ["ByteSize", "mapping_batch_bytes_given", "mapping_batch_bytes_option"]

F = TypeVar("F", bound=Callable[..., Any])

_ENV_VAR = ENV_VARS["mapping_batch_bytes"]
_DESCRIPTION = ServeSettings.model_fields["mapping_batch_bytes"].description or ""  # serve's help, not restated


class ByteSize(click.ParamType):
    """A size in bytes, written as bytes (16777216) or with a binary unit (16MiB, 512KiB, 1GiB), of at least
    ``minimum`` bytes."""

    name = "size"

    def __init__(self, minimum: int) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        # a bad value from the environment says so: the command line the user looks at does not hold it
        source = ctx.get_parameter_source(param.name) if ctx is not None and param and param.name else None
        where = f"; it is the value of {getattr(param, 'envvar', '')}" if source is ParameterSource.ENVIRONMENT else ""
        try:
            size = parse_byte_size(value)
        except ValueError as exc:
            self.fail(f"{exc}{where}", param, ctx)
        if size < self.minimum:
            self.fail(
                f"{value!r} is {size} bytes, below the least of {self.minimum} ({self.minimum // 1024}KiB): write "
                f"bytes (16777216) or a unit (16MiB, 512KiB, 1GiB){where}",
                param,
                ctx,
            )
        return size


def mapping_batch_bytes_option(func: F) -> F:
    """``--mapping-batch-bytes`` (also ``TRACEGRADE_MAPPING_BATCH_BYTES``), passed as ``mapping_batch_bytes``."""
    return click.option(
        "--mapping-batch-bytes",
        type=ByteSize(MIN_MAPPING_BATCH_BYTES),
        envvar=_ENV_VAR,
        show_envvar=True,
        default=DEFAULT_MAPPING_BATCH_BYTES,
        show_default="16MiB",
        help=f"{_DESCRIPTION[:1].upper()}{_DESCRIPTION[1:]} (at least {MIN_MAPPING_BATCH_BYTES // 1024}KiB).",
    )(func)


def mapping_batch_bytes_given() -> str | None:
    """How the running command was given ``--mapping-batch-bytes``: the option, or its environment variable; None
    when it takes the default (or outside a command)."""
    ctx = click.get_current_context(silent=True)
    source = ctx.get_parameter_source("mapping_batch_bytes") if ctx is not None else None
    if source is ParameterSource.COMMANDLINE:
        return "--mapping-batch-bytes"
    if source is ParameterSource.ENVIRONMENT:
        return _ENV_VAR
    return None
