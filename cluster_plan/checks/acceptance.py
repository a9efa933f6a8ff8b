"""Acceptance thresholds that the plan's own links can meet."""

from __future__ import annotations

from collections.abc import Iterator

from cluster_plan.checks.base import Plan
from cluster_plan.findings import Finding
from cluster_plan.nodes import Node
from cluster_plan.topology import normalize

# TCP goodput over line rate: headers and framing cost ~6% at MTU 1500 and ~1% at 9000.
GOODPUT_1500 = 0.94
GOODPUT_9000 = 0.99


def check_acceptance(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    network_acc = (plan.get("acceptance") or {}).get("network") or {}
    min_gbps = network_acc.get("min_gbps")
    if min_gbps is None:
        return
    topo = normalize(plan["topology"])
    link_of_rack = {rack: sw["link_gbps"] for sw in topo["access"].values() for rack in sw["racks"]}
    tested = network_acc.get("networks") or list(plan["networks"])[1:] or list(plan["networks"])
    for net in tested:
        spec = plan["networks"].get(net)
        if spec is None:
            continue
        mtu = spec.get("mtu", 1500)
        efficiency = GOODPUT_9000 if mtu >= 9000 else GOODPUT_1500
        # a host's link is as fast as the slower of its switch port and its NIC
        nic_speed = {
            name: min(
                (
                    nic["speed_gbps"]
                    for nic in profile.get("nics", [])
                    if net in nic.get("networks", []) and "speed_gbps" in nic
                ),
                default=None,
            )
            for name, profile in plan["hardware"].items()
        }
        speeds = {
            min(link_of_rack[n.rack], nic_speed.get(n.hardware) or link_of_rack[n.rack])
            for n in nodes
            if net in n.networks and n.rack in link_of_rack
        }
        if not speeds:
            continue
        slowest = min(speeds)
        ceiling = slowest * efficiency
        if min_gbps > round(ceiling, 6):  # 10 * 0.94 is 9.399999999999999 in floats
            yield Finding(
                "threshold-above-line-rate",
                f"min_gbps {min_gbps} is above what a {slowest:g} Gb/s link carries as TCP "
                f"goodput at MTU {mtu} (about {ceiling:.2f} Gb/s)",
                ("acceptance", "network", "min_gbps"),
                hint=f"at most {ceiling:.2f}, or faster links",
            )
