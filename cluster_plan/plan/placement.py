"""Stable rack placement: a server that stands in a rack stays there.

A node group deals its nodes over its `racks`. The lock records where each host stands, so
growing a group or adding a rack to its list never moves an existing server: new nodes fill
the group's least-filled racks (a new rack first), and a host that comes back after the group
shrank returns to the rack it stood in. Only the plan can move a host: a per-node `rack`
override, or a rack taken out of the group's list (refused unless moves are allowed).
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node, group_racks


def _round_robin(nodes: Sequence[Node]) -> dict[str, str]:
    """Where nodes stood before the lock recorded racks (lock version 1): dealt by n."""
    return {node.name: node.rack for node in nodes if node.rack}


def locked_racks(previous: dict[str, Any] | None, nodes: Sequence[Node]) -> tuple[dict, dict]:
    """(hosts -> rack, released hosts -> rack) from a lock; a lock without racks predates
    placement, and its hosts stand where the round-robin deal put them."""
    if not previous:
        return {}, {}
    racks = previous.get("racks")
    if racks is None:
        locked_hosts = {h for net in previous.get("networks", {}).values() for h in net["hosts"]}
        dealt = _round_robin(nodes)
        return {h: r for h, r in dealt.items() if h in locked_hosts}, {}
    return dict(racks.get("hosts", {})), dict(racks.get("released", {}))


def place_racks(
    plan: dict[str, Any],
    nodes: Sequence[Node],
    previous: dict[str, Any] | None,
    *,
    allow_moves: bool = False,
) -> tuple[list[Node], list[Finding], list[str]]:
    """Nodes with their racks decided, findings for moves the plan forces, and the moves."""
    hosts, released = locked_racks(previous, nodes)
    by_group: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        by_group[node.group].append(node)
    placed: dict[str, str | None] = {}
    findings: list[Finding] = []
    moves: list[str] = []
    for group_name, members in by_group.items():
        group = plan["node_groups"][group_name]
        racks = group_racks(group)
        forced, fresh = _keep_racks(members, group, racks, hosts, released, placed)
        counts = Counter(placed[n.name] or "" for n in members if n.name in placed)
        _deal(fresh, racks, counts, placed)
        for rack, names in forced.items():
            moves += [f"{name}: rack {rack} -> {placed[name]}" for name in names]
            if not allow_moves:
                findings.append(_rack_finding(group_name, rack, names))
    out = [dataclasses.replace(node, rack=placed.get(node.name, node.rack)) for node in nodes]
    return out, findings, moves


def _keep_racks(
    members: list[Node],
    group: dict[str, Any],
    racks: list[str],
    hosts: dict[str, str],
    released: dict[str, str],
    placed: dict[str, str | None],
) -> tuple[dict[str, list[str]], list[Node]]:
    """Places the group's nodes that keep a rack (the plan's override, the rack the lock has
    them in, a released host's old rack) in `placed`; returns the nodes forced out of a rack
    the group no longer lists, by that rack, and the nodes still to place."""
    overrides = group.get("nodes") or {}
    forced: dict[str, list[str]] = defaultdict(list)
    fresh: list[Node] = []
    for node in members:
        override = (overrides.get(node.name) or {}).get("rack")
        stood = hosts.get(node.name)
        if override:
            placed[node.name] = override
        elif stood in racks:
            placed[node.name] = stood
        elif stood is not None:
            forced[stood].append(node.name)
            fresh.append(node)
        elif released.get(node.name) in racks:
            placed[node.name] = released[node.name]
        else:
            fresh.append(node)
    return forced, fresh


def _deal(
    fresh: list[Node], racks: list[str], counts: Counter[str], placed: dict[str, str | None]
) -> None:
    """Each fresh node to the group's least-filled rack, first in the list on a tie: a fresh
    group is dealt round-robin, and a rack added to the list takes the new nodes."""
    heap = [(counts[rack], i, rack) for i, rack in enumerate(dict.fromkeys(racks))]
    heapq.heapify(heap)
    for node in fresh:
        if not heap:
            placed[node.name] = None
            continue
        count, i, rack = heapq.heappop(heap)
        placed[node.name] = rack
        heapq.heappush(heap, (count + 1, i, rack))


def _rack_finding(group: str, rack: str, names: list[str]) -> Finding:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return Finding(
        "rack-move",
        f"rack {rack} is no longer in node group {group}'s racks, but {shown} stand(s) there; "
        "they would have to move",
        ("node_groups", group, "racks"),
        hint="keep the rack in the list, pin the hosts with nodes: {HOST: {rack: ...}}, or run "
        "`cluster-plan lock --allow-moves` to move them (each move is listed)",
    )


def racks_section(
    nodes: Iterable[Node], previous: dict[str, Any] | None
) -> dict[str, dict[str, str]]:
    """Where each host stands, and where removed hosts stood (so that they come back there;
    unlike a freed address, a rack's place holds nothing back, so --reclaim keeps it)."""
    hosts = {node.name: node.rack for node in nodes if node.rack}
    released: dict[str, str] = {}
    old = (previous or {}).get("racks") or {}
    for host, rack in {**old.get("released", {}), **old.get("hosts", {})}.items():
        if host not in hosts:
            released[host] = rack
    return {"hosts": dict(sorted(hosts.items())), "released": dict(sorted(released.items()))}
