"""What a reader needs from a span: ``reads`` declares the attribute keys without which it finds nothing, so
``sources`` can leave out the readers that none of a mapping's spans can feed (worked out once per set of
attribute keys, which is the same for every trace of one agent).

A declaration is a promise about the reader's code (it returns None on a span that has none of the keys);
an undeclared reader is always asked. Declare only readers whose every source is one of a few fixed keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["Chain", "Chains", "applicable", "chains_for", "reads"]

R = TypeVar("R", bound=Callable[..., Any])
# not generic: mypyc cannot type a function, used from another module, that a generic decorator returns
_Reader = Callable[..., Any]

Chains = list[tuple[Any, ...] | None]  # by ``Chain.slot``: the chain's applicable readers (None: not worked out)

_NEEDS: dict[Callable[..., Any], tuple[frozenset[str], bool]] = {}
_CHAINS: dict[tuple[frozenset[str], bool], Chains] = {}  # for every trace, keyed by what its spans carry
_CHAINS_MAX = 256  # distinct key sets remembered (flattened message keys make many); then start afresh


class Chain:
    """A precedence chain: its readers are asked in order and the first answer wins (``sources.first``).

    Every chain has a ``slot`` in the ``Chains`` of a mapping, where its applicable readers are kept.
    """

    __slots__ = ("readers", "slot")

    def __init__(self, *readers: Callable[..., Any]) -> None:
        self.readers = readers
        self.slot = len(_ALL_CHAINS)
        _ALL_CHAINS.append(self)
        _CHAINS.clear()  # remembered ``Chains`` have no slot for this chain


_ALL_CHAINS: list[Chain] = []


def reads(*keys: str, events: bool = False) -> Callable[[_Reader], _Reader]:
    """Declare that the reader returns None for a span that has none of the attribute ``keys`` (and, with
    ``events``, no span events or log records either)."""
    needs = (frozenset(keys), events)

    def declare(reader: _Reader) -> _Reader:
        _NEEDS[reader] = needs
        return reader

    return declare


def chains_for(keys: frozenset[str], has_events: bool) -> Chains:
    """The applicable chains of mappings whose spans carry these attribute ``keys`` (and events or log records
    when ``has_events``), filled in by ``sources`` as chains are used: traces of one agent all carry the same
    keys, so each chain is worked out once for all of them."""
    found = _CHAINS.get((keys, has_events))
    if found is None:
        if len(_CHAINS) >= _CHAINS_MAX:
            _CHAINS.clear()
        found = _CHAINS[keys, has_events] = [None] * len(_ALL_CHAINS)
    return found


def applicable(readers: Iterable[R], keys: frozenset[str] | None, has_events: bool) -> tuple[R, ...]:
    """``readers`` without the declared ones that spans with these attribute ``keys`` (and events or log
    records when ``has_events``) cannot feed; the order is kept. Unknown ``keys`` (None) keep every reader."""
    if keys is None:
        return tuple(readers)
    kept = []
    for reader in readers:
        needs = _NEEDS.get(reader)
        if needs is None or not needs[0].isdisjoint(keys) or (needs[1] and has_events):
            kept.append(reader)
    return tuple(kept)
