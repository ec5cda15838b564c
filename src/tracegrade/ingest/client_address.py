"""Which client a request comes from, as the failed-authentication limit counts them (``auth_throttle``).

A client is its peer address: the TCP peer of an HTTP request, ``context.peer()`` of a gRPC call. An IPv6
client counts by its /64 network, since one host is handed a whole /64 and could otherwise try tokens from
as many addresses as it likes; an IPv4-mapped IPv6 peer (a dual-stack listener) counts as its IPv4 address.

``X-Forwarded-For`` is a header any client can write, so it is believed only when the peer is one of the
``--trusted-proxies``: the client is then the right-most address of the header that is not itself a trusted
proxy (each proxy appends the address it received the request from, so the entries further left were written
by the client and prove nothing). Kept free of heavy imports: the settings validate ``--trusted-proxies`` here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

__all__ = ["IPV6_CLIENT_PREFIX", "TrustedProxies", "client_key", "grpc_peer_host"]

IPV6_CLIENT_PREFIX = 64  # an IPv6 client is counted by this network (what one subscriber is handed)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _address(text: str) -> Address | None:
    """The address ``text`` names (``[v6]`` and a ``%zone`` allowed), IPv4-mapped IPv6 as IPv4; None if none."""
    try:
        address = ipaddress.ip_address(text.strip().strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def client_key(host: str) -> str:
    """The key a client is counted under: its IPv4 address, its IPv6 /64 (``2001:db8:1:2::/64``), or, for a
    peer that is not an IP address (a Unix socket), ``host`` itself."""
    address = _address(host)
    if address is None:
        return host
    if isinstance(address, ipaddress.IPv4Address):
        return str(address)
    return str(ipaddress.IPv6Network((address, IPV6_CLIENT_PREFIX), strict=False))


def grpc_peer_host(peer: str) -> str:
    """The host of a grpc ``context.peer()`` (``ipv4:127.0.0.2:5000`` -> ``127.0.0.2``, ``ipv6:[::1]:5000`` ->
    ``::1``); another kind of peer (``unix:/path``) is returned whole."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        return rest[1 : rest.find("]")] if rest.startswith("[") and "]" in rest else rest.rsplit(":", 1)[0]
    return peer


def _unmapped(network: Network) -> Network:
    """``network`` as IPv4 when it is IPv4-mapped IPv6 (``::ffff:10.0.0.5``), as peers are compared (``_address``):
    otherwise a proxy written as a dual-stack listener shows it would never be trusted."""
    mapped = network.network_address.ipv4_mapped if isinstance(network, ipaddress.IPv6Network) else None
    if mapped is None or network.prefixlen < 96:
        return network
    return ipaddress.IPv4Network((mapped, network.prefixlen - 96))


def _network(entry: str) -> Network:
    """The network ``entry`` of ``--trusted-proxies`` names; ValueError saying why when it names none.

    Strict: ``10.0.0.5/8`` is refused rather than read as ``10.0.0.0/8``, since it is as likely one proxy with a
    stray suffix, and trusting a whole /8 lets every address in it write the client's ``X-Forwarded-For``."""
    try:
        return _unmapped(ipaddress.ip_network(entry))
    except ValueError:
        pass
    try:
        network = ipaddress.ip_network(entry, strict=False)
    except ValueError:
        raise ValueError(
            f"{entry!r} is not an IP address or network; list the proxies in front of the receiver "
            "separated by commas, e.g. 10.0.0.5,10.1.0.0/16"
        ) from None
    host = entry.split("/", 1)[0]
    raise ValueError(
        f"{entry!r} has bits set after its /{network.prefixlen} prefix: write {network} to trust that whole network, "
        f"or {host} for the one proxy"
    )


class TrustedProxies:
    """The proxies whose ``X-Forwarded-For`` is believed (``--trusted-proxies``); none by default."""

    def __init__(self, networks: Iterable[Network] = ()) -> None:
        self.networks = tuple(networks)

    @classmethod
    def parse(cls, text: str | None) -> TrustedProxies:
        """``10.0.0.5, 10.1.0.0/16, fd00::/8`` -> the proxies; ValueError names an entry that is no address."""
        networks = []
        for entry in (text or "").split(","):
            if entry.strip():
                networks.append(_network(entry.strip()))
        return cls(networks)

    def __bool__(self) -> bool:
        return bool(self.networks)

    def _trusted(self, address: Address) -> bool:
        return any(address.version == network.version and address in network for network in self.networks)

    def client_of(self, peer: str, forwarded_for: Iterable[str] = ()) -> str:
        """The key (``client_key``) of the client of a request from ``peer`` with these ``X-Forwarded-For``
        values: the peer itself unless it is a trusted proxy, else the right-most untrusted address the proxies
        appended (an entry that is no address ends the walk at the last proxy that wrote one)."""
        current = _address(peer)
        if not self.networks or current is None or not self._trusted(current):
            return client_key(peer)
        hops = [hop for value in forwarded_for for hop in value.split(",")]
        for hop in reversed(hops):
            address = _address(hop)
            if address is None:
                break
            current = address
            if not self._trusted(address):
                break
        return client_key(str(current))
