"""Stable address allocation: survivors keep their addresses, freed ones are held back.

The lock (``<plan>.lock.json``) records each host's address per network. Allocation is a pure
function of the plan's nodes and the previous lock, so re-running it on a fresh lock changes
nothing, and comparing the two tells whether a lock is stale.

A host keeps its address whatever else changes in the plan. When the plan itself takes a
locked address away (a gateway or reserved range moved over it, a new CIDR), allocation
refuses with a finding naming the hosts, unless the caller allows moves explicitly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cluster_plan.plan.findings import Finding
from cluster_plan.plan.lockfile import LOCK_VERSION
from cluster_plan.plan.networks import (
    AddressError,
    NetworkSpace,
    network_space,
    parse_address,
    site_addresses,
    to_text,
)
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.placement import racks_section

Lock = dict[str, Any]


def _pin_path(node: Node, network: str) -> tuple[str, ...]:
    return ("node_groups", node.group, "nodes", node.name, "address", network)


def pin_refusal(space: NetworkSpace, pin: str, path: tuple[str, ...]) -> Finding | None:
    """Why ``pin`` can never be had on this network whatever the lock says, or None."""
    try:
        address = parse_address(pin)
    except AddressError as exc:
        return Finding("pinned-address", str(exc), path)
    if not space.contains(address):
        return Finding(
            "pinned-address-outside",
            f"{pin} is not a host address of network {space.name} ({space.network})",
            path,
        )
    if address in space.reserved:
        return Finding(
            "pinned-address-reserved",
            f"{pin} is reserved on network {space.name} (gateway, DNS, NTP or a reserved range)",
            path,
        )
    return None


def _address(text: str | None) -> int | None:
    try:
        return parse_address(text) if text else None
    except AddressError:
        return None


@dataclass
class _Network:
    """One network's allocation in progress."""

    space: NetworkSpace
    spec: dict[str, Any]
    old_hosts: dict[str, str]
    reclaim: bool
    allow_moves: bool
    taken: dict[int, str] = field(default_factory=dict)
    released: dict[int, str] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    moves: list[tuple[str, str, str]] = field(default_factory=list)  # host, old, why

    def usable(self, address: int) -> bool:
        return self.space.contains(address) and address not in self.space.reserved

    def why_unusable(self, address: int) -> tuple[str, tuple[str, ...]]:
        """Why a locked address can no longer be had, and the plan key that says so."""
        name = self.space.name
        if not self.space.contains(address):
            return f"outside {self.space.network}", ("networks", name, "cidr")
        for key, site in site_addresses_lenient(self.spec):
            if site == address:
                return f"now the {key} address", ("networks", name, key)
        return "now reserved", ("networks", name, "reserved")


def site_addresses_lenient(spec: dict[str, Any]) -> list[tuple[str, int]]:
    try:
        return site_addresses(spec)
    except AddressError:
        return []


def _keep_survivors(net: _Network, members: Sequence[Node]) -> list[Node]:
    """Survivors keep their address; returns the members still without one."""
    pending: list[Node] = []
    blocked: dict[tuple[str, tuple[str, ...]], list[str]] = defaultdict(list)
    for node in members:
        old_text = net.old_hosts.get(node.name)
        old = _address(old_text)
        pin = node.pins.get(net.space.name)
        if old is None or (pin is not None and pin != old_text):
            pending.append(node)  # new, or moved by a pin on purpose
        elif old in net.taken:
            blocked[(f"also locked for {net.taken[old]}", ("networks", net.space.name))].append(
                node.name
            )
            pending.append(node)
        elif not net.usable(old):
            blocked[net.why_unusable(old)].append(node.name)
            pending.append(node)
        else:
            net.taken[old] = node.name
    for (why, path), hosts in blocked.items():
        for host in hosts:
            net.moves.append((host, net.old_hosts[host], why))
        if not net.allow_moves:
            net.findings.append(_renumber_finding(net, why, path, hosts))
    return pending


def _renumber_finding(net: _Network, why: str, path: tuple[str, ...], hosts: list[str]) -> Finding:
    shown = ", ".join(f"{h} ({net.old_hosts[h]})" for h in hosts[:5])
    more = f" and {len(hosts) - 5} more" if len(hosts) > 5 else ""
    return Finding(
        "locked-address-lost",
        f"the locked address of {shown}{more} on network {net.space.name} is {why}; "
        "those hosts would be renumbered",
        path,
        hint="keep the plan off locked addresses, or run `cluster-plan lock --allow-moves` to "
        "renumber them (each move is listed)",
    )


def _place_pins(net: _Network, pending: Sequence[Node]) -> list[Node]:
    """Pins, honoured or refused; returns the pending members without a pin."""
    name = net.space.name
    unpinned: list[Node] = []
    for node in pending:
        pin = node.pins.get(name)
        if pin is None:
            unpinned.append(node)
            continue
        path = _pin_path(node, name)
        refusal = pin_refusal(net.space, pin, path)
        if refusal is not None:
            net.findings.append(refusal)
            continue
        address = parse_address(pin)
        if address in net.taken:
            net.findings.append(
                Finding(
                    "pinned-address-taken",
                    f"{pin} already belongs to {net.taken[address]} on network {name}",
                    path,
                    hint="pin another address, or remove or move that host first",
                )
            )
        else:
            net.taken[address] = node.name
            net.released.pop(address, None)  # an explicit pin may take back a freed address
    return unpinned


def _hold_back_left_addresses(net: _Network, pending: Sequence[Node]) -> None:
    """A host moved by a pin (or renumbered) leaves its old address behind, perhaps still
    configured on it: hold it back like a removed host's."""
    if net.reclaim:
        return
    for node in pending:
        old = _address(net.old_hosts.get(node.name))
        if old is not None and net.usable(old) and old not in net.taken:
            net.released.setdefault(old, node.name)


def _return_held_back(net: _Network, unpinned: Sequence[Node]) -> list[Node]:
    """A host that comes back (a group shrunk, then grew again) gets its held-back address."""
    held = {host: address for address, host in net.released.items()}
    new: list[Node] = []
    for node in unpinned:
        address = held.get(node.name)
        if address is not None and net.usable(address) and address not in net.taken:
            net.taken[address] = node.name
            del net.released[address]
        else:
            new.append(node)
    return new


def _fill_new(net: _Network, new: Sequence[Node]) -> None:
    """New hosts get the lowest address that is neither used, reserved, nor recently freed."""
    space = net.space
    cursor = space.first_host
    unplaced = 0
    for node in new:
        while cursor <= space.last_host and (
            cursor in net.taken or cursor in space.reserved or cursor in net.released
        ):
            # step over a whole reserved range at once; it may be millions of addresses
            cursor = space.reserved.end_of(cursor) + 1 if cursor in space.reserved else cursor + 1
        if cursor > space.last_host:
            unplaced += 1
            continue
        net.taken[cursor] = node.name
    if unplaced:
        freed = len(net.released)
        net.findings.append(
            Finding(
                "network-full",
                f"network {space.name} ({space.network}) has no address left for {unplaced} "
                "host(s)",
                ("networks", space.name, "cidr"),
                hint="use a larger network"
                + (
                    f", or run `cluster-plan lock --reclaim` to reuse {freed} freed address(es)"
                    if freed
                    else ""
                ),
            )
        )


def _release_removed(net: _Network, member_names: set[str]) -> None:
    if net.reclaim:
        return
    for host, text in net.old_hosts.items():
        address = _address(text)
        if host in member_names or address is None:
            continue
        if net.space.contains(address) and address not in net.taken:
            net.released[address] = host


def _previous_released(space: NetworkSpace, previous: dict[str, Any]) -> dict[int, str]:
    released: dict[int, str] = {}
    for text, host in previous.get("released", {}).items():
        address = _address(text)
        if address is not None and space.contains(address):
            released[address] = host
    return released


def _allocate_network(
    space: NetworkSpace,
    spec: dict[str, Any],
    members: Sequence[Node],
    previous: dict[str, Any],
    *,
    reclaim: bool,
    allow_moves: bool,
) -> _Network:
    net = _Network(space, spec, dict(previous.get("hosts", {})), reclaim, allow_moves)
    if not reclaim:
        net.released = _previous_released(space, previous)
    if net.findings:
        return net
    pending = _keep_survivors(net, members)
    if net.findings:  # refused: keep what the lock says, so nothing else moves either
        for node in pending:
            old = _address(net.old_hosts.get(node.name))
            if old is not None:
                net.taken.setdefault(old, node.name)
        return net
    unpinned = _place_pins(net, pending)
    _hold_back_left_addresses(net, pending)
    new = _return_held_back(net, unpinned)
    _fill_new(net, new)
    _release_removed(net, {node.name for node in members})
    return net


@dataclass
class Allocation:
    """The new lock's networks, the findings, and every host that changed address."""

    networks: dict[str, Any]
    findings: list[Finding]
    moves: list[str]


def allocate_networks(
    plan: dict[str, Any],
    nodes: Sequence[Node],
    previous: Lock | None = None,
    *,
    reclaim: bool = False,
    allow_moves: bool = False,
) -> Allocation:
    findings: list[Finding] = []
    moves: list[str] = []
    networks: dict[str, Any] = {}
    old_networks = (previous or {}).get("networks", {})
    for name, spec in plan["networks"].items():
        try:
            space = network_space(name, spec)
        except AddressError as exc:
            findings.append(Finding("network-address", str(exc), ("networks", name)))
            continue
        members = [node for node in nodes if name in node.networks]
        net = _allocate_network(
            space,
            spec,
            members,
            old_networks.get(name, {}),
            reclaim=reclaim,
            allow_moves=allow_moves,
        )
        findings += net.findings
        for host, old, why in net.moves:
            new = next((to_text(a) for a, h in net.taken.items() if h == host), "nothing")
            moves.append(f"{host} on {name}: {old} -> {new} ({why})")
        networks[name] = {
            "cidr": str(space.network),
            "hosts": {host: to_text(address) for address, host in sorted(net.taken.items())},
            "released": {to_text(a): host for a, host in sorted(net.released.items())},
        }
    return Allocation(networks, findings, moves)


def build_lock(
    plan: dict[str, Any],
    nodes: Sequence[Node],
    previous: Lock | None = None,
    *,
    reclaim: bool = False,
    allow_moves: bool = False,
) -> tuple[Lock, list[Finding], list[str]]:
    """The lock for ``nodes`` given the previous lock, the findings for what cannot be had,
    and every address move (only made when ``allow_moves``). The lock records the nodes'
    racks as they are: placement.place_racks decided them from the previous lock."""
    result = allocate_networks(plan, nodes, previous, reclaim=reclaim, allow_moves=allow_moves)
    lock: Lock = {
        "version": LOCK_VERSION,
        "networks": result.networks,
        "racks": racks_section(nodes, previous),
    }
    return lock, result.findings, result.moves


def allocate_addresses(
    plan: dict[str, Any],
    nodes: Sequence[Node],
    previous: Lock | None = None,
    *,
    reclaim: bool = False,
    allow_moves: bool = False,
) -> tuple[Lock, list[Finding]]:
    """As build_lock, without the list of moves."""
    lock, findings, _ = build_lock(plan, nodes, previous, reclaim=reclaim, allow_moves=allow_moves)
    return lock, findings
