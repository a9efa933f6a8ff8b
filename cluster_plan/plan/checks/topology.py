"""The network tree: core -> aggregation -> access, one access switch per rack."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.checks.hints import did_you_mean
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.topology import normalize, rack_switches

Topology = dict[str, dict[str, dict[str, Any]]]


def check_topology(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    topo = normalize(plan["topology"])
    level_of: dict[str, str] = {}
    for level in ("core", "aggregation", "access"):
        for name in topo[level]:
            if name in level_of:
                yield Finding(
                    "duplicate-switch",
                    f"switch {name} is both {level_of[name]} and {level}; switch names must be "
                    "unique",
                    ("topology", level, name),
                )
            level_of.setdefault(name, level)
    yield from _uplinks(topo, level_of)
    yield from _unused_cores(plan["topology"]["core"], topo)
    yield from _racks(plan, topo, nodes)
    yield from _oversubscription(topo, nodes)
    yield from _ports(topo, nodes)


def _uplinks(topo: Topology, level_of: dict[str, str]) -> Iterator[Finding]:
    for name, agg in topo["aggregation"].items():
        for i, core in enumerate(agg["uplinks"]):
            if core not in topo["core"]:
                yield _bad_uplink(
                    core,
                    "core",
                    level_of,
                    list(topo["core"]),
                    ("topology", "aggregation", name, "uplinks", i),
                    "uplinks of an aggregation switch go to core switches",
                )
    used_aggs = set()
    for name, access in topo["access"].items():
        path = ("topology", "access", name)
        used_aggs.add(access["uplink"])
        if access["uplink"] not in topo["aggregation"]:
            yield _bad_uplink(
                access["uplink"],
                "aggregation",
                level_of,
                list(topo["aggregation"]),
                (*path, "uplink"),
                "an access switch uplinks to an aggregation switch",
            )
        if not access["racks"]:
            yield Finding("missing-key", "an access switch serves rack or racks", path)
    for name in topo["aggregation"]:
        if name not in used_aggs:
            yield Finding(
                "unused-switch",
                f"aggregation switch {name} has no access switches",
                ("topology", "aggregation", name),
                severity="warning",
            )


def _unused_cores(core: Any, topo: Topology) -> Iterator[Finding]:
    used = {name for agg in topo["aggregation"].values() for name in agg["uplinks"]}
    for i, name in enumerate(topo["core"]):
        if name not in used:
            yield Finding(
                "unused-switch",
                f"core switch {name} has no aggregation switch below it",
                ("topology", "core", i if isinstance(core, list) else name),
                severity="warning",
            )


def _bad_uplink(
    name: str,
    level: str,
    level_of: dict[str, str],
    known: list[str],
    path: tuple[Any, ...],
    wrong_level_hint: str,
) -> Finding:
    if name in level_of:  # a switch, but of the wrong level
        return Finding(
            "topology-not-a-tree",
            f"{level} switch {name!r} is not defined",
            path,
            hint=wrong_level_hint,
        )
    return Finding(
        "unknown-reference",
        f"{level} switch {name!r} is not defined",
        path,
        hint=did_you_mean(name, known),
    )


def _racks(plan: Plan, topo: Topology, nodes: list[Node]) -> Iterator[Finding]:
    served = rack_switches(topo)
    for rack, switches in served.items():
        if len(switches) > 1:
            yield Finding(
                "rack-multihomed",
                f"rack {rack} is served by {', '.join(switches)}; each rack hangs off one access "
                "switch",
                ("topology", "access", switches[1], "racks"),
            )
    declared = plan.get("racks") or {}
    racks = set(declared or served)
    used_racks = {node.rack for node in nodes if node.rack}
    for rack in sorted(racks | used_racks):
        if rack not in served and (rack in racks or rack in declared):
            where: tuple[str, ...] = ("racks", rack) if rack in declared else ("topology", "access")
            yield Finding(
                "rack-without-switch",
                f"rack {rack} has no access switch",
                where,
                hint="add it to an access switch's racks",
            )


def _oversubscription(topo: Topology, nodes: list[Node]) -> Iterator[Finding]:
    """A warning: many sites accept 3:1 at the access layer."""
    per_rack = Counter(node.rack for node in nodes)
    for name, access in topo["access"].items():
        hosts = sum(per_rack[rack] for rack in access["racks"])
        uplink = access.get("uplink_gbps")
        if uplink and hosts:
            ratio = hosts * access["link_gbps"] / uplink
            if ratio > 3:
                yield Finding(
                    "oversubscribed",
                    f"access switch {name} carries {hosts} x {access['link_gbps']} Gb/s on "
                    f"{uplink} Gb/s of uplink ({ratio:.1f}:1)",
                    ("topology", "access", name, "uplink_gbps"),
                    severity="warning",
                    hint="suppress with a reason if intended",
                )


def _ports(topo: Topology, nodes: list[Node]) -> Iterator[Finding]:
    """A host takes a port of its rack's access switch; `ports` says how many there are."""
    per_rack = Counter(node.rack for node in nodes)
    for name, access in topo["access"].items():
        ports = access.get("ports")
        hosts = sum(per_rack[rack] for rack in access["racks"])
        if ports is not None and hosts > ports:
            yield Finding(
                "switch-ports",
                f"access switch {name} has {ports} host ports, but its racks "
                f"({', '.join(access['racks'])}) hold {hosts} hosts",
                ("topology", "access", name, "ports"),
                hint="spread the hosts over more racks or switches, or correct ports",
            )
