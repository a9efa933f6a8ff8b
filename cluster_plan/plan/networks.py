"""Plan networks as address arithmetic: which addresses exist, which are taken by the site."""

from __future__ import annotations

import bisect
import socket
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import netaddr


class AddressError(ValueError):
    """A plan address or range that cannot be read."""


class AddressRanges:
    """A set of addresses kept as merged inclusive ranges, so reserving a /9 costs two ints,
    not eight million set entries; ``in`` is a binary search."""

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        merged: list[list[int]] = []
        for low, high in sorted(ranges):
            if merged and low <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], high)
            else:
                merged.append([low, high])
        self.ranges = [(low, high) for low, high in merged]
        self._starts = [low for low, _ in self.ranges]

    def _index(self, address: int) -> int:
        i = bisect.bisect_right(self._starts, address) - 1
        return i if i >= 0 and self.ranges[i][1] >= address else -1

    def __contains__(self, address: object) -> bool:
        return isinstance(address, int) and self._index(address) >= 0

    def __len__(self) -> int:
        return sum(high - low + 1 for low, high in self.ranges)

    def __iter__(self) -> Iterator[int]:
        for low, high in self.ranges:
            yield from range(low, high + 1)

    def count_within(self, first: int, last: int) -> int:
        return sum(max(0, min(high, last) - max(low, first) + 1) for low, high in self.ranges)

    def end_of(self, address: int) -> int:
        """The last address of the range that holds ``address`` (which must be in the set)."""
        return self.ranges[self._index(address)][1]


@dataclass(frozen=True)
class NetworkSpace:
    name: str
    network: netaddr.IPNetwork
    reserved: AddressRanges  # addresses (as ints) the allocator never hands out
    first_host: int  # /31 and /32 have no network or broadcast address to skip
    last_host: int

    @property
    def usable(self) -> int:
        return self.last_host - self.first_host + 1

    def contains(self, address: int) -> bool:
        return self.first_host <= address <= self.last_host


def parse_address(text: str) -> int:
    # inet_pton is strict (dotted quad only) and ~10x faster than netaddr on the hot path
    # of allocating tens of thousands of addresses.
    try:
        value: int = struct.unpack("!I", socket.inet_pton(socket.AF_INET, text))[0]
    except (OSError, TypeError) as exc:
        raise AddressError(f"{text!r} is not an IPv4 address") from exc
    return value


def parse_network(text: str) -> netaddr.IPNetwork:
    try:
        net = netaddr.IPNetwork(text, version=4)
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        raise AddressError(f"{text!r} is not an IPv4 network in CIDR form") from exc
    if net.ip != net.network:
        raise AddressError(f"{text!r} has host bits set; the network is {net.cidr}")
    return net


def parse_reserved_entry(entry: str) -> tuple[int, int]:
    """A reserved entry (address, a-b range or CIDR) as an inclusive int range."""
    if "/" in entry:
        net = parse_network(entry)
        return int(net.first), int(net.last)
    if "-" in entry:
        low, _, high = entry.partition("-")
        first, last = parse_address(low.strip()), parse_address(high.strip())
        if last < first:
            raise AddressError(f"range {entry!r} ends before it starts")
        return first, last
    address = parse_address(entry)
    return address, address


def site_addresses(spec: dict[str, Any]) -> list[tuple[str, int]]:
    """Addresses the site itself uses on a network (gateway, DNS, NTP given as addresses)."""
    used = []
    if spec.get("gateway"):
        used.append(("gateway", parse_address(spec["gateway"])))
    for key in ("dns", "ntp"):
        for value in spec.get(key, []) or []:
            try:
                used.append((key, parse_address(value)))
            except AddressError:
                if key == "dns":
                    raise
                # an NTP server may be a host name; it holds no address here
    return used


def network_space(name: str, spec: dict[str, Any]) -> NetworkSpace:
    """Build a network's address space; raises AddressError on unreadable input."""
    net = parse_network(spec["cidr"])
    reserved: list[tuple[int, int]] = []
    first = int(net.first) + (0 if net.prefixlen >= 31 else 1)
    value = spec.get("reserved", [])
    if isinstance(value, int):
        if value > 0:
            reserved.append((first, min(first + value - 1, int(net.last))))
    else:
        for entry in value:
            low, high = parse_reserved_entry(entry)
            if high - low > 1 << 24:
                raise AddressError(f"reserved range {entry!r} is too large")
            low, high = max(low, int(net.first)), min(high, int(net.last))
            if low <= high:
                reserved.append((low, high))
    reserved.extend((address, address) for _, address in site_addresses(spec))
    last = int(net.last) if net.prefixlen >= 31 else int(net.last) - 1
    return NetworkSpace(name, net, AddressRanges(reserved), first, last)


def to_text(address: int) -> str:
    return socket.inet_ntoa(struct.pack("!I", address))


NEARLY_FULL = 0.9  # share of a network's free addresses in use above which it cannot grow
NEARLY_FULL_MIN_FREE = 10  # a network this small is full or not; "nearly" says nothing


def allocatable(space: NetworkSpace) -> int:
    """Addresses the allocator may hand to hosts: the host addresses less the reserved ones
    (ranges and counts of the plan, and the gateway, DNS and NTP addresses)."""
    return space.usable - space.reserved.count_within(space.first_host, space.last_host)


def nearly_full(hosts: int, free: int) -> bool:
    """The rule validate's network-nearly-full and audit share."""
    return free > NEARLY_FULL_MIN_FREE and hosts > NEARLY_FULL * free
