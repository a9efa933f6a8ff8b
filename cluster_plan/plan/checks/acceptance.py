"""Acceptance thresholds that the plan's own links can meet, on the networks acceptance tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.topology import normalize

# TCP goodput over line rate: headers and framing cost ~6% at MTU 1500 and ~1% at 9000.
GOODPUT_1500 = 0.94
GOODPUT_9000 = 0.99


@dataclass(frozen=True)
class SlowLink:
    """The slowest host link of one tested network, and what makes it slow."""

    network: str
    gbps: float
    mtu: int
    cause: str  # "access switch tor3" or "the NIC of profile gpu-old"

    @property
    def ceiling(self) -> float:
        return self.gbps * (GOODPUT_9000 if self.mtu >= 9000 else GOODPUT_1500)


def _slowest_link(plan: Plan, nodes: list[Node], net: str) -> SlowLink | None:
    topo = normalize(plan["topology"])
    switch_of = {rack: name for name, sw in topo["access"].items() for rack in sw["racks"]}
    slowest: SlowLink | None = None
    for node in nodes:
        if net not in node.networks or node.rack not in switch_of:
            continue
        switch = switch_of[node.rack]
        # a host's link is as fast as the slower of its switch port and its NIC
        candidates = [(float(topo["access"][switch]["link_gbps"]), f"access switch {switch}")]
        for nic in plan["hardware"].get(node.hardware, {}).get("nics", []):
            if net in nic.get("networks", []) and "speed_gbps" in nic:
                candidates.append(
                    (float(nic["speed_gbps"]), f"the {nic['name']} NIC of profile {node.hardware}")
                )
        gbps, cause = min(candidates)
        if slowest is None or gbps < slowest.gbps:
            slowest = SlowLink(net, gbps, int(plan["networks"][net]["mtu"]), cause)
    return slowest


def _too_slow(links: list[SlowLink | None], min_gbps: float) -> list[SlowLink]:
    """The tested networks' slowest links that cannot carry min_gbps of TCP goodput."""
    # rounded: 10 * 0.94 = 9.3999...
    return [link for link in links if link is not None and min_gbps > round(link.ceiling, 6)]


def check_acceptance(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """One finding for a threshold no tested network can meet: it names the slowest link
    (the switch or NIC) and the networks it was seen on."""
    network_acc = (plan.get("acceptance") or {}).get("network") or {}
    min_gbps = network_acc.get("min_gbps")
    if min_gbps is None:
        return
    tested = [n for n in network_acc.get("networks") or [] if n in plan["networks"]]
    too_slow = _too_slow([_slowest_link(plan, nodes, net) for net in tested], min_gbps)
    if not too_slow:
        return
    worst = min(too_slow, key=lambda link: link.ceiling)
    others = [link.network for link in too_slow if link is not worst]
    also = (
        f"; also on network{'s' if len(others) > 1 else ''} {', '.join(others)}" if others else ""
    )
    yield Finding(
        "threshold-above-line-rate",
        f"min_gbps {min_gbps} is above what {worst.cause}'s {worst.gbps:g} Gb/s links carry as TCP "
        f"goodput at MTU {worst.mtu} on network {worst.network} (about {worst.ceiling:.2f} "
        f"Gb/s){also}",
        ("acceptance", "network", "min_gbps"),
        hint=f"at most {worst.ceiling:.2f}, faster links, or leave network {worst.network} out "
        "of acceptance.network.networks",
    )
