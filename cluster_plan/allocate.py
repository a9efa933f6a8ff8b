"""Stable address allocation: survivors keep their addresses, freed ones are held back.

The lock (``<plan>.lock.json``) records each host's address per network. Allocation is a pure
function of the plan's nodes and the previous lock, so re-running it on a fresh lock changes
nothing, and comparing the two tells whether a lock is stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cluster_plan.findings import Finding
from cluster_plan.networks import AddressError, NetworkSpace, network_space, parse_address, to_text
from cluster_plan.nodes import Node

LOCK_VERSION = 1
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


def _allocate_network(
    space: NetworkSpace,
    members: Sequence[Node],
    previous: dict[str, Any],
    reclaim: bool,
    findings: list[Finding],
) -> dict[str, Any]:
    name = space.name
    old_hosts: dict[str, str] = previous.get("hosts", {})
    released: dict[int, str] = {}
    if not reclaim:
        for text, host in previous.get("released", {}).items():
            try:
                address = parse_address(text)
            except AddressError:
                continue
            if space.contains(address):
                released[address] = host
    taken: dict[int, str] = {}
    member_names = {node.name for node in members}

    def usable(address: int) -> bool:
        return space.contains(address) and address not in space.reserved

    # Survivors first: a surviving host's address is never taken from it.
    pending: list[Node] = []
    for node in members:
        old = old_hosts.get(node.name)
        pin = node.pins.get(name)
        try:
            old_address = parse_address(old) if old else None
        except AddressError:
            old_address = None
        if (
            old_address is not None
            and usable(old_address)
            and old_address not in taken
            and (pin is None or pin == old)
        ):
            taken[old_address] = node.name
        else:
            pending.append(node)
    # Then pins, honoured or refused.
    unpinned: list[Node] = []
    for node in pending:
        pin = node.pins.get(name)
        if pin is None:
            unpinned.append(node)
            continue
        path = _pin_path(node, name)
        refusal = pin_refusal(space, pin, path)
        if refusal is not None:
            findings.append(refusal)
            continue
        address = parse_address(pin)
        if address in taken:
            findings.append(
                Finding(
                    "pinned-address-taken",
                    f"{pin} already belongs to {taken[address]} on network {name}",
                    path,
                    hint="pin another address, or remove or move that host first",
                )
            )
        else:
            taken[address] = node.name
            released.pop(address, None)  # an explicit pin may take back a freed address
    # A host moved by a pin leaves its old address behind, perhaps still configured on it:
    # hold it back like a removed host's.
    for node in pending:
        old = old_hosts.get(node.name)
        try:
            old_address = parse_address(old) if old else None
        except AddressError:
            continue
        if (
            not reclaim
            and old_address is not None
            and usable(old_address)
            and old_address not in taken
        ):
            released.setdefault(old_address, node.name)
    # New hosts get the lowest address that is neither used, reserved, nor recently freed.
    cursor = space.first_host
    unplaced = 0
    for node in unpinned:
        while cursor <= space.last_host and (
            cursor in taken or cursor in space.reserved or cursor in released
        ):
            # step over a whole reserved range at once; it may be millions of addresses
            cursor = space.reserved.end_of(cursor) + 1 if cursor in space.reserved else cursor + 1
        if cursor > space.last_host:
            unplaced += 1
            continue
        taken[cursor] = node.name
    if unplaced:
        findings.append(
            Finding(
                "network-full",
                f"network {name} ({space.network}) has no address left for {unplaced} host(s)",
                ("networks", name, "cidr"),
                hint="use a larger network"
                + (
                    ", or run `cluster-plan lock --reclaim` to reuse "
                    f"{len(released)} freed address(es)"
                    if released
                    else ""
                ),
            )
        )
    for host, text in old_hosts.items():
        if host in member_names:
            continue
        try:
            address = parse_address(text)
        except AddressError:
            continue
        if not reclaim and space.contains(address) and address not in taken:
            released[address] = host
    return {
        "cidr": str(space.network),
        "hosts": {host: to_text(address) for address, host in sorted(taken.items())},
        "released": {to_text(address): host for address, host in sorted(released.items())},
    }


def allocate_addresses(
    plan: dict[str, Any],
    nodes: Sequence[Node],
    previous: Lock | None = None,
    *,
    reclaim: bool = False,
) -> tuple[Lock, list[Finding]]:
    """The lock for ``nodes`` given the previous lock; findings for pins that cannot be had."""
    findings: list[Finding] = []
    networks: dict[str, Any] = {}
    old_networks = (previous or {}).get("networks", {})
    for name, spec in plan["networks"].items():
        try:
            space = network_space(name, spec)
        except AddressError as exc:
            findings.append(Finding("network-address", str(exc), ("networks", name)))
            continue
        members = [node for node in nodes if name in node.networks]
        networks[name] = _allocate_network(
            space, members, old_networks.get(name, {}), reclaim, findings
        )
    return {"version": LOCK_VERSION, "networks": networks}, findings


def lock_differences(current: Lock, fresh: Lock) -> list[str]:
    """What a stale lock lacks or has too much, in words (empty when the lock is current)."""
    problems = []
    cur_nets, new_nets = current.get("networks", {}), fresh.get("networks", {})
    for name in new_nets:
        if name not in cur_nets:
            problems.append(f"network {name} is not in the lock")
    for name in cur_nets:
        if name not in new_nets:
            problems.append(f"network {name} is in the lock but not in the plan")
    for name in new_nets:
        if name not in cur_nets:
            continue
        cur, new = cur_nets[name], new_nets[name]
        if cur.get("cidr") != new["cidr"]:
            problems.append(
                f"network {name} is {new['cidr']} in the plan, {cur.get('cidr')} in the lock"
            )
        cur_hosts, new_hosts = cur.get("hosts", {}), new["hosts"]
        missing = sorted(new_hosts.keys() - cur_hosts.keys())
        extra = sorted(cur_hosts.keys() - new_hosts.keys())
        moved = sorted(
            h for h in new_hosts.keys() & cur_hosts.keys() if new_hosts[h] != cur_hosts[h]
        )
        for label, hosts in (
            ("has no address for", missing),
            ("still holds", extra),
            ("holds another address for", moved),
        ):
            if hosts:
                shown = ", ".join(hosts[:5]) + (
                    f" and {len(hosts) - 5} more" if len(hosts) > 5 else ""
                )
                problems.append(f"network {name}: the lock {label} {shown}")
        if cur.get("released", {}) != new["released"] and not (missing or extra or moved):
            problems.append(f"network {name}: the lock's freed addresses differ")
    return problems
